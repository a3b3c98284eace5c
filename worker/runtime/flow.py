"""A worker's side of flow control (issue 15): what its claims pass, and payload upgrades.

The decisions themselves are the claim's, in SQL (worker/core/queries.py, _CLAIM); this keeps the few
things a worker tells it: the newest payload version it runs per queue, where each queue's tenant
round-robin starts next, and which of its queues are limited (so those claims lock their
queue_limits rows first). It also upgrades an older payload before the handler sees it.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

import psycopg

from skiplock.core import limits, versions
from skiplock.core.core import ClaimedJob
from skiplock.core.registry import Task


class WorkerFlow:
    """One per worker process; the claim loop is its only caller, except `upgrade` (handler threads)."""

    def __init__(self, tasks: Mapping[str, Task]) -> None:
        self.tasks = dict(tasks)
        self.limits = limits.LimitsView(list(tasks))
        self._tenant_after: dict[str, str] = {}
        self._lock = threading.Lock()

    def versions(self) -> dict[str, int]:
        """The payload version each queue's handler takes (saved in the worker row for doctor)."""
        return {queue: task.version for queue, task in self.tasks.items()}

    def start(self, conn: psycopg.Connection) -> None:
        """At worker start: write the limits declared with @task(concurrency=, rate=)."""
        limits.apply_task_limits(conn, list(self.tasks.values()))
        self.limits.refresh(conn, force=True)

    def claim_options(self, conn: psycopg.Connection, queues: Sequence[str]) -> dict[str, Any]:
        """core.claim's flow-control keywords for one claim of `queues`."""
        with self._lock:
            after = [self._tenant_after.get(q) for q in queues]
        return {"versions": [self.tasks[q].version if q in self.tasks else 1 for q in queues],
                "limited": self.limits.refresh(conn), "tenant_after": after}

    def observe(self, jobs: Sequence[ClaimedJob]) -> None:
        """Move each queue's tenant cursor past the tenants this claim served.

        The next claim's tenant walk starts after the greatest tenant served now, so with more
        tenants than one claim looks at (queries.TENANT_HOPS) every tenant still gets its turn.
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
