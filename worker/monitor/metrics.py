"""Prometheus metrics collected by SQL at scrape time, cheap on big tables.

Every number is read when Prometheus scrapes, so there is no exporter state to go stale.
Counts walk the partial indexes and stop at COUNT_CAP rows; past that the planner's estimate
is reported instead (a gauge that reads "about 2.3M" is as useful as an exact one, and a
scrape that scans millions of rows every 15 s is not). Per-queue ages use a loose index scan
over priorities, so they read a handful of index entries whatever the backlog.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager as ContextManager
from typing import Any

import psycopg
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from skiplock.core.durable import service as durable_service
from skiplock.core.status import LIVE_WORKER_SECONDS, JobStatus
from skiplock.monitor.autoscale import Damper, queue_loads

log = logging.getLogger("skiplock.metrics")

COUNT_CAP = 100_000  # exact counts up to here, the planner's estimate above
SCRAPE_TIMEOUT_MS = 5000  # a scrape never holds a statement longer than this

# Distinct queues with rows in `status`, by a loose index scan: one index probe per queue
# instead of reading every row (jobs_ready_idx for queued, jobs_finished_idx for dead).
QUEUES_WITH_STATUS = """
WITH RECURSIVE q AS (
    (SELECT queue FROM jobs WHERE status = %(status)s::job_status ORDER BY queue LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue FROM jobs j
             WHERE j.status = %(status)s::job_status AND j.queue > q.queue ORDER BY j.queue LIMIT 1)
      FROM q WHERE q.queue IS NOT NULL
)
SELECT queue FROM q WHERE queue IS NOT NULL
"""

# Queued rows of one queue split into ready and scheduled, read at most %(cap)s index entries.
QUEUED_COUNTS = """
SELECT count(*) FILTER (WHERE run_at <= now()), count(*) FILTER (WHERE run_at > now()), count(*)
  FROM (SELECT run_at FROM jobs WHERE queue = %(queue)s AND status = 'queued' LIMIT %(cap)s) s
"""

# Dead rows of one queue, at most %(cap)s (jobs_finished_idx).
DEAD_COUNT = """
SELECT count(*) FROM (SELECT 1 FROM jobs WHERE queue = %(queue)s AND status = 'dead' LIMIT %(cap)s) s
"""

# Running rows are bounded by the workers' slots, so an exact count is always cheap.
RUNNING_COUNTS = "SELECT queue, count(*) FROM jobs WHERE status = 'running' GROUP BY queue"

# The age of the k-th oldest ready job of a queue: k=1 is the oldest, k = N - ceil(0.99 N) + 1
# is the p99 wait (percentile_disc(0.99) over now() - run_at, as the seed's query computes it
# for ready jobs). Priorities are found by a loose index scan, then each priority's oldest k
# are read in index order (run_at ascending within a priority), so the cost is
# (#priorities x k) index entries, not the backlog.
KTH_OLDEST_READY = """
WITH RECURSIVE p AS (
    (SELECT priority FROM jobs WHERE queue = %(queue)s AND status = 'queued'
      ORDER BY priority DESC LIMIT 1)
    UNION ALL
    SELECT (SELECT j.priority FROM jobs j
             WHERE j.queue = %(queue)s AND j.status = 'queued' AND j.priority < p.priority
             ORDER BY j.priority DESC LIMIT 1)
      FROM p WHERE p.priority IS NOT NULL
)
SELECT extract(epoch FROM now() - f.run_at)::float8
  FROM p CROSS JOIN LATERAL (
      SELECT j.run_at FROM jobs j
       WHERE j.queue = %(queue)s AND j.status = 'queued' AND j.priority = p.priority
         AND j.run_at <= now()
       ORDER BY j.run_at LIMIT %(k)s) f
 WHERE p.priority IS NOT NULL
 ORDER BY f.run_at
 LIMIT 1 OFFSET %(k)s - 1
"""

# Totals per queue since the beginning: the minutes kept, plus the totals the pruner folded the older
# minutes into (one statement, one snapshot: a minute is counted in exactly one of the two).
STAT_TOTALS = """
SELECT queue, sum(completed), sum(retried), sum(failed), sum(dead), sum(reaped)
  FROM (SELECT queue, completed, retried, failed, dead, reaped FROM job_stats
        UNION ALL
        SELECT queue, completed, retried, failed, dead, reaped FROM job_stats_totals) s
 GROUP BY queue
"""

# The last complete minute per queue: what the console's charts plot too.
STAT_LAST_MINUTE = """
SELECT queue, sum(completed), sum(retried), sum(failed), sum(dead)
  FROM job_stats WHERE minute = date_trunc('minute', now()) - interval '1 minute'
 GROUP BY queue
"""

LIVE_WORKERS = """
SELECT count(*), coalesce(sum(in_flight), 0), coalesce(sum(concurrency), 0)
  FROM workers WHERE last_seen > now() - make_interval(secs => %(live)s)
"""

LATENCY_ROWS = "SELECT metric, bounds, counts, total_count, total_sum FROM worker_latency"

PAUSED = "SELECT queue FROM paused_queues"

HISTOGRAMS = {
    "claim": ("skiplock_claim_seconds", "Claim statement round trip measured by workers"),
    "ack": ("skiplock_ack_seconds", "Ack batch statement round trip measured by workers"),
    "handler": ("skiplock_handler_seconds", "Handler run time measured by workers"),
    "claim_batch": ("skiplock_claim_batch_jobs", "Jobs returned per claim statement"),
}


def planner_estimate(conn: psycopg.Connection, sql: str, params: dict[str, Any]) -> int:
    """Rows the planner expects `sql` to return (EXPLAIN only, nothing is read)."""
    plan = conn.execute("EXPLAIN (FORMAT JSON) " + sql, params).fetchone()
    assert plan is not None
    return int(plan[0][0]["Plan"]["Plan Rows"])


def queue_counts(conn: psycopg.Connection, queue: str, cap: int = COUNT_CAP) -> tuple[int, int, bool]:
    """(ready, scheduled, exact) for one queue: exact up to `cap` rows, else planner estimates."""
    row = conn.execute(QUEUED_COUNTS, {"queue": queue, "cap": cap}).fetchone()
    assert row is not None
    ready, scheduled, seen = row
    if seen < cap:
        return ready, scheduled, True
    base = "SELECT 1 FROM jobs WHERE queue = %(queue)s AND status = 'queued' AND run_at {} now()"
    est_ready = planner_estimate(conn, base.format("<="), {"queue": queue})
    est_sched = planner_estimate(conn, base.format(">"), {"queue": queue})
    # the capped sample is a floor: never report less than what was actually seen
    return max(est_ready, ready), max(est_sched, scheduled), False


def dead_count(conn: psycopg.Connection, queue: str, cap: int = COUNT_CAP) -> int:
    """Dead jobs of one queue: exact up to `cap`, else the planner's estimate."""
    row = conn.execute(DEAD_COUNT, {"queue": queue, "cap": cap}).fetchone()
    assert row is not None
    if row[0] < cap:
        return int(row[0])
    est = planner_estimate(conn, "SELECT 1 FROM jobs WHERE queue = %(queue)s AND status = 'dead'",
                           {"queue": queue})
    return max(est, int(row[0]))


def kth_oldest_ready_age(conn: psycopg.Connection, queue: str, k: int) -> float | None:
    """Seconds since run_at of the k-th oldest ready job of `queue` (None if fewer than k)."""
    row = conn.execute(KTH_OLDEST_READY, {"queue": queue, "k": max(k, 1)}).fetchone()
    return None if row is None else float(row[0])


def p99_rank(ready: int) -> int:
    """Which oldest job is the p99 wait: percentile_disc(0.99) over ascending ages."""
    return ready - math.ceil(0.99 * ready) + 1


def sum_histograms(rows: Iterable[tuple[Any, ...]]) -> dict[str, tuple[list[float], list[int], int, float]]:
    """Add up workers' rows per metric (bucket by bucket); rows with other bounds are skipped."""
    out: dict[str, tuple[list[float], list[int], int, float]] = {}
    for metric, bounds, counts, total, total_sum in rows:
        bounds, counts = list(bounds), list(counts)
        if metric not in out:
            out[metric] = (bounds, counts, int(total), float(total_sum))
        elif out[metric][0] == bounds:
            b, c, n, s = out[metric]
            out[metric] = (b, [x + y for x, y in zip(c, counts, strict=True)], n + int(total), s + float(total_sum))
        else:
            log.warning("worker_latency row for %s has other buckets; skipped", metric)
    return out


def _fmt(bound: float) -> str:
    return repr(float(bound))


def histogram_family(metric: str, bounds: list[float], counts: list[int], total_sum: float) -> Metric:
    """A HistogramMetricFamily from cumulative counts (the last is +Inf)."""
    name, help_text = HISTOGRAMS[metric]
    buckets = [(_fmt(b), c) for b, c in zip(bounds, counts, strict=False)] + [("+Inf", counts[-1])]
    return HistogramMetricFamily(name, help_text, buckets=buckets, sum_value=total_sum)


class SkiplockCollector(Collector):
    """Reads the queue's state from PostgreSQL on every collect() (i.e. every scrape)."""

    def __init__(self, connection: Callable[[], ContextManager[psycopg.Connection]],
                 count_cap: int = COUNT_CAP) -> None:
        self.connection = connection
        self.count_cap = count_cap
        # skiplock_desired_workers is damped across scrapes (up at once, down after a hold)
        self.damper = Damper()
        self._damper_lock = threading.Lock()

    def describe(self) -> list[Metric]:
        # no samples at registration time: describing must not touch the database
        return []

    def collect(self) -> Iterator[Metric]:
        """All skiplock metrics; if the database is unreachable only skiplock_up 0 is reported."""
        started = time.perf_counter()
        up = GaugeMetricFamily("skiplock_up", "1 if the metrics query reached PostgreSQL")
        try:
            with self.connection() as conn:
                families = list(self._collect(conn))
        except psycopg.Error as exc:
            log.warning("metrics scrape failed: %s", str(exc).strip().splitlines()[0] if str(exc) else exc)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield from families
        took = GaugeMetricFamily("skiplock_scrape_duration_seconds", "Time spent in the metrics SQL")
        took.add_metric([], time.perf_counter() - started)
        yield took

    def _collect(self, conn: psycopg.Connection) -> Iterator[Metric]:
        # read-only and time-boxed: a scrape can never hold locks or run away on a huge table
        with conn.transaction():
            conn.execute("SET TRANSACTION READ ONLY")
            conn.execute(f"SET LOCAL statement_timeout = {SCRAPE_TIMEOUT_MS}")
            ready: dict[str, int] = {}  # filled by _queue_metrics, read by the autoscaling gauge
            yield from self._queue_metrics(conn, ready)
            yield from self._stat_metrics(conn)
            yield from self._worker_metrics(conn)
            yield from self._limit_metrics(conn)
            yield from self._autoscale_metrics(conn, ready)

    def _queue_metrics(self, conn: psycopg.Connection, ready_seen: dict[str, int]) -> Iterator[Metric]:
        queued_queues = [r[0] for r in conn.execute(QUEUES_WITH_STATUS, {"status": JobStatus.QUEUED.value})]
        dead_queues = [r[0] for r in conn.execute(QUEUES_WITH_STATUS, {"status": JobStatus.DEAD.value})]
        running = {q: int(n) for q, n in conn.execute(RUNNING_COUNTS)}
        parked = durable_service.parked_counts(conn)  # durable jobs sleeping or waiting for a signal
        paused = {r[0] for r in conn.execute(PAUSED)}
        queues = sorted(set(queued_queues) | set(dead_queues) | set(running) | set(parked) | paused)

        jobs = GaugeMetricFamily("skiplock_queue_jobs", "Jobs per queue and state (ready = queued and due)",
                                 labels=["queue", "state"])
        exact = GaugeMetricFamily("skiplock_queue_counts_exact",
                                  "1 if the queue's counts are exact, 0 if planner estimates (backlog over cap)",
                                  labels=["queue"])
        oldest = GaugeMetricFamily("skiplock_queue_oldest_ready_age_seconds",
                                   "Seconds the oldest ready job has waited past its run_at", labels=["queue"])
        p99 = GaugeMetricFamily("skiplock_queue_p99_wait_seconds",
                                "p99 of now() - run_at over ready jobs (page on its growth)", labels=["queue"])
        paused_g = GaugeMetricFamily("skiplock_queue_paused", "1 if the queue is paused", labels=["queue"])
        for queue in queues:
            ready, scheduled, is_exact = (queue_counts(conn, queue, self.count_cap)
                                          if queue in queued_queues else (0, 0, True))
            ready_seen[queue] = ready
            dead = dead_count(conn, queue, self.count_cap) if queue in dead_queues else 0
            for state, value in (("ready", ready), ("scheduled", scheduled),
                                 ("running", running.get(queue, 0)), ("parked", parked.get(queue, 0)),
                                 ("dead", dead)):
                jobs.add_metric([queue, state], value)
            exact.add_metric([queue], 1 if is_exact else 0)
            age = kth_oldest_ready_age(conn, queue, 1) if ready else None
            oldest.add_metric([queue], age or 0.0)
            wait = kth_oldest_ready_age(conn, queue, p99_rank(ready)) if ready else None
            p99.add_metric([queue], wait or 0.0)
            paused_g.add_metric([queue], 1 if queue in paused else 0)
        yield from (jobs, exact, oldest, p99, paused_g)

    def _stat_metrics(self, conn: psycopg.Connection) -> Iterator[Metric]:
        names = ("completed", "retried", "failed", "dead")
        totals = {n: CounterMetricFamily(f"skiplock_jobs_{n}", f"Jobs {n} (from job_stats, written in ack batches)",
                                         labels=["queue"]) for n in names}
        reaped = CounterMetricFamily("skiplock_leases_reaped", "Running jobs whose lease expired and were reaped",
                                     labels=["queue"])
        for queue, *values in conn.execute(STAT_TOTALS):
            for name, value in zip(names, values[:4], strict=True):
                totals[name].add_metric([queue], float(value))
            reaped.add_metric([queue], float(values[4]))
        minute = GaugeMetricFamily("skiplock_jobs_last_minute", "Outcomes in the last complete minute",
                                   labels=["queue", "outcome"])
        for queue, *values in conn.execute(STAT_LAST_MINUTE):
            for name, value in zip(names, values, strict=True):
                minute.add_metric([queue, name], float(value))
        yield from (*totals.values(), reaped, minute)

    def _autoscale_metrics(self, conn: psycopg.Connection, ready: dict[str, int]) -> Iterator[Metric]:
        desired = GaugeMetricFamily("skiplock_desired_workers",
                                    "Worker processes the queue needs now: Little's law on its arrival rate and "
                                    "handler time, plus its backlog within 10 s; damped", labels=["queue"])
        arrival = GaugeMetricFamily("skiplock_queue_arrival_rate",
                                    "Jobs/s finished over the last 1-2 minutes (the arrival rate of a queue that "
                                    "keeps up)", labels=["queue"])
        now = time.monotonic()
        for load in queue_loads(conn, ready):
            with self._damper_lock:
                desired.add_metric([load.queue], float(self.damper.update(load.queue, load.desired, now)))
            arrival.add_metric([load.queue], load.arrival)
        yield from (desired, arrival)

    def _limit_metrics(self, conn: psycopg.Connection) -> Iterator[Metric]:
        from skiplock.core.features.limits import list_limits

        yield from _limit_gauges(list_limits(conn))

    def _worker_metrics(self, conn: psycopg.Connection) -> Iterator[Metric]:
        row = conn.execute(LIVE_WORKERS, {"live": LIVE_WORKER_SECONDS}).fetchone()
        assert row is not None
        for name, help_text, value in (
            ("skiplock_workers_live", "Worker processes that heartbeated recently", row[0]),
            ("skiplock_jobs_in_flight", "Jobs the live workers are running", row[1]),
            ("skiplock_worker_slots", "Handler slots (concurrency) of the live workers", row[2]),
        ):
            gauge = GaugeMetricFamily(name, help_text)
            gauge.add_metric([], float(value))
            yield gauge
        summed = sum_histograms(conn.execute(LATENCY_ROWS).fetchall())
        for metric in HISTOGRAMS:
            if metric in summed:
                bounds, counts, _total, total_sum = summed[metric]
                yield histogram_family(metric, bounds, counts, total_sum)


def _limit_gauges(rows: Iterable[Any]) -> Iterator[Metric]:
    """Global per-queue limits (worker/core/features/limits.py): set values, with the running count beside them."""
    conc = GaugeMetricFamily("skiplock_queue_concurrency_limit", "Most jobs of the queue running at once, "
                             "all workers together (absent: unlimited)", labels=["queue"])
    rate = GaugeMetricFamily("skiplock_queue_rate_limit", "Most jobs of the queue started per second "
                             "(absent: unlimited)", labels=["queue"])
    burst = GaugeMetricFamily("skiplock_queue_rate_burst", "Rate limit tolerance: extra starts any one second "
                              "may see", labels=["queue"])
    for r in rows:
        if r.concurrency is not None:
            conc.add_metric([r.queue], float(r.concurrency))
        if r.rate is not None:
            rate.add_metric([r.queue], float(r.rate))
            burst.add_metric([r.queue], float(r.burst or 0))
    yield from (conc, rate, burst)


def connection_from_url(url: str) -> Callable[[], ContextManager[psycopg.Connection]]:
    """A connection factory for one-off collectors (tests, CLI): a new connection per scrape."""

    @contextlib.contextmanager
    def connect() -> Iterator[psycopg.Connection]:
        from skiplock.core.plumbing.db import connect as db_connect

        with db_connect(url, "skiplock-metrics") as conn:
            yield conn

    return connect


def render(collector: Collector) -> bytes:
    """The Prometheus text exposition of one collector (its own registry, nothing global)."""
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return generate_latest(registry)
