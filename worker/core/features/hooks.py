"""Error hooks: callables told about failed runs, for Sentry or any other error reporter.

Register them in the task module, for every queue or for one:

    skiplock.on_failure(report)               # every failed run: a retry, dead or discarded
    skiplock.on_dead(report)                  # only when the job is now dead
    @task("emails", on_failure=report, on_dead=page_someone)

A hook is called as `hook(exc, job)` in the handler's thread once the outcome is decided (before it
is written), with `job` a FailedRun. A hook that raises is logged and changes nothing: the job's
outcome was decided before the hook ran and stays as it is.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from skiplock.core import state_changes
from skiplock.core.errors import ConfigError
from skiplock.core.status import FAILED_RUNS, OutcomeStatus

log = logging.getLogger("skiplock.hooks")

Hook = Callable[[BaseException, "FailedRun"], Any]


@dataclass(frozen=True)
class FailedRun:
    """What a hook is told about the run that failed."""

    id: int
    queue: str
    attempt: int
    max_attempts: int
    payload: Any  # decoded JSON (the stored text if it is not valid JSON)
    status: str  # what the job becomes: 'queued' (a retry), 'dead' or 'failed' (discarded)
    error: str | None  # the traceback text stored in last_error

    @property
    def dead(self) -> bool:
        """True when this run left the job dead (no retry follows)."""
        return self.status == OutcomeStatus.DEAD


_ON_FAILURE: list[Hook] = []
_ON_DEAD: list[Hook] = []
_QUEUE_ON_FAILURE: dict[str, list[Hook]] = {}
_QUEUE_ON_DEAD: dict[str, list[Hook]] = {}


def _checked(hook: Any, what: str) -> Hook:
    if not callable(hook):
        raise ConfigError(f"{what} needs a callable taking (exc, job), got {hook!r}")
    return hook


def on_failure(hook: Hook) -> Hook:
    """Call `hook(exc, job)` after every failed run of any queue (usable as a decorator)."""
    _ON_FAILURE.append(_checked(hook, "on_failure"))
    return hook


def on_dead(hook: Hook) -> Hook:
    """Call `hook(exc, job)` when a run leaves its job dead, any queue (usable as a decorator)."""
    _ON_DEAD.append(_checked(hook, "on_dead"))
    return hook


def _task_option(table: dict[str, list[Hook]], what: str) -> Callable[[str, Callable[..., Any], Any], None]:
    def attach(queue: str, func: Callable[..., Any], hook: Any) -> None:
        hooks = table.setdefault(queue, [])
        # a task module imported twice (tests) registers the same hook again: keep it once
        if hook not in hooks:
            hooks.append(_checked(hook, f"@task({queue!r}, {what}=)"))

    return attach


# @task(on_failure=..., on_dead=...): the package root lists them with @task's other options
on_failure_option = _task_option(_QUEUE_ON_FAILURE, "on_failure")
on_dead_option = _task_option(_QUEUE_ON_DEAD, "on_dead")


def clear() -> None:
    """Forget every registered hook (tests)."""
    for table in (_ON_FAILURE, _ON_DEAD):
        table.clear()
    for by_queue in (_QUEUE_ON_FAILURE, _QUEUE_ON_DEAD):
        by_queue.clear()


def failed(job: state_changes.ClaimedJob, exc: BaseException, outcome: state_changes.Outcome) -> None:
    """Tell the hooks about a failed run; called by the worker and by skiplock.testing.drain."""
    if outcome.status not in FAILED_RUNS:
        return  # a success or a snooze is not a failure
    hooks = [*_ON_FAILURE, *_QUEUE_ON_FAILURE.get(job.queue, ())]
    if outcome.status == OutcomeStatus.DEAD:
        hooks += [*_ON_DEAD, *_QUEUE_ON_DEAD.get(job.queue, ())]
    if not hooks:
        return
    run = FailedRun(job.id, job.queue, job.attempts, job.max_attempts, _decoded(job.payload), outcome.status,
                    outcome.error)
    for hook in hooks:
        try:
            hook(exc, run)
        except Exception:
            # the reporter's own failure must never change the job: log it and go on
            log.exception("job %d: error hook %s raised; the job's outcome (%s) is unchanged",
                          job.id, getattr(hook, "__qualname__", repr(hook)), outcome.status)


def _decoded(payload: Any) -> Any:
    if not isinstance(payload, str):
        return payload
    try:
        return json.loads(payload)
    except ValueError:
        return payload
