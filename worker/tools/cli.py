"""The `skiplock` command: migrate, enqueue, worker, queues, dev, and the sub-command modules' commands.

Every error a person can fix ends as one line on stderr and exit status 2, not a traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

import psycopg

from skiplock.core.errors import ConfigError, EnqueueError, SkiplockError
from skiplock.core.plumbing.config import load_settings
from skiplock.core.plumbing.logs import configure_logging
from skiplock.tools.commands import COMMANDS, command

log = logging.getLogger("skiplock.cli")


# ---- migrate --------------------------------------------------------------------------------


def _migrate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--allow-changed", action="store_true",
                   help="go on when an applied migration's file changed since (SKIPLOCK_MIGRATE_ALLOW_CHANGED=1)")


@command("migrate", "apply migrations/*.sql to DATABASE_URL (safe to re-run)", _migrate_args)
def _migrate(args: argparse.Namespace) -> int:
    from skiplock.core.plumbing.migrate import allow_changed_from_env, apply_migrations

    applied = apply_migrations(load_settings().session_url,  # its advisory lock needs a session
                               allow_changed=args.allow_changed or allow_changed_from_env())
    print(f"applied {len(applied)} migration(s)" + (f": {', '.join(applied)}" if applied else "; up to date"))
    return 0


# ---- enqueue --------------------------------------------------------------------------------


def _enqueue_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("queue", help="queue name")
    p.add_argument("payload", help="the job's payload as JSON, e.g. '{\"user_id\": 1}'")
    p.add_argument("--priority", type=int, default=0, help="larger runs earlier (default 0)")
    p.add_argument("--delay", type=float, default=None, help="seconds to wait before the job is ready")
    p.add_argument("--unique-key", default=None, help="collapse onto an in-flight job with this key")
    p.add_argument("--max-attempts", type=int, default=None, help="runs before the job is dead")


@command("enqueue", "enqueue one job from the shell", _enqueue_args)
def _enqueue(args: argparse.Namespace) -> int:
    from skiplock.core.producer import close_default_pool, enqueue

    try:
        payload = json.loads(args.payload)
    except json.JSONDecodeError as exc:
        raise EnqueueError(f"payload is not valid JSON: {exc}") from None
    try:
        job_id = enqueue(args.queue, payload, priority=args.priority, delay=args.delay,
                         unique_key=args.unique_key, max_attempts=args.max_attempts)
    finally:
        close_default_pool()
    if job_id is None:
        print(f"not enqueued: a job with unique key {args.unique_key!r} is already queued or running")
    else:
        print(job_id)
    return 0


# ---- worker ---------------------------------------------------------------------------------


def _worker_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tasks", help="comma-separated modules with @task handlers (SKIPLOCK_TASKS)")
    p.add_argument("--queues", help="comma-separated queues to work (default: all with handlers)")
    p.add_argument("--concurrency", type=int, help="handler threads (SKIPLOCK_CONCURRENCY)")
    p.add_argument("--batch-size", type=int, help="most jobs per claim (SKIPLOCK_BATCH_SIZE)")
    p.add_argument("--poll-interval", type=float, help="seconds between idle polls")
    p.add_argument("--migrate", action="store_true", help="apply migrations before starting")
    p.add_argument("--health-port", type=int, help="serve /healthz and /metrics here (SKIPLOCK_HEALTH_PORT)")


def _positive(name: str, value: float | None) -> float | None:
    if value is not None and value <= 0:
        raise SkiplockError(f"{name} must be > 0, got {value}")
    return value


@command("worker", "run a worker process (same as python -m skiplock)", _worker_args)
def _worker(args: argparse.Namespace) -> int:
    from skiplock.core.plumbing.migrate import apply_migrations
    from skiplock.core.registry import REGISTRY, import_task_modules
    from skiplock.runtime.runner import Worker

    settings = load_settings(
        tasks=tuple(m.strip() for m in args.tasks.split(",") if m.strip()) if args.tasks else None,
        queues=tuple(q.strip() for q in args.queues.split(",") if q.strip()) if args.queues else None,
        concurrency=_positive("--concurrency", args.concurrency),
        batch_size=_positive("--batch-size", args.batch_size),
        poll_interval=_positive("--poll-interval", args.poll_interval),
        health_port=_positive("--health-port", args.health_port),
    )
    configure_logging(settings.log_format, settings.log_level)
    url = settings.require_database_url()
    if not settings.tasks:
        raise SkiplockError("no task modules: set SKIPLOCK_TASKS=myapp.tasks or pass --tasks myapp.tasks")
    from skiplock.runtime.environment import setup_frameworks

    framework = setup_frameworks()  # django.setup() when DJANGO_SETTINGS_MODULE is set: tasks may import models
    if framework:
        log.info("set up %s before importing the task modules", framework)
    import_task_modules(settings.tasks)
    from skiplock.core.plumbing.db import check_database

    # fail fast, in one line, on a URL that parses but can never connect (the runner checks the schema)
    check_database(url)
    if args.migrate:
        apply_migrations(settings.session_url)
    worker = Worker(settings, REGISTRY)
    return worker.run(install_signals=True, exit_hard=True)


# ---- queues limit ----------------------------------------------------------------------------


def _queues_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=("limit", "limits"),
                   help="limit: set or clear one queue's limits; limits: list every limited queue")
    p.add_argument("queue", nargs="?", help="the queue (for limit)")
    p.add_argument("--concurrency", help="most jobs of the queue running at once, all workers together "
                   "('none' removes it)")
    p.add_argument("--rate", help="most jobs started per second, e.g. 100/s, 30/m ('none' removes it)")
    p.add_argument("--burst", type=float, help="rate tolerance: extra jobs any one second may start "
                   "(default rate/10, at least 1)")
    p.add_argument("--per-tenant-concurrency", help="most jobs of each tenant running at once ('none' removes it)")
    p.add_argument("--per-tenant-rate", help="most jobs of each tenant started per second, e.g. 10/s "
                   "('none' removes it)")
    p.add_argument("--per-tenant-burst", type=float, help="each tenant's rate tolerance (default rate/10, at least 1)")
    p.add_argument("--clear", action="store_true", help="remove every limit, global and per tenant")


def _print_limits(conn: psycopg.Connection) -> None:
    from skiplock.core.features.limits import list_limits

    rows = list_limits(conn)
    if not rows:
        print("no limited queues")
    for r in rows:
        conc = f"concurrency {r.concurrency} ({r.running} running)" if r.concurrency else f"{r.running} running"
        rate = f"rate {r.rate:g}/s burst {r.burst:g}" if r.rate else "no rate limit"
        tenant = ""
        if r.tenant_limits:
            each = [f"concurrency {r.tenant_concurrency}"] if r.tenant_concurrency else []
            each += [f"rate {r.tenant_rate:g}/s burst {r.tenant_burst:g}"] if r.tenant_rate and r.tenant_burst else []
            tenant = "; per tenant: " + ", ".join(each)
        print(f"{r.queue}: {conc}, {rate}{tenant}" + (f"  [set by {r.updated_by}]" if r.updated_by else ""))


def _changes_limits(args: argparse.Namespace) -> bool:
    return args.clear or any(v is not None for v in (
        args.concurrency, args.rate, args.burst, args.per_tenant_concurrency, args.per_tenant_rate,
        args.per_tenant_burst))


@command("queues", "per-queue limits: queues limit QUEUE --concurrency N --rate 100/s --per-tenant-concurrency N",
         _queues_args)
def _queues(args: argparse.Namespace) -> int:
    import getpass

    from skiplock.core.features import audit, limits
    from skiplock.core.plumbing.db import connect

    url = load_settings().require_database_url()
    with connect(url, "skiplock-cli") as conn:
        if args.action == "limits" or (args.queue and not _changes_limits(args)):
            _print_limits(conn)
            return 0
        if not args.queue:
            raise SkiplockError("queues limit needs a QUEUE")
        current = {r.queue: r for r in limits.list_limits(conn)}.get(args.queue)
        # every value is parsed and checked before anything is written; an option not given keeps its
        # current value, 'none' removes it
        wanted = _global_limits(args, current) if not args.clear else {"concurrency": None, "rate": None, "burst": None}
        per_tenant = _tenant_limits(args, current) if not args.clear else {"concurrency": None, "rate": None,
                                                                           "burst": None}
        actor = f"cli:{getpass.getuser()}"
        with conn.transaction():  # the change and its audit row commit together
            limits.set_limit(conn, args.queue, actor=actor, **wanted)
            limits.set_tenant_limit(conn, args.queue, actor=actor, **per_tenant)
            audit.record(conn, actor, "cli", "set queue limits", 1,
                         {"queue": args.queue, **wanted, **{f"per_tenant_{k}": v for k, v in per_tenant.items()}})
        _print_limits(conn)
    return 0


def _global_limits(args: argparse.Namespace, current: Any) -> dict[str, Any]:
    """The queue's global limits after this command: set_limit's keywords, checked."""
    from skiplock.core.features import limits

    concurrency = current.concurrency if current else None
    rate = current.rate if current else None
    burst = args.burst if args.burst is not None else (current.burst if current and args.rate is None else None)
    if args.concurrency is not None:
        concurrency = None if args.concurrency == "none" else _whole("--concurrency", args.concurrency)
    if args.rate is not None:
        rate = None if args.rate == "none" else limits.parse_rate(args.rate)
    rate, burst = limits.checked_rate(rate, burst)
    return {"concurrency": concurrency, "rate": rate, "burst": burst}


def _tenant_limits(args: argparse.Namespace, current: Any) -> dict[str, Any]:
    """The queue's per-tenant limits after this command: set_tenant_limit's keywords, checked."""
    from skiplock.core.features import limits

    concurrency = current.tenant_concurrency if current else None
    rate = current.tenant_rate if current else None
    burst = (args.per_tenant_burst if args.per_tenant_burst is not None
             else (current.tenant_burst if current and args.per_tenant_rate is None else None))
    if args.per_tenant_concurrency is not None:
        concurrency = (None if args.per_tenant_concurrency == "none"
                       else _whole("--per-tenant-concurrency", args.per_tenant_concurrency))
    try:
        if args.per_tenant_rate is not None:
            rate = None if args.per_tenant_rate == "none" else limits.parse_rate(args.per_tenant_rate)
        if rate is None and args.per_tenant_burst is not None:
            raise ConfigError("burst needs a rate: give --per-tenant-rate too")
        rate, burst = limits.checked_rate(rate, burst)
    except ConfigError as exc:  # say which option: the same words describe the global rate
        raise SkiplockError(f"per-tenant {exc}") from None
    return {"concurrency": concurrency, "rate": rate, "burst": burst}


def _whole(option: str, text: str) -> int:
    from skiplock.core.features.limits import check_concurrency

    try:
        return check_concurrency(int(text))
    except ValueError:
        raise SkiplockError(f"{option} must be a whole number >= 1 or 'none', got {text!r}") from None


# ---- dev ------------------------------------------------------------------------------------


def _dev_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-dir", default=None, help="embedded PostgreSQL folder (default .skiplock-dev/pg)")
    p.add_argument("--no-demo", action="store_true", help="do not enqueue the demo workload")
    p.add_argument("--port", type=int, default=None, help="console port (default $PORT, else 5000, else a free port)")


@command("dev", "run everything locally: embedded PostgreSQL if no DATABASE_URL, worker and demo", _dev_args)
def _dev(args: argparse.Namespace) -> int:
    from skiplock.tools.dev import run_dev

    return run_dev(data_dir=args.data_dir, demo=not args.no_demo, port=args.port)


# ---- entry point ----------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The argparse tree of every registered command."""
    _load_subcommands()
    from skiplock import __version__

    parser = argparse.ArgumentParser(prog="skiplock", description="PostgreSQL-only background jobs.")
    parser.add_argument("--version", action="version", version=f"skiplock {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (help_text, add_args, run) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        add_args(p)
        p.set_defaults(run=run)
    return parser


def _load_subcommands() -> None:
    """Import the modules that add commands (console, schedules, doctor, bench, jobs, capacity, schema).

    Imported here, when a parser is built, not at the top: `import skiplock.tools.cli` stays light.
    Each registers its command in skiplock.tools.commands as it is imported; a module missing from
    the package fails here, loudly."""
    from skiplock.tools import (  # noqa: F401  (imported for their @command registrations)
        bench,
        capacity_cli,
        doctor_cli,
        jobs_cli,
        recurring_cli,
        schema_cli,
        web_cli,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(list(argv) if argv is not None else None)
    try:
        result: Any = args.run(args)
        return int(result or 0)
    except SkiplockError as exc:
        print(f"skiplock: error: {exc}", file=sys.stderr)
        return 2
    except psycopg.OperationalError as exc:
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"skiplock: error: cannot reach the database: {detail}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # the reader went away (`skiplock jobs list --json | head`): stop quietly, as `cat` does. Python's
        # own flush of stdout at exit would raise again, so stdout becomes /dev/null first.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, the status a shell shows for a command its pipe's reader cut short


if __name__ == "__main__":
    # `python -m skiplock.tools.cli` runs this file as __main__, a second copy of the module: plugin
    # commands register in skiplock.tools.cli.COMMANDS, so dispatch through that module's main.
    from skiplock.tools.cli import main as _main

    sys.exit(_main())
