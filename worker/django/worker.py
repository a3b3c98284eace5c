"""What `manage.py skiplock_worker` runs: skiplock's worker, set up from a TASKS backend."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from skiplock.core.errors import ConfigError


@dataclass(frozen=True)
class WorkerOptions:
    """The command's options; None leaves skiplock's setting (environment, then default) as it is."""

    backend: str = "default"
    queues: tuple[str, ...] = ()
    concurrency: int | None = None
    batch_size: int | None = None
    poll_interval: float | None = None
    shutdown_grace: float | None = None
    health_port: int | None = None
    migrate: bool = False

    @classmethod
    def from_command(cls, given: dict[str, Any]) -> WorkerOptions:
        queues = tuple(q.strip() for q in (given.get("queues") or "").split(",") if q.strip())
        for name in ("concurrency", "batch_size", "poll_interval", "shutdown_grace", "health_port"):
            if given.get(name) is not None and given[name] <= 0:
                raise ConfigError(f"--{name.replace('_', '-')} must be > 0, got {given[name]}")
        return cls(given.get("backend") or "default", queues, given.get("concurrency"), given.get("batch_size"),
                   given.get("poll_interval"), given.get("shutdown_grace"), given.get("health_port"),
                   bool(given.get("migrate")))


def run_worker(options: WorkerOptions) -> int:
    """Run the worker until SIGTERM/SIGINT; its exit code."""
    from skiplock.core.plumbing.config import load_settings
    from skiplock.core.plumbing.logs import configure_logging
    from skiplock.core.plumbing.migrate import apply_migrations
    from skiplock.core.registry import REGISTRY, import_task_modules
    from skiplock.django.backend import SkiplockBackend
    from skiplock.django.compat import task_backends
    from skiplock.django.database import database_url
    from skiplock.django.runner import register_queues
    from skiplock.runtime.runner import Worker

    try:
        backend = task_backends[options.backend]
    except Exception as exc:
        raise ConfigError(f"no TASKS backend {options.backend!r}: {exc}") from None
    if not isinstance(backend, SkiplockBackend):
        raise ConfigError(f"TASKS[{options.backend!r}] is {type(backend).__name__}, not "
                          "skiplock.django.SkiplockBackend: nothing for a skiplock worker to run")
    unknown = sorted(set(options.queues) - backend.queues)
    if unknown:
        raise ConfigError(f"--queues: {unknown[0]!r} is not in TASKS[{options.backend!r}]['QUEUES'] "
                          f"({', '.join(sorted(backend.queues))})")
    queues = list(options.queues or sorted(backend.queues))
    config = backend.config
    settings = load_settings(database_url=database_url(backend.database), concurrency=options.concurrency,
                             batch_size=options.batch_size, poll_interval=options.poll_interval,
                             shutdown_grace=options.shutdown_grace, health_port=options.health_port,
                             backoff_base=config.backoff_base, backoff_cap=config.backoff_cap)
    configure_logging(settings.log_format, settings.log_level)
    if settings.tasks:  # skiplock's own @task handlers (SKIPLOCK_TASKS) run in the same worker
        import_task_modules(settings.tasks)
    register_queues(queues, {q: dict(v) for q, v in config.queues.items()})
    if options.migrate:
        apply_migrations(settings.session_url)
    own = [q for q in REGISTRY.queues() if q not in queues] if settings.tasks else []
    worker = Worker(settings, REGISTRY, queues=[*queues, *own])
    return worker.run(install_signals=True, exit_hard=True)
