"""Run time per task (issue 36): a worker saves each queue's run-time histogram with its heartbeat; the
Run times page shows runs, p50, p95 and max per queue, and Long-runners compares a running job with its
task's p95."""

from __future__ import annotations

import re
from typing import Any

from skiplock import enqueue_many
from skiplock.core.features.run_times import BOUNDS, percentile
from tests.support.helpers import scalar, wait_for


def test_percentiles_of_a_histogram() -> None:
    counts = [0] * (len(BOUNDS) + 1)
    counts[BOUNDS.index(0.2)] = 90  # 90 runs in (0.1, 0.2]
    counts[BOUNDS.index(2.0)] = 10  # 10 runs in (1, 2]
    assert percentile(counts, 0.5, 1.7) is not None and 0.1 < percentile(counts, 0.5, 1.7) <= 0.2  # type: ignore[operator]
    p95 = percentile(counts, 0.95, 1.7)
    assert p95 is not None and 1.0 < p95 <= 1.7  # inside its bucket, never above the longest run


def test_a_workers_runs_show_as_p50_p95_max_and_long_runners_compare(admin: Any, conn: Any,
                                                                     spawn_worker: Any) -> None:
    # 18 short runs and 2 of about a second in queue t1; then one job that runs on
    enqueue_many([("t1", {"sleep": 0.05, "n": n}) for n in range(18)] + [("t1", {"sleep": 1.0, "n": 99})] * 2)
    spawn_worker(SKIPLOCK_QUEUES="t1", SKIPLOCK_CONCURRENCY="4")
    wait_for(lambda: scalar(conn, "SELECT coalesce(sum(total), 0) FROM job_runtimes WHERE queue = 't1'") == 20,
             timeout=60, message="the worker's heartbeat to save 20 run times")
    html = admin.get("/runtimes/?range=1h").get_data(as_text=True)
    row = re.search(r'<tr data-queue="t1">(.*?)</tr>', html, re.S)
    assert row, html
    assert 'data-runs="20"' in row.group(1)
    p50 = float(re.search(r'data-p50="([\d.e-]+)"', row.group(1)).group(1))  # type: ignore[union-attr]
    p95 = float(re.search(r'data-p95="([\d.e-]+)"', row.group(1)).group(1))  # type: ignore[union-attr]
    longest = float(re.search(r'data-max="([\d.e-]+)"', row.group(1)).group(1))  # type: ignore[union-attr]
    assert p50 < 1.0 <= longest and p50 < p95 <= longest  # the two slow runs pull p95 up, not p50

    enqueue_many([("t1", {"sleep": 120})])
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'running'") == 1, timeout=60,
             message="a running job")
    running = admin.get("/running/").get_data(as_text=True)
    assert re.search(r'data-vs-p95="[\d.]+"', running) and "\u00d7 p95" in running


def test_a_short_task_over_its_p95_is_not_painted_as_trouble(admin: Any, conn: Any, spawn_worker: Any) -> None:
    # a webhook's runs take milliseconds; one that has been running for a few hundred ms is several times its p95,
    # and still no one's emergency: the ratio shows, without the red of a long-runner
    enqueue_many([("fast", {"sleep": 0.001, "n": n}) for n in range(20)])
    spawn_worker(SKIPLOCK_QUEUES="fast", SKIPLOCK_CONCURRENCY="4")
    wait_for(lambda: scalar(conn, "SELECT coalesce(sum(total), 0) FROM job_runtimes WHERE queue = 'fast'") == 20,
             timeout=60, message="the worker's heartbeat to save 20 run times")
    enqueue_many([("fast", {"sleep": 120})])

    def ratio() -> float:
        found = re.search(r'data-vs-p95="([\d.]+)"', admin.get("/running/").get_data(as_text=True))
        return float(found.group(1)) if found else 0.0

    wait_for(lambda: ratio() > 3.0, timeout=60, message="the running webhook to pass 3x its task's p95")
    running = admin.get("/running/").get_data(as_text=True)
    span = re.search(r'<span class="vs-p95 ?([a-z]*)"', running)
    assert span and span.group(1) == "", span
    assert "data-long" not in running
