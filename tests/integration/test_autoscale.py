"""skiplock_desired_workers: Little's law on measured handler time, a backlog to clear, damping."""

from __future__ import annotations

import pytest

from skiplock.monitor.autoscale import OCCUPANCY, TARGET_WAIT, Damper, desired_workers, queue_loads
from tests.integration.test_metrics import q, scrape
from tests.support.helpers import scalar, wait_for

HANDLER_S = 0.05
SLOTS = 4


def test_littles_law_with_a_backlog_and_nothing_to_do():
    assert desired_workers(arrival=0, service=0.1, concurrency=4, backlog=0) == 0
    assert desired_workers(arrival=0, service=0.1, concurrency=4, backlog=5) == 1
    # 64 jobs/s x 0.1 s = 6.4 busy slots = 2 processes of 4 at 80%
    assert desired_workers(arrival=64, service=0.1, concurrency=4, backlog=0) == 2
    # the same, plus 640 waiting jobs to clear within 10 s: another 64 jobs/s
    assert desired_workers(arrival=64, service=0.1, concurrency=4, backlog=640) == 4
    assert desired_workers(arrival=0, service=0, concurrency=4, backlog=3) == 1  # no timing yet: one to start


def test_damper_rises_at_once_and_falls_only_after_the_hold():
    damper = Damper(hold=60)
    assert damper.update("q", 2, now=0) == 2
    assert damper.update("q", 8, now=1) == 8  # a burst: at once
    assert damper.update("q", 3, now=2) == 8  # a lull starts
    assert damper.update("q", 9, now=30) == 9  # and the next burst came before the hold
    assert damper.update("q", 3, now=31) == 9
    assert damper.update("q", 4, now=60) == 9
    assert damper.update("q", 3, now=91) == 3  # lower for 60 s: now it falls
    assert damper.update("other", 1, now=91) == 1  # queues are independent


@pytest.mark.slow
def test_gauge_sizes_a_backlog_from_the_measured_handler_time(conn, db_url, spawn_worker):
    from skiplock import enqueue_many

    # a real worker on t1 measures its handler time (50 ms) and publishes it with its heartbeat
    enqueue_many([("t1", {"sleep": HANDLER_S, "no_effect": True}) for _ in range(40)])
    worker = spawn_worker(SKIPLOCK_CONCURRENCY=str(SLOTS), SKIPLOCK_QUEUES="t1")
    wait_for(lambda: scalar(conn, "SELECT coalesce(sum(total_count), 0) FROM worker_latency "
                                  "WHERE metric = 'handler'") >= 40, timeout=60, message="the handler histogram")
    # t4 has nobody consuming it: 4,000 ready jobs to clear within the target wait
    enqueue_many([("t4", {"no_effect": True}) for _ in range(4000)])
    service = float(scalar(conn, "SELECT sum(total_sum) / sum(total_count) FROM worker_latency "
                                 "WHERE metric = 'handler'"))
    assert HANDLER_S <= service < HANDLER_S * 2
    needed = (4000 / TARGET_WAIT) * service / (SLOTS * OCCUPANCY)  # unrounded, from the measured time
    samples = scrape(db_url)
    gauge = samples[("skiplock_desired_workers", q("t4"))]
    assert gauge == pytest.approx(needed, rel=0.2) and gauge >= needed
    # t1's 40 finished jobs in the last minute or two are its arrival rate
    loads = {load.queue: load for load in queue_loads(conn)}
    assert loads["t1"].arrival > 0 and samples[("skiplock_queue_arrival_rate", q("t1"))] == pytest.approx(
        loads["t1"].arrival, rel=0.5)
    assert worker.terminate() == 0
