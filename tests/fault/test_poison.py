"""Scenario 9, poison: a job whose handler kills its own process (os._exit) on every attempt.

attempts counts started runs (incremented at claim), so after max_attempts crashes the reaper
moves it to dead instead of looping forever; meanwhile the rest of its queue keeps draining.
The test plays the process supervisor (systemd, Kubernetes): a worker that exits is replaced.
"""

from __future__ import annotations

import pytest

from skiplock import enqueue, enqueue_many
from tests.fault.books import audit, record
from tests.fault.conftest import FAST_RECOVERY, remaining, stop
from tests.support.helpers import scalar, wait_for

JOBS = 300
MAX_ATTEMPTS = 3
SETTINGS = {**FAST_RECOVERY, "SKIPLOCK_CONCURRENCY": "4"}


@pytest.mark.slow
def test_poison(conn, spawn_worker):
    poison = enqueue("t1", {"exit_on_attempt_le": 99}, max_attempts=MAX_ATTEMPTS)
    assert poison is not None
    ids = enqueue_many([("t1", {"sleep": 0.01, "n": i}) for i in range(JOBS)])
    workers = [spawn_worker(**SETTINGS) for _ in range(2)]
    exits: list[int | None] = []

    def supervise() -> bool:
        for i, w in enumerate(workers):
            if w.proc.poll() is not None:  # crashed on the poison job: replace it, as a supervisor would
                exits.append(w.proc.returncode)
                workers[i] = spawn_worker(**SETTINGS)
        status = scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (poison,))
        return status == "dead" and remaining(conn) == 0

    wait_for(supervise, timeout=180, message="the poison job dead and the queue drained")
    for w in workers:
        assert stop(w, conn) == 0

    attempts, error = conn.execute("SELECT attempts, last_error FROM jobs WHERE id = %s", (poison,)).fetchone()
    books = record(audit(conn, "poison", [poison, *ids]), worker_crashes=len(exits))
    assert attempts == MAX_ATTEMPTS
    assert "lease expired" in error
    assert exits == [3] * MAX_ATTEMPTS  # one crash per attempt, then never again
    assert books.lost == 0
    assert books.dead == 1
    assert books.completed == JOBS
    assert books.queued == books.running == books.failed == 0
    # each crash orphans at most the other jobs that worker was running
    assert books.duplicated <= MAX_ATTEMPTS * (int(SETTINGS["SKIPLOCK_CONCURRENCY"]) - 1)
