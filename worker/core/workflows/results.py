"""A job's outcome from outside: `skiplock.status`, `skiplock.result`, `skiplock.wait`.

A handler's JSON-serialisable return value is stored in job_results by the ack, in the same
statement as the success (so history mode `delete`, which deletes the job's row, cannot take it
before it is read). `wait` LISTENs: the statement that finalises a watched job NOTIFYs
'skiplock_done' (migration 026's skiplock_settle); a slow re-check covers a notification that was
lost with a dropped connection, as the worker's poll does for claims.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import psycopg

from skiplock.core.errors import SkiplockError
from skiplock.core.plumbing import adapters
from skiplock.core.sql import queries

WORKFLOWS_SQL = queries("workflows")

FINAL_STATES = ("succeeded", "dead", "failed")
# How often wait() looks again without a notification: a safety net, not the mechanism.
WAIT_RECHECK_SECONDS = 5.0
# The default limit of a stored result (SKIPLOCK_MAX_RESULT_BYTES): results are for ids, counts and
# small summaries that dependents and callers read, not for bulk data.
DEFAULT_MAX_RESULT_BYTES = 256 * 1024

_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


class JobNotFound(SkiplockError):
    """No job has (or had) this id."""


class ResultNotReady(SkiplockError):
    """The job has not reached a final state yet."""


class JobFailed(SkiplockError):
    """The job ended without success: `.state` is 'dead' or 'failed' (cancelled), `.error` its error."""

    def __init__(self, job_id: int, state: str, error: str | None) -> None:
        self.job_id, self.state, self.error = job_id, state, error
        super().__init__(f"job {job_id} ended {state}" + (f": {error}" if error else ""))


class ResultNotStored(SkiplockError):
    """The job succeeded, but its handler's return value could not be stored: result() and wait() raise
    this, with the reason, instead of returning None (a Decimal or a datetime, which JSON cannot hold,
    as a payload cannot: return str(value) or value.isoformat())."""


class ResultTooLarge(ResultNotStored):
    """The job succeeded, but its handler returned more than SKIPLOCK_MAX_RESULT_BYTES of JSON: the
    value was not stored (result() and wait() raise this, with the size, instead of returning None)."""


@dataclass(frozen=True)
class JobInfo:
    """Where a job stands (`skiplock.status(job_id)`)."""

    id: int
    state: str  # waiting, queued, running, succeeded, dead, failed
    result: Any = None  # the stored return value, once succeeded
    error: str | None = None  # the last error (dead, failed, or a retry's)
    progress: float | None = None  # 0..1, from job.progress() while it runs
    progress_message: str | None = None
    attempts: int | None = None
    max_attempts: int | None = None
    waiting_on: int | None = None  # parents not yet final, while waiting
    batch_id: int | None = None
    workflow_id: int | None = None
    queue: str | None = None
    row_kept: bool = True  # False: the job's row is gone (history mode delete), its outcome is known by other means

    @property
    def is_final(self) -> bool:
        """True once the job has ended (succeeded, failed or dead): its state will not change again."""
        return self.state in FINAL_STATES


def prune_watchers(conn: Any, older_than: float) -> None:
    """The pruner's part: wait() registrations left by processes that died while waiting."""
    conn.execute(WORKFLOWS_SQL.prune_watchers, {"older_than": older_than})


def encode_result(value: Any, max_bytes: int) -> tuple[str | None, str | None]:
    """A handler's return value as (JSON text to store, None), or (None, why it was not stored).

    None stores nothing. A value that JSON cannot hold (a Decimal, a datetime: the payload encoder
    refuses them too) or one over `max_bytes` is not stored, and the reason is: the job still
    succeeded (its work is done and may not be repeatable), and whoever reads the result gets
    ResultNotStored (ResultTooLarge for the size) with the reason, never a silent None that a fan-in
    would trip over far away.
    """
    if value is None:
        return None, None
    try:
        text = _ENCODER.encode(value)
    except (TypeError, ValueError) as exc:
        return None, (f"the handler returned {type(value).__name__}, which JSON cannot hold ({exc}): the job "
                      "succeeded but its result was not stored; return JSON values (str(value) for a Decimal, "
                      "value.isoformat() for a datetime)")
    size = len(text) if text.isascii() else len(text.encode("utf-8", "replace"))
    if size > max_bytes:
        return None, (f"the handler returned {size} bytes of JSON, over the limit of {max_bytes} "
                      "(SKIPLOCK_MAX_RESULT_BYTES): the job succeeded but its result was not stored; "
                      "store large data elsewhere and return a reference")
    if "\\u0000" in text:  # jsonb cannot store NUL
        return None, ("the handler returned text with a NUL character, which PostgreSQL's jsonb cannot hold: "
                      "the job succeeded but its result was not stored")
    return text, None


def status_on(conn: Any, job_id: int) -> JobInfo:
    """The job's status read on a psycopg connection; JobNotFound when it never existed."""
    with adapters.tuple_cursor(conn) as cur:  # any driver the producer accepts
        cur.execute(WORKFLOWS_SQL.job_status, {"job": job_id})
        row = cur.fetchone()
    assert row is not None
    (state, last_error, headline, attempts, max_attempts, waiting_on, batch_id, workflow_id, progress,
     message, queue, stored_state, result, stored_error, issued, archived) = row
    if state == "succeeded" and stored_error:  # kept row (history keep), result refused as too large
        return JobInfo(job_id, state, None, stored_error, attempts=attempts, max_attempts=max_attempts,
                       batch_id=batch_id, workflow_id=workflow_id, queue=queue)
    if state is not None:
        return JobInfo(job_id, state, result if state == "succeeded" else None,
                         last_error if state in ("dead", "failed") else headline, progress, message, attempts,
                         max_attempts, waiting_on, batch_id, workflow_id, queue)
    if stored_state is not None:  # the row is gone; the ack's result, or a purge's tombstone
        return JobInfo(job_id, stored_state, result, stored_error, row_kept=False)
    if archived or issued:  # succeeded in history mode delete (no result) or partitioned
        return JobInfo(job_id, "succeeded", row_kept=False)
    raise JobNotFound(f"job {job_id} does not exist")


def outcome(job: JobInfo) -> Any:
    """The result of a final job, or JobFailed."""
    if job.state == "succeeded":
        if job.result is None and job.error:  # its result was refused (encode_result): say why
            refused = ResultTooLarge if "SKIPLOCK_MAX_RESULT_BYTES" in job.error else ResultNotStored
            raise refused(f"job {job.id}: {job.error}")
        return job.result
    raise JobFailed(job.id, job.state, job.error)


def result_on(conn: Any, job_id: int) -> Any:
    """The stored result; ResultNotReady while the job is not final; JobFailed if it ended badly."""
    job = status_on(conn, job_id)
    if not job.is_final:
        raise ResultNotReady(f"job {job_id} is {job.state}")
    return outcome(job)


def wait_on(url: str, job_id: int, timeout: float | None) -> Any:
    """Block until the job is final, on a connection of its own; its result, or JobFailed / TimeoutError."""
    deadline = None if timeout is None else time.monotonic() + timeout
    with psycopg.connect(url, autocommit=True, application_name="skiplock-wait") as conn:
        conn.execute(WORKFLOWS_SQL.watch, {"job": job_id})
        try:
            conn.execute("LISTEN skiplock_done")
            while True:
                job = status_on(conn, job_id)  # after LISTEN: a finish from now on is heard
                if job.is_final:
                    return outcome(job)
                left = WAIT_RECHECK_SECONDS if deadline is None else deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"job {job_id} is still {job.state} after {timeout} s")
                for note in conn.notifies(timeout=min(left, WAIT_RECHECK_SECONDS), stop_after=1):
                    if note.payload == str(job_id):
                        break
        finally:
            conn.execute(WORKFLOWS_SQL.unwatch, {"job": job_id})


# ---- the public calls (skiplock.status / result / wait) ---------------------------------------------


def _check_id(job_id: object) -> int:
    if isinstance(job_id, bool) or not isinstance(job_id, int):
        raise TypeError(f"job_id must be an int, got {type(job_id).__name__}")
    return job_id


def status(job_id: int, *, conn: Any = None) -> JobInfo:
    """Where job `job_id` stands: state, stored result, error, progress (JobNotFound if it never existed).

    `conn`: any connection `enqueue` accepts (read in its transaction), else the producer's pool.
    """
    _check_id(job_id)
    if conn is not None:
        return status_on(adapters.sync_connection(conn), job_id)
    from skiplock.core.producer import default_pool

    with default_pool().connection() as pooled:
        return status_on(pooled, job_id)


def result(job_id: int, *, conn: Any = None) -> Any:
    """The return value of a succeeded job (None if it returned none or one that is not JSON).

    Raises ResultNotReady while it is not final, JobFailed when it ended dead or cancelled.
    """
    return _final(status(job_id, conn=conn))


def _final(job: JobInfo) -> Any:
    if not job.is_final:
        raise ResultNotReady(f"job {job.id} is {job.state}")
    return outcome(job)


def wait(job_id: int, timeout: float | None = None, *, database_url: str | None = None) -> Any:
    """Block until job `job_id` is final (LISTEN, not a poll loop); return its result.

    Raises JobFailed (with `.state` and `.error`) when it ended dead or cancelled, TimeoutError after
    `timeout` seconds. Uses a connection of its own to `database_url` (default DATABASE_URL).
    """
    _check_id(job_id)
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout < 0):
        raise ValueError(f"timeout must be a number of seconds >= 0, got {timeout!r}")
    if database_url is None:
        from skiplock.core.plumbing.config import load_settings

        database_url = load_settings().require_database_url()
    return wait_on(database_url, job_id, timeout)
