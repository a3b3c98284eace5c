"""Handlers: `@task("emails")` registers one function per queue; SKIPLOCK_TASKS names the modules."""

from __future__ import annotations

import importlib
import inspect
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from skiplock.core import typed
from skiplock.core.errors import ConfigError, JobOwnershipLost, TaskImportError


@dataclass(frozen=True)
class JobContext:
    """What a handler may ask for besides the payload (declare a parameter named `job`)."""

    id: int
    queue: str
    attempt: int
    max_attempts: int
    priority: int
    run_at: datetime
    created_at: datetime
    started_at: datetime
    unique_key: str | None
    worker_id: str
    # Where a success goes (Settings.history): job.complete() writes what the worker's ack would.
    history: str = "delete"
    # Set by complete()/complete_async() once the fenced completion ran in the handler's
    # transaction: the worker then leaves the job to that transaction and does not ack it again.
    _completed: list[bool] = field(default_factory=list, compare=False, repr=False)
    _cache: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)  # parents, read once

    @property
    def completed_in_transaction(self) -> bool:
        """True once complete()/complete_async() finished this run in the handler's own transaction."""
        return bool(self._completed)

    def complete(self, conn: Any, result: Any = None) -> None:
        """Mark this run's job done inside the transaction of `conn`, with the handler's own writes.

        `conn`: a psycopg 3 or psycopg2 connection, an SQLAlchemy Connection, Session or scoped_session
        (Flask-SQLAlchemy's db.session), or a Django connection. The completion is fenced (this worker,
        this attempt, still running): if the run lost the job, JobOwnershipLost is raised and the
        caller's transaction must roll back (a `with conn.transaction()` / `atomic()` /
        `session.begin()` block does that by itself).
        Commit right after: until then the job's row and its job_stats row stay locked.
        """
        from skiplock.core import adapters, core

        text, refused = _result_text(result)
        sql, params = core.complete_statement(self.worker_id, self.id, self.attempt, history=self.history,
                                              result=text, result_error=refused)
        self._check(adapters.run_sync(conn, sql, params))

    async def complete_async(self, conn: Any, result: Any = None) -> None:
        """complete() for a psycopg AsyncConnection, an asyncpg Connection, or an SQLAlchemy
        AsyncConnection/AsyncSession/async_scoped_session."""
        from skiplock.core import adapters, core

        text, refused = _result_text(result)
        sql, params = core.complete_statement(self.worker_id, self.id, self.attempt, history=self.history,
                                              result=text, result_error=refused)
        self._check(await adapters.run_async(conn, sql, params))

    def _check(self, rows: Sequence[Any]) -> None:
        if not rows:
            raise JobOwnershipLost(
                f"job {self.id}: attempt {self.attempt} on worker {self.worker_id} no longer owns it "
                "(lease lost); roll this transaction back")
        self._completed.append(True)

    @property
    def cancel_requested(self) -> bool:
        """True once an operator asked to cancel this run (seen at the worker's heartbeat)."""
        from skiplock.core.cancel import is_requested  # cancel imports core, which must not load here

        return is_requested(self.id)

    # ---- workflows (docs/howto/workflows.md): read lazily, on the producer's pool --------------------

    def progress(self, fraction: float, message: str | None = None) -> None:
        """Report how far this run is (0..1), with an optional message: cheap enough to call per item.

        Shown on the console's Long-runners and returned by skiplock.status(); written by the
        worker's heartbeat about once a second (worker/core/progress.py).
        """
        from skiplock.core import progress

        progress.report(self.id, fraction, message)

    @property
    def parent_results(self) -> dict[int, Any]:
        """Each parent's id -> its stored result (None when it returned nothing, or did not succeed)."""
        return {parent: result for parent, _state, result in self._parents()}

    @property
    def parent_states(self) -> dict[int, str]:
        """Each parent's id -> its final state (succeeded, dead, failed): with on_dependency_failure="run"
        a dependent runs after a failed parent too, and can tell."""
        return {parent: state for parent, state, _result in self._parents()}

    def _parents(self) -> list[tuple[int, str, Any]]:
        if not self._cache.get("parents"):
            from skiplock.core import queries

            self._cache["parents"] = _read(queries.PARENTS_OF, {"job": self.id})
        return self._cache["parents"]

    @property
    def batch(self) -> Any:
        """The batch this job belongs to, or calls back for: a BatchInfo (id, total, succeeded, dead,
        cancelled, pending) read now; None when it has none."""
        from skiplock.core import queries
        from skiplock.core.links import BatchInfo

        rows = _read(queries.BATCH_OF_JOB, {"job": self.id})
        return BatchInfo.from_row(rows[0]) if rows else None

    def check_cancelled(self) -> None:
        """Raise Cancelled if an operator asked to cancel this run: call it between units of work."""
        if self.cancel_requested:
            from skiplock.core.errors import Cancelled

            raise Cancelled(f"job {self.id}: cancel requested")


def _read(sql: str, params: dict[str, Any]) -> list[Any]:
    """A read for a handler's JobContext, on the producer's pool (DATABASE_URL)."""
    from skiplock.core.producer import default_pool

    with default_pool().connection() as conn:
        return conn.execute(sql, params).fetchall()


def _result_text(value: Any) -> tuple[str | None, str | None]:
    """complete(conn, result=...)'s value as stored JSON, or why it is not stored (SKIPLOCK_MAX_RESULT_BYTES)."""
    if value is None:
        return None, None
    from skiplock.core.config import load_settings
    from skiplock.core.results import encode_result

    return encode_result(value, load_settings().max_result_bytes)


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
    # (worker/core/versions.py); jobs are stamped with `version` at enqueue
    version: int = 1
    upgrade: dict[int, Callable[[Any], Any]] = field(default_factory=dict)
    # the jobs' lock_key: a fixed string, or a function of the payload (worker/runtime/flow.py), or None
    lock_key: Any = None
    # global limits declared in code, written to queue_limits when a worker starts (worker/core/limits.py)
    concurrency: int | None = None
    rate: Any = None

    def __call__(self, payload: Any, job: JobContext) -> Any:
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
                f"queue {task.queue!r} already has a handler ({_qualname(existing.func)}); "
                f"cannot also register {_qualname(task.func)}: one handler per queue")
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


def _qualname(func: Callable[..., Any]) -> str:
    return f"{getattr(func, '__module__', '?')}.{getattr(func, '__qualname__', repr(func))}"


def task(
    queue: str,
    *,
    lease: float | None = None,
    max_attempts: int | None = None,
    version: int = 1,
    upgrade: dict[int, Callable[[Any], Any]] | None = None,
    lock_key: str | Callable[[Any], str | None] | None = None,
    concurrency: int | None = None,
    rate: float | str | None = None,
    **options: Any,
) -> Callable[[Callable[..., Any]], typed.TaskHandle]:
    """Register the decorated function as the handler of `queue`.

    The function takes the payload, and may declare `job` to receive a JobContext. It may be an
    `async def`: the worker then awaits it on its own event loop (SKIPLOCK_ASYNC_CONCURRENCY). `lease`
    overrides the lease length for this queue. Extra keywords (e.g. `every="5m"`) are passed to
    option hooks such as recurring schedules; unknown ones are an error.
    Flow control (issue 15): `version` and `upgrade={1: fn, ...}` version the payload (old jobs are
    upgraded step by step before the call); `lock_key` (a string or fn(payload)) serializes jobs
    per key; `concurrency` and `rate` ("100/s", "10/m" or a number per second) are global limits.
    """
    if not isinstance(queue, str) or not queue.strip():
        raise ConfigError("@task needs a non-empty queue name")
    from skiplock.core import limits, versions  # they import this module

    upgrades = versions.check_upgrades(queue, version, upgrade)
    per_second = limits.parse_rate(rate) if rate is not None else None
    if concurrency is not None:
        limits.check_concurrency(concurrency)
    if lock_key is not None and not (callable(lock_key) or (isinstance(lock_key, str) and lock_key)):
        raise ConfigError(f"@task({queue!r}): lock_key must be a non-empty string or a function of the payload")

    def decorate(func: Callable[..., Any]) -> typed.TaskHandle:
        wants_job = _check_signature(func)
        # a dataclass/pydantic payload is built before the call (worker/core/typed.py); else `func` itself
        REGISTRY.add(Task(queue, typed.runner_for(func), wants_job, lease, max_attempts, dict(options),
                          is_async=inspect.iscoroutinefunction(func), version=version, upgrade=upgrades,
                          lock_key=lock_key, concurrency=concurrency, rate=per_second))
        for key, value in options.items():
            hook = TASK_OPTIONS.get(key)
            if hook is None:
                raise ConfigError(f"@task({queue!r}) got an unknown option {key!r}")
            hook(queue, func, value)
        return typed.TaskHandle(queue, func)  # callable like `func`, plus .enqueue/.enqueue_many

    return decorate


def _check_signature(func: Callable[..., Any]) -> bool:
    """Refuse a handler the worker could not call; return whether it takes `job`.

    The worker calls `func(payload)`, or `func(payload, job=context)` when it declares `job`. Any other
    required parameter (`def h(payload, ctx)`) would fail every run with a TypeError, so it is refused
    here, when the module is imported, and not when the first job runs. Both the signature a decorator
    reports (functools.wraps) and the wrapper's own must accept that call.
    """
    try:
        shown = inspect.signature(func)
        own = inspect.signature(func, follow_wrapped=False)
    except (TypeError, ValueError):  # a callable without a readable signature: checked when it runs
        return False
    wants_job = "job" in shown.parameters
    positional = [p for p in shown.parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name != "job"]
    if not positional and not any(p.kind == p.VAR_POSITIONAL for p in shown.parameters.values()):
        raise ConfigError(f"handler {_qualname(func)} must take the payload as its first argument")
    call = "(payload, job=context)" if wants_job else "(payload)"
    for signature in (shown, own):
        try:
            signature.bind(None, job=None) if wants_job else signature.bind(None)
        except TypeError as exc:
            raise ConfigError(
                f"handler {_qualname(func)}{signature} cannot be called as {_qualname(func)}{call}: {exc}. "
                "A handler takes the payload, and may declare a parameter named `job` for the JobContext "
                "(def handler(payload, job): ...); give any other parameter a default") from None
    return wants_job


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
