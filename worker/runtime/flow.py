"""A worker's side of flow control: what its claims pass, and payload upgrades.

The decisions themselves are the claim's, in SQL (worker/core/sql/jobs_claim.sql); this keeps the few
things a worker tells it: the newest payload version it runs per queue, where each queue's tenant
round-robin starts next, and which of its queues are limited (so those claims lock their
queue_limits rows first). It also upgrades an older payload before the handler sees it.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import psycopg

from skiplock.core import task_defaults, task_options
from skiplock.core.features import limits, versions
from skiplock.core.registry import Task
from skiplock.core.state_changes import ClaimedJob

# How often one worker's claims include each limited queue. Including it costs every claim a call
# of skiplock_limit_allowances (a row lock and a count) and a walk of that queue's head; a worker
# draining a busy unlimited queue claims every millisecond or two, far more often than a limited
# queue gains a token or a slot. Measured on the flow benchmark (pg_stat_statements, drains beside a
# limited queue): with every claim including it, each claim took longer than beside the same backlog
# paused; at most every LIMITED_CLAIM_INTERVAL, no longer than paused.
# A slot this worker frees itself (its ack written) lets the next claim include the queue at once, so
# a concurrency-bound queue of short jobs is not slowed to one start per interval per worker.
LIMITED_CLAIM_INTERVAL = 0.01


class WorkerFlow:
    """One per worker process; the claim loop is its only caller, except `upgrade` (handler threads)."""

    def __init__(self, tasks: Mapping[str, Task], clock: Callable[[], float] = time.monotonic) -> None:
        self.tasks = dict(tasks)
        self.limits = limits.LimitsView(list(tasks), clock=clock)
        self._clock = clock
        self._tenant_after: dict[str, str] = {}
        self._limited_at: dict[str, float] = {}  # limited queue -> when a claim last included it
        self._slot_freed: set[str] = set()  # limited queues one of whose jobs here ended since
        self._lock = threading.Lock()

    def versions(self) -> dict[str, int]:
        """The payload version each queue's handler takes (saved in the worker row for doctor)."""
        return {queue: task.version for queue, task in self.tasks.items()}

    def start(self, conn: psycopg.Connection) -> None:
        """At worker start: write the limits declared with @task(concurrency=, rate=), and the options a
        producer without the task module must write into its jobs (worker/core/task_defaults.py), and
        those options into the jobs enqueued before any worker had written them (worker/core/task_options.py)."""
        limits.apply_task_limits(conn, list(self.tasks.values()))
        task_defaults.publish(conn, self.tasks.values())
        self.fill_in_options(conn)
        self.limits.refresh(conn, force=True)

    def fill_in_options(self, conn: psycopg.Connection) -> int:
        """Write this worker's @task options into its queues' jobs enqueued without them."""
        return task_options.fill_in(conn, self.tasks.values())

    def claim_options(self, conn: psycopg.Connection, queues: Sequence[str], refresh: bool = True) -> dict[str, Any]:
        """state_changes.claim's flow-control keywords for one claim of `queues`.

        Without `refresh` the view of which queues are limited is not re-read (a query) first: the
        listener's claim on a NOTIFY skips it (the claim loop refreshes it right after). A stale view
        never over-claims: a queue limited since is left out of the claim (see LimitsView)."""
        limited = self.limits.refresh(conn) if refresh else self.limits.limited
        with self._lock:
            after = [self._tenant_after.get(q) for q in queues]
            included = self._limited_due(limited & set(queues))
        # a limited queue left out is not claimed from this time (the claim skips limited queues it
        # was not told of), so leaving it out is always safe; it only delays its next start
        return {"versions": [self.tasks[q].version if q in self.tasks else 1 for q in queues],
                "limited": included, "tenant_after": after}

    def _limited_due(self, limited: frozenset[str] | set[str]) -> frozenset[str]:
        """The limited queues this claim includes: a slot of ours freed, or LIMITED_CLAIM_INTERVAL passed."""
        now = self._clock()
        due = frozenset(q for q in limited if q in self._slot_freed
                        or now - self._limited_at.get(q, -math.inf) >= LIMITED_CLAIM_INTERVAL)
        for queue in due:
            self._limited_at[queue] = now
            self._slot_freed.discard(queue)
        return due

    def note_finished(self, queues: set[str]) -> bool:
        """Jobs of `queues` ended here and their acks are written: a limited one has a free slot now.
        True when one of them is limited (the claim loop is worth waking)."""
        freed = queues & self.limits.limited
        if freed:
            with self._lock:
                self._slot_freed |= freed
        return bool(freed)

    def observe(self, jobs: Sequence[ClaimedJob]) -> None:
        """Move each queue's tenant cursor past the tenants this claim served.

        The next claim's tenant walk starts after the greatest tenant served now, so with more
        tenants than one claim looks at (256, in jobs_claim.sql) every tenant still gets its turn.
        """
        served: dict[str, str] = {}
        for job in jobs:
            if job.tenant is not None and job.tenant > served.get(job.queue, ""):
                served[job.queue] = job.tenant
        if served:
            with self._lock:
                self._tenant_after.update(served)

    def idle_wait(self, queues: Sequence[str], poll_interval: float) -> float:
        """How long the claim loop may sleep with nothing to do: shorter for limited queues."""
        cap = self.limits.max_wait(queues)
        return poll_interval if cap is None else min(poll_interval, cap)

    def upgrade(self, job: ClaimedJob, payload: Any) -> Any:
        """`payload` brought to its handler's version (a no-op for jobs of that version)."""
        task = self.tasks[job.queue]
        if job.version is None or job.version >= task.version:
            return payload
        return versions.upgrade_payload(job.queue, payload, job.version, task.version, task.upgrade)
