"""A worker's bookkeeping: the jobs it holds a lease on, and the counters of what it did.

A job is held from its claim until its outcome is written: first while its handler runs
(`running`), then while the acker gathers its batch (`unacked`). The heartbeat extends the leases
of both kinds; the acker forgets a job once its outcome is in the database.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from skiplock.core.state_changes import ClaimedJob


@dataclass
class Counters:
    """What this process did, for logs, tests and the health endpoint."""

    claimed: int = 0
    succeeded: int = 0
    retried: int = 0
    dead: int = 0
    failed: int = 0
    stale_acks: int = 0
    claim_errors: int = 0
    ack_errors: int = 0
    lost_leases: int = 0
    snoozed: int = 0
    handed_off: int = 0  # jobs a producer's insert trigger handed to this worker (migration 020)
    claim_seconds: list[float] = field(default_factory=list)


class HeldJobs:
    """Running and finished-but-unacked jobs, under the worker's bookkeeping lock."""

    def __init__(self, lock: threading.Lock) -> None:
        # the Worker's lock: it also guards the lanes' counts, which change with `running`
        self.lock = lock
        self.running: dict[int, ClaimedJob] = {}  # handlers still running
        self.unacked: dict[int, str] = {}  # finished, outcome not yet written (id -> queue)
        self.idle = threading.Condition(lock)  # notified when the last running handler ends (for the shutdown)

    def leases(self) -> tuple[dict[int, str], list[int]]:
        """(every held job's id -> queue, the ids whose handler still runs), taken at one moment."""
        with self.lock:
            return {**{i: j.queue for i, j in self.running.items()}, **self.unacked}, list(self.running)

    def acked(self, ids: list[int]) -> None:
        """Outcomes written: these jobs are no longer held."""
        with self.lock:
            for job_id in ids:
                self.unacked.pop(job_id, None)

    def still_held(self, ids: list[int]) -> set[int]:
        """Those of `ids` this worker still holds (a job acked meanwhile is gone, not lost)."""
        with self.lock:
            return {i for i in ids if i in self.running or i in self.unacked}
