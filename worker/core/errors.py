"""The small exception hierarchy of skiplock.

Each class's docstring is its default message. Errors a person can fix (bad input, bad config)
derive from SkiplockError so the CLI can print them as one clear line instead of a traceback.
"""

from __future__ import annotations

from collections.abc import Mapping


class SkiplockError(Exception):
    """skiplock failed."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "").strip())


class ConfigError(SkiplockError, ValueError):
    """The configuration is invalid."""


class EnqueueError(SkiplockError, ValueError):
    """The job cannot be enqueued; nothing was written."""


class MigrationError(SkiplockError):
    """The schema migrations could not be applied."""


class SchemaMissing(SkiplockError):
    """The skiplock tables are missing here: run `skiplock migrate` (or start the worker with --migrate)."""


class TaskImportError(SkiplockError):
    """A task module named in SKIPLOCK_TASKS could not be imported."""


class NotFound(SkiplockError, LookupError):
    """No such job."""


class InvalidTransition(SkiplockError):
    """The job is not in a state that allows this action."""


# ---- raised by handlers to steer what happens to their job -----------------------------------


class JobOwnershipLost(SkiplockError):
    """job.complete(conn) found that this run no longer owns the job (its lease expired and the job
    was reaped, and maybe taken by another worker): nothing was completed, and the transaction it
    ran in must roll back so the handler's writes do not commit next to another run's."""


class HandlerSignal(Exception):
    """Base of the exceptions a handler raises on purpose to choose its job's next state."""


class PermanentFailure(HandlerSignal):
    """The job cannot succeed; move it to dead now instead of retrying."""


class Snooze(HandlerSignal):
    """Put the job back for `seconds` without using up an attempt (unlike RetryAfter).

    The job's snooze_count goes up each time, so a job that snoozes forever shows in the console.
    """

    def __init__(self, seconds: float, message: str = "") -> None:
        if not seconds >= 0:  # also refuses NaN
            raise ValueError("Snooze needs a delay >= 0 seconds")
        self.seconds = float(seconds)
        super().__init__(message or f"snoozed for {self.seconds:g}s")


class Cancelled(HandlerSignal):
    """Raised by `job.check_cancelled()` once a cancel was requested; the job ends failed
    "cancelled by <who>" (worker/core/features/cancel.py), whatever a handler does with it."""


class Discard(HandlerSignal):
    """The job is no longer wanted; finish it as failed without a dead letter."""


class RetryAfter(HandlerSignal):
    """Retry this job after the given delay (counts as an attempt)."""

    def __init__(self, seconds: float, message: str = "") -> None:
        if seconds < 0:
            raise ValueError("RetryAfter needs a delay >= 0 seconds")
        self.seconds = float(seconds)
        super().__init__(message or f"retry requested in {self.seconds:g}s")


class BatchItemsFailed(HandlerSignal):
    """A batch handler's partial failure: `failures` maps the id of each job that failed to its exception.

    Those jobs end as if each had raised its own exception alone (retry, dead, snooze...); the others of
    the batch succeed. Raised by a handler declared with `@task(queue, batch_size=N)`
    (docs/howto/batch-handlers.md)."""

    def __init__(self, failures: Mapping[int, BaseException]) -> None:
        # checked here, where the handler raises it: a wrong shape found after the batch ran could
        # only fail the whole batch (see worker/runtime/batch_runner.py)
        if not isinstance(failures, Mapping) or not failures:
            raise TypeError("BatchItemsFailed needs a non-empty dict {job_id: exception}")
        for job_id, exc in failures.items():
            if isinstance(job_id, bool) or not isinstance(job_id, int):
                raise TypeError(f"BatchItemsFailed: the keys are job ids (int), got {job_id!r}")
            if not isinstance(exc, BaseException):
                raise TypeError(f"BatchItemsFailed: job {job_id} maps to {exc!r}, not an exception")
        self.failures = dict(failures)
        super().__init__(f"{len(failures)} job(s) of the batch failed: "
                         + ", ".join(str(job_id) for job_id in sorted(failures)))


# ---- durable jobs (docs/explanation/durable-jobs.md) -------------------------------------------


class WaitTimeout(SkiplockError):
    """job.wait_for(key, timeout=...) saw no signal before its timeout; the handler may catch it."""

    def __init__(self, key: str, message: str = "") -> None:
        self.key = key
        super().__init__(message or f"no signal for {key!r} before the wait's timeout")


class Park(BaseException):
    """Internal: job.sleep / job.wait_for parked the job (skiplock_park committed it). The handler unwinds
    and the worker ends the run with no ack. A BaseException, so a handler's `except Exception` cannot
    swallow it and go on running a job that is no longer its own."""
