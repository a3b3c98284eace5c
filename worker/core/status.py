"""The job state machine, written down once.

    enqueue -> queued --claim--> running --ok--> (deleted, or succeeded if history is kept)
                 ^                  |--error, attempts left--> queued (run_at = now + backoff)
                 |                  |--error, exhausted / PermanentFailure--> dead
                 |                  |--Discard--> failed
                 |                  |--lease expired--> queued, or dead on the last attempt (reaper)
                 |                  '--job.sleep / job.wait_for--> parked (attempt given back)
                 |                                                   |--run_at reached (wake pass)--> queued
                 |                                                   |--skiplock.signal(key)--> queued
                 |                                                   '--operator: wake now -> queued, cancel -> failed
                 '--- operator: retry dead/failed, release running, cancel queued -> failed ---'
"""

from __future__ import annotations

from enum import StrEnum


class JobStatus(StrEnum):
    """Values of the `job_status` enum; each says which actor moves a job out of it."""

    # Enqueued with parents (depends_on) not all final yet (workflows, migration 025); never claimed.
    # The last parent's finalising statement moves it to queued (or dead/failed when a parent failed).
    WAITING = "waiting"
    # Waiting for run_at; a worker's claim moves it to running, an operator's cancel to failed.
    QUEUED = "queued"
    # Owned by worker_id until lease_until; the worker's ack, the reaper, a graceful release or
    # an operator's release moves it out.
    RUNNING = "running"
    # A durable job sleeping until run_at, or waiting for a signal (run_at is then its timeout, or
    # 9999-12-31, "never"); holds no lease, no worker and no attempt (migration 034). The wake pass (run_at
    # reached), skiplock_signal() on its key or an operator moves it to queued; an operator's cancel to
    # failed. Not final: its workflow dependents keep waiting (docs/explanation/durable-jobs.md).
    PARKED = "parked"
    # Finished without error. Only stored when history is kept; the pruner deletes it later.
    SUCCEEDED = "succeeded"
    # Finished unsuccessfully on purpose (operator cancel, handler Discard); no dead letter.
    FAILED = "failed"
    # Gave up (attempts exhausted, PermanentFailure, or lease lost on the last attempt).
    # An operator retries (-> queued) or purges it; the pruner deletes it after retention.
    DEAD = "dead"

    @property
    def is_final(self) -> bool:
        """True for the states that set finished_at."""
        return self in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.DEAD)


# A worker whose row was refreshed within this many seconds is live (it refreshes every 5 s): the
# console, /metrics, the doctor and "why isn't this job running" all count live workers by it.
LIVE_WORKER_SECONDS = 30.0


class OutcomeStatus(StrEnum):
    """What a run's result does to its job (state_changes.Outcome.status); the ack statement takes these values."""

    OK = "ok"  # succeeded: deleted, kept or moved, per the HistoryMode
    RETRY = "queued"  # failed with attempts left: queued again after its backoff
    DEAD = "dead"  # failed for good: attempts exhausted, PermanentFailure, or a lease lost on the last attempt
    FAILED = "failed"  # finished unsuccessfully on purpose (Discard)
    SNOOZED = "snoozed"  # queued again later, the attempt given back (Snooze)
    # The handler parked the job itself (job.sleep / job.wait_for, in skiplock_park's transaction): the
    # run ends with no ack to write, its attempt given back. The acker never receives it.
    PARKED = "parked"


# The outcomes of a run that failed (hooks are told, the run's span is an error); not ok, snoozed or parked.
FAILED_RUNS = (OutcomeStatus.RETRY, OutcomeStatus.DEAD, OutcomeStatus.FAILED)


class HistoryMode(StrEnum):
    """Where a succeeded job goes (SKIPLOCK_HISTORY_MODE)."""

    DELETE = "delete"  # deleted with its ack: least write amplification (the default)
    KEEP = "keep"  # stays in jobs as 'succeeded' until the pruner removes it
    PARTITIONED = "partitioned"  # moved to the monthly-partitioned jobs_history in the ack statement
