"""The task table: one registered handler per queue (`REGISTRY`), and the import of SKIPLOCK_TASKS' modules.

Near the bottom of the queue core: the producer reads it for a task's options, so it imports nothing above
itself. `@task` (core/task_decorator.py) fills it; a handler's `job` is core/job_context.py's JobContext.
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from skiplock.core.errors import ConfigError, TaskImportError


@dataclass(frozen=True)
class Task:
    """A registered handler and its per-queue options."""

    queue: str
    func: Callable[..., Any]
    wants_job: bool
    lease_seconds: float | None = None
    max_attempts: int | None = None
    options: dict[str, Any] = field(default_factory=dict)
    # an `async def` handler: the worker runs it on its event loop thread (worker/runtime/async_pool.py)
    is_async: bool = False
    # payload version this handler takes, and upcasters {from_version: fn(payload) -> next version's}
    # (worker/core/features/versions.py); jobs are stamped with `version` at enqueue
    version: int = 1
    upgrade: dict[int, Callable[[Any], Any]] = field(default_factory=dict)
    # the jobs' lock_key: a fixed string, or a function of the payload (worker/runtime/flow.py), or None
    lock_key: Any = None
    # global limits declared in code, written to queue_limits when a worker starts (worker/core/features/limits.py)
    concurrency: int | None = None
    rate: Any = None
    # a batch handler (`def handle(payloads, jobs)`, core/batch_handlers.py): called with up to batch_size
    # claimed jobs, after waiting at most batch_wait seconds for the batch to fill (runtime/batch_runner.py)
    batch_size: int | None = None
    batch_wait: float = 0.0

    @property
    def is_batch(self) -> bool:
        return self.batch_size is not None

    def __call__(self, payload: Any, job: Any) -> Any:  # job: a JobContext (core/job_context.py)
        if self.wants_job:
            return self.func(payload, job=job)
        return self.func(payload)


class Registry:
    """Queue name -> Task. One global instance (`REGISTRY`) is what `@task` fills."""

    def __init__(self) -> None:
        self._tasks: dict[str, Task] = {}

    def add(self, task: Task) -> None:
        existing = self._tasks.get(task.queue)
        if existing is not None and existing.func is not task.func:
            raise ConfigError(
                f"queue {task.queue!r} already has a handler ({qualname(existing.func)}); "
                f"cannot also register {qualname(task.func)}: one handler per queue")
        self._tasks[task.queue] = task

    def get(self, queue: str) -> Task | None:
        return self._tasks.get(queue)

    def queues(self) -> list[str]:
        return sorted(self._tasks)

    def clear(self) -> None:
        self._tasks.clear()


REGISTRY = Registry()
# @task's extra keywords -> fn(queue, handler, value) that takes each. Those functions live in modules
# above this one (error hooks, recurring schedules), so the one list of them is in the package root
# (skiplock/__init__.py), which every import of skiplock runs first.
TaskOption = Callable[[str, Callable[..., Any], Any], None]
TASK_OPTIONS: dict[str, TaskOption] = {}


def qualname(func: Callable[..., Any]) -> str:
    return f"{getattr(func, '__module__', '?')}.{getattr(func, '__qualname__', repr(func))}"


def import_task_modules(modules: tuple[str, ...] | list[str]) -> None:
    """Import each module so its @task decorators run; a failure names the module and the cause."""
    # `skiplock worker` is a console script, whose sys.path starts at its bin folder: make the
    # application's own folder importable, as `celery worker` and `rq worker` do.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as exc:
            where = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
            at = f" ({where.filename}:{where.lineno})" if where else ""
            raise TaskImportError(
                f"cannot import task module {name!r} from SKIPLOCK_TASKS/--tasks: "
                f"{type(exc).__name__}: {exc}{at}") from exc
