"""Scenario 7, sustained_high_load: run at 80% of measured capacity for a bounded time.

First the capacity of two workers is measured by draining a backlog; then a producer enqueues at
80% of it in two equal halves while the test samples the queue depth and the jobs table's size.
Depth must stay bounded (the workers keep up). The table is bounded when the space of finished
jobs is reused: between the halves the test runs the VACUUM that autovacuum would run (its
one-minute naptime is longer than this test; the soak command, `python -m tests.fault.soak`,
shows autovacuum doing it alone), and the second half must fit in the heap the first half left.

Index growth is reported, not asserted: a btree page emptied by VACUUM is only recycled once no
transaction anywhere on the server (any database) is older than its deletion, so on a shared
server someone else's long transaction decides it.
"""

from __future__ import annotations

import time

import psycopg
import pytest

from skiplock import enqueue_many
from tests.fault.books import audit, record
from tests.fault.conftest import FAST_RECOVERY, remaining, stop
from tests.support.helpers import scalar, wait_for

CAPACITY_JOBS = 3000
HALF = 15.0  # seconds per half of the load phase
TICK = 0.25
SETTINGS = {**FAST_RECOVERY, "SKIPLOCK_CONCURRENCY": "10", "SKIPLOCK_LEASE_SECONDS": "30",
            "SKIPLOCK_LOG_LEVEL": "WARNING"}
SIZE_SQL = "SELECT pg_total_relation_size('jobs')"
HEAP_SQL = "SELECT pg_relation_size('jobs')"


def offer(conn: psycopg.Connection, rate: float, seconds: float, depths: list[int]) -> list[int]:
    """Enqueue `rate` jobs per second for `seconds`, sampling the ready depth each tick."""
    per_tick = max(1, round(rate * TICK))
    ids: list[int] = []
    begin = next_tick = time.monotonic()
    while time.monotonic() - begin < seconds:
        # the test's own connection, not the producer pool: on a shared server another session's
        # "terminate every skiplock-* connection" must not cut the producer mid-test
        ids += enqueue_many([("t1", {"phase": "load"}) for _ in range(per_tick)], conn=conn)
        depths.append(remaining(conn, ("queued",)))
        next_tick += TICK
        # pacing the producer to a rate (not waiting for a condition): sleep to the next tick
        time.sleep(max(0.0, next_tick - time.monotonic()))
    return ids


@pytest.mark.slow
def test_sustained_high_load(conn, spawn_worker):
    ids = enqueue_many([("t1", {"phase": "capacity"}) for _ in range(CAPACITY_JOBS)])
    started = time.monotonic()
    workers = [spawn_worker(**SETTINGS) for _ in range(2)]
    wait_for(lambda: remaining(conn) == 0, timeout=120, message="the capacity backlog to drain")
    capacity = CAPACITY_JOBS / (time.monotonic() - started)  # includes start-up: an underestimate

    depths: list[int] = []
    conn.execute("VACUUM jobs")
    size_0 = scalar(conn, SIZE_SQL)
    first = offer(conn, 0.8 * capacity, HALF, depths)
    heap_1 = scalar(conn, HEAP_SQL)
    conn.execute("VACUUM jobs")  # what autovacuum does once per naptime
    second = offer(conn, 0.8 * capacity, HALF, depths)
    size_2, heap_2 = scalar(conn, SIZE_SQL), scalar(conn, HEAP_SQL)
    wait_for(lambda: remaining(conn) == 0, timeout=120, message="the load phase to drain")
    for w in workers:
        assert stop(w, conn) == 0

    phase = first + second
    books = record(audit(conn, "sustained_high_load", ids + phase), capacity_per_s=round(capacity),
                   offered_per_s=round(len(phase) / (2 * HALF)), max_depth=max(depths),
                   mean_depth=round(sum(depths) / len(depths)), heap_kb_first_half=heap_1 // 1024,
                   heap_kb_second_half=heap_2 // 1024, total_kb_start=size_0 // 1024,
                   total_kb_end=size_2 // 1024)
    assert books.lost == 0
    assert books.completed == len(ids) + len(phase)
    assert books.duplicated == 0
    # bounded depth: never more than a quarter of the phase's jobs waiting (an overloaded queue
    # grows without limit and would end near the whole phase)
    assert max(depths) < len(phase) // 4
    # bounded size: once vacuumed, finished jobs' heap space is reused instead of growing the file
    # (the first half started from an empty, truncated heap; without reuse the second half, the same
    # load again, would double it; with reuse it stays near heap_1: the threshold is half-way)
    assert heap_2 < 1.5 * heap_1
