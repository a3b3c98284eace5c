"""The two records the queue core hands out and takes back: a claimed job, and a run's outcome.

Their own module, below core/state_changes.py: the types read apart from the transitions that use them.
state_changes.ClaimedJob and state_changes.Outcome remain the names callers use.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple


# ClaimedJob and Outcome are NamedTuples rather than frozen dataclasses: one of each is built per
# job on the worker's hot path, and a frozen dataclass sets every field through object.__setattr__
# (~5x slower). Both stay immutable and are read by attribute.
class ClaimedJob(NamedTuple):
    """A job this worker now owns until its lease ends (heartbeats extend it)."""

    id: int
    queue: str
    payload: Any
    attempts: int
    max_attempts: int
    version: int | None = None  # the payload's version (worker/core/features/versions.py upgrades older ones)
    tenant: str | None = None  # the tenant it was enqueued for (the worker's round-robin cursor)
    # Claimed only with `with_context` (a handler's JobContext needs them); None otherwise.
    priority: int | None = None
    run_at: datetime | None = None
    created_at: datetime | None = None
    started_at: datetime | None = None
    unique_key: str | None = None


class Outcome(NamedTuple):
    """What a finished run asks for: 'ok', or an error transition with its text."""

    job_id: int
    queue: str
    attempt: int  # the run this outcome belongs to: the fence refuses a result of an older run
    status: str  # an OutcomeStatus (skiplock/core/status.py): ok, queued (retry), dead, failed, snoozed
    delay: float = 0.0  # seconds until the retry, for status 'queued' or 'snoozed'
    error: str | None = None
    duration_ms: float | None = None  # the handler's run time, set for failures (attempt history)
    result: str | None = None  # a success's return value as JSON text (stored in job_results), None: nothing
    result_error: str | None = None  # why a success's return value was not stored (too large), stored instead
