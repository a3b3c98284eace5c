"""A job's life on one line: enqueued -> each attempt (worker, start, duration, error) -> where it is now.

Built only from what the product records:
- the job row: created_at, and for the current or last run started_at, worker_id, finished_at, run_at;
- jobs.attempt_errors: each failed run's attempt, worker, claim time (`started`, recorded by newer
  workers; older entries have none and their start is estimated as the ack time minus the handler's
  duration), ack time and handler duration, with its error; the last 20 runs are kept;
- job_edits: an operator's payload edit, with who and when (it retried the job).

What the record lacks, the timeline says so rather than guess: a run whose lease expired (a crashed
worker) wrote no entry, so it shows as "no record"; a plain Retry by an operator resets the attempt
count without a time of its own (the Audit page has who and when), so it shows where the numbering
starts again; a successful run's duration is finished_at - started_at, which includes the wait for
its ack batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from skiplock.core.error_summary import headline
from skiplock.core.status import JobStatus

# CSS states of a step (templates/jobs/_timeline.html): the marker's colour and shape.
OK, FAILED, RUNNING, DEAD, LOST, NEUTRAL, OPERATOR = "ok", "failed", "running", "dead", "lost", "neutral", "operator"


@dataclass(frozen=True)
class Step:
    """One point on the timeline."""

    kind: str  # enqueued, attempt, lost, edit, retry, final, next
    state: str  # one of the CSS states above
    title: str  # "attempt 2", "payload edited", "dead"
    at: datetime | None  # when it started (an attempt) or happened; None when the record has no time
    worker: str | None = None
    duration_s: float | None = None
    error: str | None = None  # the exception line of the run's error
    note: str | None = None  # what the record does not say, or what comes next
    estimated: bool = False  # `at` is estimated (an attempt recorded before its start time was)
    attempt: int | None = None
    edit_id: int | None = None
    cause_type: str | None = None  # the error's exception class, without its module path
    cause_text: str | None = None  # its message, long ones cut in the middle (cause() says why)


# How much of an error's message the timeline shows: a step is a narrow column, and what a message says
# first is often an id ("order 48211 (customer cus_...):"), its cause at the end ("...: 503 Service Unavailable")
CAUSE_CHARS = 90


def cause(line: str | None) -> tuple[str | None, str | None]:
    """An error's headline as (exception class without its module path, message), for the timeline's
    narrow steps: a message longer than CAUSE_CHARS keeps its start and its end, which says the cause.

    >>> cause("shop.billing.UpstreamError: order 12 failed")
    ('UpstreamError', 'order 12 failed')
    >>> cause("lease expired: the worker stopped")
    (None, 'lease expired: the worker stopped')
    >>> cause("ValueError: " + "x" * 100 + " 503 Service Unavailable")[1][-30:]
    'xxxxxx 503 Service Unavailable'
    """
    if not line:
        return None, None
    kind, sep, message = line.partition(": ")
    if not sep or " " in kind or not kind.replace(".", "").replace("_", "").isalnum():
        kind, message = "", line  # not "ExceptionClass: message" (an annotation, a bare message)
    short = kind.rsplit(".", 1)[-1] or None
    if len(message) > CAUSE_CHARS:
        head = CAUSE_CHARS // 3
        message = message[:head].rstrip() + " \u2026 " + message[-(CAUSE_CHARS - head - 3):].lstrip()
    return short, message


def _when(value: Any) -> datetime | None:
    """A timestamp from attempt_errors' JSON (ISO text) or from a column (already a datetime)."""
    if value is None or isinstance(value, datetime):
        return value
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        return None


def _failed_step(entry: dict[str, Any]) -> Step:
    """A failed run from its attempt_errors entry."""
    ended = _when(entry.get("at"))
    duration_ms = entry.get("duration_ms")
    duration_s = float(duration_ms) / 1000.0 if duration_ms is not None else None
    started = _when(entry.get("started"))
    estimated = False
    if started is None and ended is not None and duration_s is not None:
        started, estimated = ended - timedelta(seconds=duration_s), True
    attempt = int(entry.get("attempt") or 0)
    line = headline(entry.get("error")) or None
    cause_type, cause_text = cause(line)
    return Step("attempt", FAILED, f"attempt {attempt}", started if started else ended, str(entry.get("worker") or ""),
                duration_s, line, estimated=estimated, attempt=attempt, cause_type=cause_type, cause_text=cause_text)


def _lost(attempt: int) -> Step:
    return Step("lost", LOST, f"attempt {attempt}", None, attempt=attempt,
                note="no record: its lease expired (the worker stopped or was cut off) and the reaper took it back")


def _retry() -> Step:
    return Step("retry", OPERATOR, "retried", None,
                note="an operator retried it: the attempts start again (the Audit page has who and when)")


def _edit(edit: dict[str, Any]) -> Step:
    return Step("edit", OPERATOR, "payload edited, retried", edit["at"], worker=None, edit_id=int(edit["id"]),
                note=f"by {edit['actor']}; the original payload is kept below")


def _current_attempt_bound(job: dict[str, Any]) -> int:
    """The highest attempt number the current cycle's failed runs can have: the running or succeeded
    run is attempt `attempts` itself; a queued, dead or failed job's runs up to `attempts` all ended."""
    attempts = int(job["attempts"])
    return attempts - 1 if job["status"] in (JobStatus.RUNNING, JobStatus.SUCCEEDED) else attempts


def build(job: dict[str, Any], edits: list[dict[str, Any]]) -> list[Step]:
    """The job's steps, oldest first."""
    steps = [Step("enqueued", NEUTRAL, "enqueued", job["created_at"])]
    entries = [e for e in (job.get("attempt_errors") or []) if isinstance(e, dict)]
    pending_edits = sorted(edits, key=lambda e: e["id"])
    previous: int | None = None  # the attempt number of the last run placed
    reset_shown = False  # an edit (or a retry) was placed since the last run: the numbering may restart
    if entries and int(entries[0].get("attempt") or 0) > 1:
        first = int(entries[0]["attempt"])
        steps.append(Step("lost", NEUTRAL, f"attempts 1\u2013{first - 1}", None,
                          note="not kept: the job keeps its last 20 failed runs"))
        previous = first - 1
    for entry in entries:
        step = _failed_step(entry)
        ended = _when(entry.get("at"))
        while pending_edits and ended is not None and pending_edits[0]["at"] < ended:
            steps.append(_edit(pending_edits.pop(0)))
            previous, reset_shown = 0, True
        attempt = step.attempt or 0
        if previous is not None and attempt <= previous and not reset_shown:
            steps.append(_retry())
            previous = 0
        steps.extend(_lost(n) for n in range((previous or 0) + 1, attempt))  # runs with no entry between
        steps.append(step)
        previous, reset_shown = attempt, False
    for edit in pending_edits:
        steps.append(_edit(edit))
        previous, reset_shown = 0, True
    bound = _current_attempt_bound(job)
    if previous is not None and previous > bound and not reset_shown:  # retried after the last recorded run
        steps.append(_retry())
        previous = 0
    steps.extend(_lost(n) for n in range((previous or 0) + 1, bound + 1))
    steps.extend(_now(job))
    return steps


def _now(job: dict[str, Any]) -> list[Step]:
    """The current run, or how the job ended, or when it runs next."""
    status, attempts = job["status"], int(job["attempts"])
    if status == JobStatus.RUNNING:
        so_far = (job["now"] - job["started_at"]).total_seconds() if job.get("now") and job["started_at"] else None
        return [Step("attempt", RUNNING, f"attempt {attempts}", job["started_at"], job["worker_id"], so_far,
                     note="running now", attempt=attempts)]
    if status == JobStatus.SUCCEEDED:
        ran = (job["finished_at"] - job["started_at"]).total_seconds() \
            if job["started_at"] and job["finished_at"] and job["finished_at"] >= job["started_at"] else None
        return [Step("attempt", OK, f"attempt {attempts}", job["started_at"], job["worker_id"], ran,
                     note="includes the wait for its ack", attempt=attempts),
                Step("final", OK, "succeeded", job["finished_at"])]
    if status == JobStatus.DEAD:
        return [Step("final", DEAD, "dead", job["finished_at"],
                     note=f"after {attempts} of {job['max_attempts']} attempts" if attempts else None)]
    if status == JobStatus.FAILED:
        return [Step("final", FAILED, "failed", job["finished_at"], note="cancelled or discarded: not retried")]
    if status == JobStatus.WAITING:
        return [Step("next", NEUTRAL, "waiting", None, note="for its dependencies to end")]
    if job.get("scheduled"):
        return [Step("next", NEUTRAL, f"attempt {attempts + 1}", job["run_at"], note="scheduled")]
    return [Step("next", NEUTRAL, f"attempt {attempts + 1}", job["run_at"], note="ready: the next claim takes it")]
