"""/metrics: parsed with prometheus-client's own parser, values checked against the database."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client.parser import text_string_to_metric_families

from skiplock import enqueue, enqueue_many
from skiplock.core import state_changes
from skiplock.core.plumbing.config import load_settings
from skiplock.core.plumbing.db import make_pool
from skiplock.monitor.metrics import SkiplockCollector, connection_from_url, render
from skiplock.runtime.health import HealthServer, liveness
from skiplock.runtime.latency import LatencyRecorder, fold_exited
from skiplock.runtime.runner import Worker
from tests.support.helpers import scalar, wait_for
from tests.support.pgcluster import free_port


def scrape(url: str, **kwargs) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Render the collector and parse it back: {(sample name, sorted labels): value}."""
    text = render(SkiplockCollector(connection_from_url(url), **kwargs)).decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def q(queue: str, **labels: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted({"queue": queue, **labels}.items()))


def test_queue_gauges_and_totals_match_the_database(conn, db_url):
    now = datetime.now(UTC)
    # 7 ready jobs of m1 spread over hours and two priorities, 3 scheduled, in another queue 1 ready
    enqueue_many([{"queue": "m1", "payload": {"i": i}, "priority": i % 2, "run_at": now - timedelta(hours=i + 1)}
                  for i in range(7)])
    enqueue_many([{"queue": "m1", "payload": {}, "delay": 3600} for _ in range(3)])
    enqueue("m2", {"x": 1})
    # two running, one of them then dead, one retried
    claimed = state_changes.claim(conn, "w-test", ["m1"], [30.0], 3)
    assert len(claimed) == 3
    written = state_changes.ack_batch(conn, "w-test", [
        state_changes.Outcome(claimed[0].id, "m1", 1, "dead", error="boom"),
        state_changes.Outcome(claimed[1].id, "m1", 1, "ok"),
    ], history="delete")
    assert len(written) == 2
    state_changes.pause_queue(conn, "m2", "test")

    m = scrape(db_url)

    assert m[("skiplock_up", ())] == 1
    ready_db = scalar(conn, "SELECT count(*) FROM jobs WHERE queue='m1' AND status='queued' AND run_at <= now()")
    assert ready_db == 4
    assert m[("skiplock_queue_jobs", q("m1", state="ready"))] == ready_db
    assert m[("skiplock_queue_jobs", q("m1", state="scheduled"))] == 3
    assert m[("skiplock_queue_jobs", q("m1", state="running"))] == 1
    assert m[("skiplock_queue_jobs", q("m1", state="dead"))] == 1
    assert m[("skiplock_queue_jobs", q("m2", state="ready"))] == 1
    assert m[("skiplock_queue_counts_exact", q("m1"))] == 1
    assert m[("skiplock_queue_paused", q("m2"))] == 1
    assert m[("skiplock_queue_paused", q("m1"))] == 0

    oldest_db = scalar(conn, "SELECT extract(epoch FROM max(now() - run_at))::float8 FROM jobs "
                             "WHERE queue='m1' AND status='queued' AND run_at <= now()")
    # the seed's p99 query, restricted to ready jobs (scheduled ones have not started waiting)
    p99_db = scalar(conn, "SELECT extract(epoch FROM percentile_disc(0.99) WITHIN GROUP "
                          "(ORDER BY now() - run_at))::float8 FROM jobs "
                          "WHERE queue='m1' AND status='queued' AND run_at <= now()")
    # ages are hours apart; the scrape and the check read now() a moment apart
    assert m[("skiplock_queue_oldest_ready_age_seconds", q("m1"))] == pytest.approx(oldest_db, abs=30)
    assert m[("skiplock_queue_p99_wait_seconds", q("m1"))] == pytest.approx(p99_db, abs=30)
    assert m[("skiplock_queue_oldest_ready_age_seconds", q("m2"))] < 3600

    stats = conn.execute("SELECT sum(completed), sum(dead) FROM job_stats WHERE queue='m1'").fetchone()
    assert stats == (1, 1)
    assert m[("skiplock_jobs_completed_total", q("m1"))] == 1
    assert m[("skiplock_jobs_dead_total", q("m1"))] == 1
    assert m[("skiplock_jobs_retried_total", q("m1"))] == 0


def test_reaped_leases_and_live_workers(conn, db_url):
    job_id = enqueue("m3", {})
    [job] = state_changes.claim(conn, "w-gone", ["m3"], [30.0], 1)
    conn.execute("UPDATE jobs SET lease_until = now() - interval '1 minute' WHERE id = %s", (job_id,))
    assert [r[0] for r in state_changes.reap_expired(conn)] == [job.id]
    conn.execute("INSERT INTO workers (id, host, pid, queues, concurrency, in_flight) "
                 "VALUES ('w1', 'h', 1, '{m3}', 8, 2), ('w2', 'h', 2, '{m3}', 4, 0)")
    conn.execute("INSERT INTO workers (id, host, pid, queues, concurrency, last_seen) "
                 "VALUES ('w-old', 'h', 3, '{m3}', 4, now() - interval '1 hour')")
    m = scrape(db_url)
    assert m[("skiplock_leases_reaped_total", q("m3"))] == 1
    assert m[("skiplock_workers_live", ())] == 2
    assert m[("skiplock_jobs_in_flight", ())] == 2
    assert m[("skiplock_worker_slots", ())] == 12


def test_big_backlog_is_counted_up_to_the_cap_then_estimated(conn, db_url):
    enqueue_many([("big", {"i": i}) for i in range(300)])
    conn.execute("ANALYZE jobs")
    m = scrape(db_url, count_cap=50)
    assert m[("skiplock_queue_counts_exact", q("big"))] == 0
    # the planner's estimate after ANALYZE; never below what the capped count saw
    assert m[("skiplock_queue_jobs", q("big", state="ready"))] >= 50
    assert m[("skiplock_queue_jobs", q("big", state="ready"))] == pytest.approx(300, rel=0.5)
    exact = scrape(db_url)
    assert exact[("skiplock_queue_jobs", q("big", state="ready"))] == 300


def test_histograms_are_the_sum_of_worker_rows_and_fold_keeps_them(conn, db_url):
    a, b = LatencyRecorder(), LatencyRecorder()
    for value in (0.0004, 0.003, 0.2):
        a.observe("claim", value)
    b.observe("claim", 7.0)
    b.observe("ack", 0.002)
    a.save(conn, "wa")
    b.save(conn, "wb")
    m = scrape(db_url)
    assert m[("skiplock_claim_seconds_count", ())] == 4
    assert m[("skiplock_claim_seconds_sum", ())] == pytest.approx(7.2034)
    assert m[("skiplock_claim_seconds_bucket", (("le", "0.0005"),))] == 1
    assert m[("skiplock_claim_seconds_bucket", (("le", "0.005"),))] == 2
    assert m[("skiplock_claim_seconds_bucket", (("le", "5.0"),))] == 3
    assert m[("skiplock_claim_seconds_bucket", (("le", "+Inf"),))] == 4
    assert m[("skiplock_ack_seconds_count", ())] == 1

    # both workers left an hour ago: their rows fold into one, and the sums stay the same
    conn.execute("UPDATE worker_latency SET updated_at = now() - interval '2 hours'")
    assert fold_exited(conn) == 8  # each worker saves a row per metric (4)
    assert scalar(conn, "SELECT count(DISTINCT worker_id) FROM worker_latency") == 1
    after = scrape(db_url)
    for key in [k for k in m if k[0].startswith(("skiplock_claim_seconds", "skiplock_ack_seconds"))]:
        assert after[key] == pytest.approx(m[key]), key


def test_database_down_reports_up_zero():
    url = f"postgresql://postgres@127.0.0.1:{free_port()}/nowhere"
    m = {}
    for family in text_string_to_metric_families(render(SkiplockCollector(connection_from_url(url))).decode()):
        for s in family.samples:
            m[s.name] = s.value
    assert m == {"skiplock_up": 0}


def test_health_endpoint_alive_then_unavailable(db_url, monkeypatch):
    monkeypatch.setenv("SKIPLOCK_TASKS", "tests.support.handlers")
    import tests.support.handlers  # noqa: F401  (registers the handlers)

    worker = Worker(load_settings(), queues=["t1"])
    worker.pool = make_pool(db_url, "skiplock-test-health", size=2, open_wait=True)
    server = HealthServer(worker, 0, host="127.0.0.1")
    server.start()
    try:
        url = f"http://127.0.0.1:{server.port}"
        with urllib.request.urlopen(url + "/healthz", timeout=10) as resp:
            assert resp.status == 200
            assert json.loads(resp.read())["database"] is True
        with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
            names = {f.name for f in text_string_to_metric_families(resp.read().decode())}
        assert {"skiplock_worker_succeeded", "skiplock_claim_seconds"} <= names

        # a claim loop that stopped turning is not alive, even with the database fine
        worker.loop_tick -= 3600
        alive, details = liveness(worker)
        assert (alive, details["claim_loop"], details["database"]) == (False, False, True)
        worker.loop_tick += 3600
        # the database gone: 503 with the reason
        worker.pool.close()
        worker.pool = make_pool(f"postgresql://postgres@127.0.0.1:{free_port()}/nowhere", "x", size=1)
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(url + "/healthz", timeout=20)
        assert err.value.code == 503
        assert json.loads(err.value.read())["database"] is False
    finally:
        server.stop()
        if worker.pool is not None:
            worker.pool.close()
        # (the Worker was never run(): it started no handler thread, so there is nothing else to stop)


@pytest.mark.slow
def test_real_worker_publishes_histograms_and_serves_health(conn, db_url, spawn_worker):
    enqueue_many([("noop", {}) for _ in range(40)])
    port = free_port()
    worker = spawn_worker(SKIPLOCK_HEALTH_PORT=str(port))
    wait_for(lambda: scalar(conn, "SELECT total_count FROM worker_latency WHERE metric = 'handler'") == 40,
             timeout=60, message="the worker's handler histogram row counting 40 jobs")
    m = scrape(db_url)
    assert m[("skiplock_handler_seconds_count", ())] == 40
    claims = scalar(conn, "SELECT total_count FROM worker_latency WHERE metric = 'claim'")
    assert m[("skiplock_claim_seconds_count", ())] == claims >= 1
    assert m[("skiplock_claim_batch_jobs_sum", ())] == 40
    assert m[("skiplock_jobs_completed_total", q("noop"))] == 40
    assert m[("skiplock_workers_live", ())] == 1
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as resp:
        assert resp.status == 200
    assert worker.terminate() == 0


def test_p99_wait_equals_the_seeds_percentile_over_many_priorities(conn, db_url):
    now = datetime.now(UTC)
    # 250 ready jobs, minutes apart, spread over 5 priorities: the p99 is the 3rd oldest overall
    enqueue_many([{"queue": "p", "payload": {}, "priority": i % 5, "run_at": now - timedelta(minutes=3 * i + 1)}
                  for i in range(250)])
    m = scrape(db_url)
    p99_db = scalar(conn, "SELECT extract(epoch FROM percentile_disc(0.99) WITHIN GROUP "
                          "(ORDER BY now() - run_at))::float8 FROM jobs WHERE queue='p' AND status='queued'")
    third_oldest = scalar(conn, "SELECT extract(epoch FROM now() - run_at)::float8 FROM jobs "
                                "ORDER BY run_at OFFSET 2 LIMIT 1")
    assert p99_db == pytest.approx(third_oldest, abs=1)
    assert m[("skiplock_queue_p99_wait_seconds", q("p"))] == pytest.approx(p99_db, abs=30)
    assert m[("skiplock_queue_oldest_ready_age_seconds", q("p"))] == pytest.approx((3 * 249 + 1) * 60, abs=30)


def test_queue_limits_in_metrics(conn, db_url):
    from skiplock.core.features import limits

    limits.set_limit(conn, "m_limited", concurrency=3, rate="20/s")
    samples = scrape(db_url)
    assert samples[("skiplock_queue_concurrency_limit", q("m_limited"))] == 3
    assert samples[("skiplock_queue_rate_limit", q("m_limited"))] == 20
    assert samples[("skiplock_queue_rate_burst", q("m_limited"))] == 2
