"""Scenario partition_worker: a worker host's link goes down mid-drain for longer than the lease.

Hosts h1 and h2 each run a worker against PostgreSQL on the rig's gateway. h1 is cut off while it
holds jobs; h2's reaper returns them once their lease expires and h2 completes them. When h1's
link comes back, h1 rejoins (it runs new jobs again) within a bounded time, the results it kept
for the reaped jobs are refused by the ack fence, and the books balance: nothing lost, and only
jobs h1 held at the cut may have run twice.
"""

from __future__ import annotations

import time

import pytest

from skiplock import enqueue_many
from tests.fault.books import audit, record
from tests.fault.conftest import FAST_RECOVERY, remaining, running_of, stop
from tests.support.helpers import scalar, wait_for

JOBS = 600
REJOIN_BOUND = 60.0  # seconds from the link's return to h1 running a job again


def effects_of(conn, pid: int) -> int:
    return int(scalar(conn, "SELECT count(*) FROM test_effects WHERE pid = %s", (pid,)))


@pytest.mark.slow
def test_partitioned_worker_host_is_reaped_rejoins_and_is_fenced(rig, rig_conn, on_host):
    conn = rig_conn
    settings = dict(FAST_RECOVERY, SKIPLOCK_CONCURRENCY="8", SKIPLOCK_DB_DEADLINE="3")
    ids = enqueue_many([("t1", {"sleep": 0.02, "n": i}) for i in range(JOBS)])
    cut = on_host("h1", **settings)
    wait_for(lambda: effects_of(conn, cut.pid) >= 50, timeout=60, message="h1 to be mid-drain")
    other = on_host("h2", **settings)

    rig.cut("h1")
    cut_at = time.monotonic()
    held = running_of(conn, cut.pid)
    assert held, "the cut should land while h1 holds jobs"
    # longer than the lease: h2's reaper must hand every job h1 held to someone else
    wait_for(lambda: not set(held) & set(running_of(conn, cut.pid)), timeout=60,
             message="h1's jobs to be reaped")
    reaped_after = time.monotonic() - cut_at
    wait_for(lambda: remaining(conn) == 0, timeout=120, message="h2 to drain the queue alone")
    assert cut.proc.poll() is None, "the partitioned worker must survive the partition"

    rig.heal("h1")
    healed_at = time.monotonic()
    before = effects_of(conn, cut.pid)
    ids += enqueue_many([("t1", {"sleep": 0.02, "n": JOBS + i}) for i in range(200)])
    wait_for(lambda: effects_of(conn, cut.pid) > before, timeout=REJOIN_BOUND, message="h1 to rejoin and run jobs")
    rejoined_after = time.monotonic() - healed_at
    wait_for(lambda: remaining(conn) == 0, timeout=120, message="the queue to drain")
    assert stop(cut, conn) == 0 and stop(other, conn) == 0

    refused = cut.log().count("lease lost before ack")
    books = record(audit(conn, "partition_worker", ids), held_at_cut=len(held), reaped_s=round(reaped_after, 2),
                   rejoin_s=round(rejoined_after, 2), late_acks_refused=refused)
    assert books.lost == 0
    assert books.completed == len(ids)
    assert books.dead == books.failed == books.queued == books.running == 0
    assert books.duplicated <= len(held)
    assert refused >= 1, "h1 kept results for reaped jobs: the fence must refuse them"
    assert "Traceback" not in cut.log()
