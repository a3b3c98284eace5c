"""Handlers that take a batch: `@task("events", batch_size=500, batch_wait=1.0)` on `def handle(payloads, jobs)`.

The queue core's part: the checks `@task` makes when the module is imported (the options, the handler's
signature), and `BatchMember`, the JobContext each job of a batch is handed as. The worker's part, which
gathers claimed jobs into batches and records each one's outcome, is worker/runtime/batch_runner.py.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any, NoReturn

from skiplock.core.durable import run as durable_run
from skiplock.core.errors import ConfigError, PermanentFailure
from skiplock.core.job_context import JobContext
from skiplock.core.registry import qualname

NOT_IN_A_BATCH = ("a batch handler's jobs cannot {what}: the batch runs as one call, and {why}. "
                  "Use a handler of one job for that (docs/howto/batch-handlers.md)")


def check_options(queue: str, batch_size: Any, batch_wait: Any) -> tuple[int, float]:
    """`batch_size` a whole number >= 1 and `batch_wait` seconds >= 0, or a ConfigError naming the queue."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ConfigError(f"@task({queue!r}): batch_size must be a whole number >= 1, got {batch_size!r}")
    if (isinstance(batch_wait, bool) or not isinstance(batch_wait, int | float)
            or not math.isfinite(batch_wait) or batch_wait < 0):
        raise ConfigError(f"@task({queue!r}): batch_wait must be a number of seconds >= 0, got {batch_wait!r}")
    return batch_size, float(batch_wait)


def check_signature(queue: str, func: Callable[..., Any]) -> None:
    """Refuse a batch handler the worker could not call as `func(payloads, jobs)` (two lists, in order).

    Checked when the module is imported, as @task checks a one-job handler's: every batch would fail
    the same way. Both the signature a decorator reports (functools.wraps) and the wrapper's own must bind.
    """
    try:
        shown = inspect.signature(func)
        own = inspect.signature(func, follow_wrapped=False)
    except (TypeError, ValueError):  # no readable signature: a TypeError at the call makes the jobs dead
        return
    for signature in (shown, own):
        try:
            signature.bind([], [])
        except TypeError as exc:
            raise ConfigError(
                f"@task({queue!r}, batch_size=...): handler {qualname(func)}{signature} cannot be called as "
                f"{qualname(func)}(payloads, jobs): {exc}. A batch handler takes the list of payloads and the "
                "list of their jobs (def handle(payloads, jobs): ...); give any other parameter a default") from None


class BatchMember(JobContext):
    """One job of a batch, as its handler sees it in `jobs`: a JobContext (id, attempt, cancel_requested,
    progress...) whose calls that need a run of its own are refused with the reason.

    Durable steps, cursors, sleeps and waits park or resume one job's run from the top; a batch's run
    is all of its jobs' at once. complete(conn) writes one job's success in the handler's transaction;
    a batch records its jobs' outcomes together, after the call (a partial failure included)."""

    @property
    def durable(self) -> durable_run.DurableRun:
        _refuse("use durable steps, cursors, sleeps or signals", "each of those is one job's own run")

    def complete(self, conn: Any, result: Any = None) -> None:
        _refuse("complete(conn) themselves", "the worker records every job's outcome after the call")

    async def complete_async(self, conn: Any, result: Any = None) -> None:
        _refuse("complete_async(conn) themselves", "the worker records every job's outcome after the call")


def _refuse(what: str, why: str) -> NoReturn:
    # PermanentFailure: every retry would fail the same way, so the batch's jobs are dead at once with
    # the reason (an operator retries them once the handler is fixed), as an uncallable handler's are
    raise PermanentFailure(NOT_IN_A_BATCH.format(what=what, why=why))
