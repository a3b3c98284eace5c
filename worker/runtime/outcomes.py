"""What a handler's run asks for: one pure mapping from "returned / raised X" to a state_changes.Outcome.

The worker's executor (worker/runtime/executor.py) and the test helper `skiplock.tools.testing.drain` both
call these, so a job drained in a test ends exactly as it would under a real worker.
"""

from __future__ import annotations

import inspect
import logging
import traceback
from typing import Any

from skiplock.core import state_changes
from skiplock.core.backoff import backoff_seconds
from skiplock.core.errors import Discard, PermanentFailure, RetryAfter, Snooze
from skiplock.core.status import OutcomeStatus
from skiplock.core.workflows.results import DEFAULT_MAX_RESULT_BYTES, encode_result

MAX_ERROR_CHARS = 8000
log = logging.getLogger("skiplock.worker")


def format_error(exc: BaseException) -> str:
    """The traceback, truncated from the middle so both the cause and the raise site survive."""
    text = "".join(traceback.format_exception(exc)).strip()
    if len(text) <= MAX_ERROR_CHARS:
        return text
    half = MAX_ERROR_CHARS // 2
    return f"{text[:half]}\n... [{len(text) - MAX_ERROR_CHARS} characters cut] ...\n{text[-half:]}"


def check_result(job: state_changes.ClaimedJob, result: Any) -> None:
    """Refuse a handler result that means its work never ran (an un-awaited coroutine)."""
    if result is None:  # most handlers return nothing: skip inspect's walk on every job
        return
    if inspect.isawaitable(result):
        # an un-awaited coroutine means the handler's work never ran: calling that a
        # success would silently lose the job, so it is dead with the reason instead
        if inspect.iscoroutine(result):
            result.close()
        raise PermanentFailure(f"handler for queue {job.queue!r} returned {type(result).__name__} "
                               "without running it: declare the handler itself `async def` so the worker awaits it")


def succeeded(job: state_changes.ClaimedJob, value: Any = None,
              max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES) -> state_changes.Outcome:
    """A success, with the handler's return value as the JSON text to store (None: nothing to store).

    A value over `max_result_bytes` is not stored: the job still succeeds (its work is done), the
    reason is stored instead (skiplock.result raises ResultTooLarge with it) and logged."""
    if value is None:
        return state_changes.Outcome(job.id, job.queue, job.attempts, OutcomeStatus.OK)
    text, refused = encode_result(value, max_result_bytes)
    if refused is not None:
        log.warning("job %d queue=%s: %s", job.id, job.queue, refused)
    return state_changes.Outcome(job.id, job.queue, job.attempts, OutcomeStatus.OK, result=text, result_error=refused)


# The skiplock functions that call a handler: (module, function). A TypeError whose traceback ends in
# one of them was raised by the call itself (the arguments did not bind), so the handler's body never ran.
CALL_SITES = frozenset({("skiplock.runtime.executor", "_call"), ("skiplock.runtime.executor", "_call_async"),
                        ("skiplock.runtime.batch_runner", "_call_batch"),
                        ("skiplock.core.typed", "run_typed"), ("skiplock.tools.testing", "_run")})


def is_call_error(exc: BaseException) -> bool:
    """True when `exc` says the handler cannot be called with the job at all (not an error inside it).

    @task refuses such signatures at registration; this catches what a signature could not show (a
    callable without one, a wrapper that misreports it). Every retry would fail the same way, so the
    job is dead at once. Only failures pay for this walk of the traceback.
    """
    if not isinstance(exc, TypeError) or exc.__traceback__ is None:
        return False
    tb = exc.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    frame = tb.tb_frame
    return (frame.f_globals.get("__name__"), frame.f_code.co_name) in CALL_SITES


def for_exception(job: state_changes.ClaimedJob, exc: BaseException, *, backoff_base: float,
                  backoff_cap: float) -> state_changes.Outcome:
    """The outcome of a handler that raised `exc`: dead, discarded (failed) or a retry."""
    if isinstance(exc, Snooze):
        # not a failure: no error text, and state_changes.ack_batch gives the claim's attempt back
        return state_changes.Outcome(job.id, job.queue, job.attempts, OutcomeStatus.SNOOZED, delay=exc.seconds)
    if isinstance(exc, PermanentFailure):
        return state_changes.Outcome(job.id, job.queue, job.attempts, OutcomeStatus.DEAD, error=format_error(exc))
    if is_call_error(exc):
        reason = f"handler for queue {job.queue!r} cannot be called with this job: {exc}"
        return state_changes.Outcome(job.id, job.queue, job.attempts, OutcomeStatus.DEAD,
                                     error=f"{reason}\n{format_error(exc)}")
    if isinstance(exc, Discard):
        return state_changes.Outcome(job.id, job.queue, job.attempts, OutcomeStatus.FAILED, error=format_error(exc))
    delay = exc.seconds if isinstance(exc, RetryAfter) else None
    error = format_error(exc)
    if job.attempts >= job.max_attempts:
        return state_changes.Outcome(job.id, job.queue, job.attempts, OutcomeStatus.DEAD, error=error)
    if delay is None:
        delay = backoff_seconds(job.attempts, base=backoff_base, cap=backoff_cap)
    return state_changes.Outcome(job.id, job.queue, job.attempts, OutcomeStatus.RETRY, delay=delay, error=error)
