"""Scenario 2, repeated_kills: SIGKILL one of three workers every few seconds, replace it, check the books.

Throughput must recover after each kill (new effects appear), the reaper must return every job the
killed worker held, and at the end nothing is lost.
"""

from __future__ import annotations

import random
import time

import pytest

from skiplock import enqueue_many
from tests.fault.books import audit, record
from tests.fault.conftest import FAST_RECOVERY, effects, remaining, running_of, settle_killed, stop
from tests.support.helpers import scalar, wait_for

KILLS = 8  # one every ~3 s: a bounded stand-in for "every few seconds for a minute"
JOBS_PER_ROUND = 150
SETTINGS = {**FAST_RECOVERY, "SKIPLOCK_CONCURRENCY": "8", "SKIPLOCK_KEEP_HISTORY": "true"}


@pytest.mark.slow
def test_repeated_kills(conn, spawn_worker):
    rng = random.Random(6)
    workers = [spawn_worker(**SETTINGS) for _ in range(3)]
    ids: list[int] = []
    orphaned: set[int] = set()
    recoveries: list[float] = []
    for _ in range(KILLS):
        ids += enqueue_many([("t1", {"sleep": 0.01}) for _ in range(JOBS_PER_ROUND)], conn=conn)
        before = effects(conn)
        wait_for(lambda: effects(conn) >= before + 30, timeout=60, message="progress before the kill")  # noqa: B023 (wait_for calls it within this iteration)
        victim = workers.pop(rng.randrange(len(workers)))
        victim.kill()
        killed_at = time.monotonic()
        held = settle_killed(conn, victim.pid)
        orphaned.update(held)
        after_kill = effects(conn)
        workers.append(spawn_worker(**SETTINGS))
        # throughput recovers: the survivors and the replacement keep completing jobs ...
        wait_for(lambda: effects(conn) >= after_kill + 30 or remaining(conn) == 0, timeout=60,  # noqa: B023 (wait_for calls it within this iteration)
                 message="throughput after the kill")
        # ... and the reaper hands the victim's jobs back
        wait_for(lambda: not running_of(conn, victim.pid), timeout=60, message="the victim's jobs reaped")  # noqa: B023 (wait_for calls it within this iteration)
        recoveries.append(time.monotonic() - killed_at)

    wait_for(lambda: remaining(conn) == 0, timeout=120, message="the queue to drain")
    for w in workers:
        assert stop(w, conn) == 0

    # every orphaned job was reaped (its last_error says so) and then completed by another worker
    reaped = scalar(conn, "SELECT count(*) FROM jobs WHERE id = ANY(%s) AND status = 'succeeded' "
                          "AND last_error LIKE 'lease expired%%'", (list(orphaned),))
    books = record(audit(conn, "repeated_kills", ids), kills=KILLS, orphaned=len(orphaned),
                   recovery_s=round(max(recoveries), 2), recovery_mean_s=round(sum(recoveries) / len(recoveries), 2))
    assert books.lost == 0
    assert books.completed == len(ids)
    assert books.dead == books.failed == books.queued == books.running == 0
    assert reaped == len(orphaned)
    assert books.duplicated <= len(orphaned)
