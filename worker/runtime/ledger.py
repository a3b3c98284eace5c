"""A worker's bookkeeping: the jobs it holds a lease on, and the counters of what it did.

A job is held from its claim until its outcome is written: first while its handler runs
(`running`), then while the acker gathers its batch (`unacked`). The heartbeat extends the leases
of both kinds; the acker forgets a job once its outcome is in the database. HeldJobs is the only
owner of these maps and of the lanes' held counts: the other parts call its methods.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from skiplock.core.state_changes import ClaimedJob
from skiplock.runtime.lanes import Lane


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
    parked: int = 0  # runs that parked their job (job.sleep / job.wait_for): no ack, attempt given back
    handed_off: int = 0  # jobs a producer's insert trigger handed to this worker (migration 020)
    claim_seconds: list[float] = field(default_factory=list)


class HeldJobs:
    """The only owner of the jobs a worker holds, and of its lanes' held counts.

    Nobody else reads or writes `running`, `unacked`, `returned` or a lane's `held`: the claimer
    asks `started`, the executor `finished` or `given_back`, the acker `acked`, the heartbeat
    `leases` and `still_held`, the shutdown `wait_idle` and `unfinished`. Each takes the lock once.
    """

    def __init__(self, lanes: Sequence[Lane] = (), lock: threading.Lock | None = None) -> None:
        self.lock = lock or threading.Lock()
        self.lanes = list(lanes)
        self.lane_of: dict[str, Lane] = {q: lane for lane in self.lanes for q in lane.queues}
        self.running: dict[int, ClaimedJob] = {}  # claimed, handler running or waiting for a slot
        self.unacked: dict[int, str] = {}  # finished, outcome not yet written (id -> queue)
        self.returned: list[int] = []  # given back unrun or unfinished: the shutdown releases them
        self.idle = threading.Condition(self.lock)  # notified when the last running job ends (for the shutdown)

    # ---- the executor's and the claimer's --------------------------------------------------

    def started(self, lane: Lane, jobs: Sequence[ClaimedJob]) -> None:
        """Claimed jobs are held from now on, in `lane`'s count."""
        with self.lock:
            for job in jobs:
                self.running[job.id] = job
            lane.held += len(jobs)

    def finished(self, job: ClaimedJob, written: bool) -> tuple[Lane, int]:
        """A job's handler ended: forget it as running and lower its lane's count. Its outcome is
        held until acked, unless already `written` (completed in the handler's transaction). Wakes
        the shutdown when it was the last. Returns its lane and how many jobs that lane still holds."""
        lane = self.lane_of[job.queue]
        with self.lock:
            self._forget(job, lane)
            if not written:
                self.unacked[job.id] = job.queue
            return lane, lane.held

    def given_back(self, job: ClaimedJob) -> None:
        """A job that will not finish here (never started at a stop, or its handler found the
        environment broken): forget it as running; the shutdown releases it to its queue."""
        lane = self.lane_of[job.queue]
        with self.lock:
            self._forget(job, lane)
            self.returned.append(job.id)

    def _forget(self, job: ClaimedJob, lane: Lane) -> None:
        """Under the lock: the one place a running job is dropped and its lane's count lowered."""
        if self.running.pop(job.id, None) is not None:
            lane.held -= 1
        if not self.running:
            self.idle.notify_all()

    def acked(self, ids: Sequence[int]) -> None:
        """Outcomes written: these jobs are no longer held."""
        with self.lock:
            for job_id in ids:
                self.unacked.pop(job_id, None)

    # ---- what the others read ----------------------------------------------------------------

    def held_in(self, lane: Lane) -> int:
        """How many jobs `lane` holds (claimed, not finished)."""
        with self.lock:
            return lane.held

    def busy_lanes(self) -> list[Lane]:
        """The lanes holding at least one job."""
        with self.lock:
            return [lane for lane in self.lanes if lane.held > 0]

    def running_ids(self) -> list[int]:
        """The jobs whose handler runs or waits for a slot."""
        with self.lock:
            return list(self.running)

    def known_ids(self) -> list[int]:
        """Every job held: running, or finished and not acked."""
        with self.lock:
            return [*self.running, *self.unacked]

    def has_unacked(self) -> bool:
        with self.lock:
            return bool(self.unacked)

    def leases(self) -> tuple[dict[int, str], list[int]]:
        """(every held job's id -> queue, the ids whose handler still runs), taken at one moment."""
        with self.lock:
            return {**{i: j.queue for i, j in self.running.items()}, **self.unacked}, list(self.running)

    def still_held(self, ids: Sequence[int]) -> set[int]:
        """Those of `ids` this worker still holds (a job acked meanwhile is gone, not lost)."""
        with self.lock:
            return {i for i in ids if i in self.running or i in self.unacked}

    def wait_idle(self, deadline: float, skip: Callable[[], bool]) -> None:
        """Wait until no job runs, `deadline` (monotonic) passes, or `skip()` says stop waiting."""
        with self.lock:
            while self.running and not skip() and time.monotonic() < deadline:
                # short waits so a second signal (skip the grace) is seen promptly
                self.idle.wait(timeout=min(0.1, max(deadline - time.monotonic(), 0.0)))

    def unfinished(self) -> list[int]:
        """At the end of a stop: the jobs given back and those still running, to release."""
        with self.lock:
            return [*self.returned, *self.running]
