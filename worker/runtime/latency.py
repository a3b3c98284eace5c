"""Latency histograms measured inside a worker, and their trip to the database.

A worker keeps Prometheus-style cumulative bucket counts for its claim and ack round trips,
its handler run times and its claim batch sizes. Its registry heartbeat (every 5 s) upserts
them into `worker_latency` (migration 005); the web process's /metrics sums the rows of every
worker, so the histograms reach Prometheus without scraping each worker separately.
"""

from __future__ import annotations

import bisect
import logging
import math
import threading
from dataclasses import dataclass

import psycopg
import psycopg.errors

log = logging.getLogger("skiplock.latency")

# Upper bounds (seconds, or jobs for claim_batch); +Inf is implicit. Fixed so that rows of
# different workers can be summed bucket by bucket.
BUCKETS: dict[str, tuple[float, ...]] = {
    "claim": (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
    "ack": (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
    "handler": (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0),
    "claim_batch": (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000),
}

# Upsert one worker's histogram; counts are cumulative per bound, like Prometheus' `le`.
SAVE_LATENCY = """
INSERT INTO worker_latency (worker_id, metric, bounds, counts, total_count, total_sum, updated_at)
SELECT %(worker_id)s, m, b::float8[], c::bigint[], n, s, now()
  FROM unnest(%(metrics)s::text[], %(bounds)s::text[], %(counts)s::text[], %(totals)s::bigint[],
              %(sums)s::float8[]) AS v(m, b, c, n, s)
ON CONFLICT (worker_id, metric) DO UPDATE
   SET bounds = EXCLUDED.bounds, counts = EXCLUDED.counts, total_count = EXCLUDED.total_count,
       total_sum = EXCLUDED.total_sum, updated_at = now()
"""


@dataclass
class Histogram:
    """Cumulative-at-read bucket counts for one measurement."""

    bounds: tuple[float, ...]
    counts: list[int]  # per bucket (not cumulative), last one is +Inf
    total: int = 0
    sum: float = 0.0

    def cumulative(self) -> list[int]:
        """Counts per upper bound including everything below it (the `le` convention), +Inf last."""
        out, running = [], 0
        for count in self.counts:
            running += count
            out.append(running)
        return out


class LatencyRecorder:
    """Thread-safe histograms for one worker process; observe() costs a bisect and a lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.histograms = {name: Histogram(b, [0] * (len(b) + 1)) for name, b in BUCKETS.items()}
        self._warned_schema = False

    def observe(self, metric: str, value: float) -> None:
        """Count one measurement of `metric` (seconds; jobs for claim_batch)."""
        if math.isnan(value):
            return
        hist = self.histograms[metric]
        index = bisect.bisect_left(hist.bounds, value)  # first bound >= value: `le` semantics
        with self._lock:
            hist.counts[index] += 1
            hist.total += 1
            hist.sum += value

    def snapshot(self) -> dict[str, Histogram]:
        """A consistent copy of every histogram."""
        with self._lock:
            return {name: Histogram(h.bounds, list(h.counts), h.total, h.sum)
                    for name, h in self.histograms.items()}

    def save(self, conn: psycopg.Connection, worker_id: str) -> None:
        """Upsert this worker's histograms into worker_latency (one statement)."""
        snap = self.snapshot()
        names = list(snap)
        try:
            self._execute_save(conn, worker_id, snap, names)
        except psycopg.errors.UndefinedTable:
            # new code on an old schema: say it once, keep working (the histograms are optional)
            if not self._warned_schema:
                log.warning("worker_latency table missing: run `skiplock migrate` to publish latency metrics")
                self._warned_schema = True

    def _execute_save(self, conn: psycopg.Connection, worker_id: str, snap: dict[str, Histogram],
                      names: list[str]) -> None:
        conn.execute(SAVE_LATENCY, {
            "worker_id": worker_id,
            "metrics": names,
            # arrays of different lengths cannot share one 2-D array; pass them as text literals
            "bounds": ["{" + ",".join(repr(float(b)) for b in snap[n].bounds) + "}" for n in names],
            "counts": ["{" + ",".join(str(c) for c in snap[n].cumulative()) + "}" for n in names],
            "totals": [snap[n].total for n in names],
            "sums": [snap[n].sum for n in names],
        })


# Rows of workers gone this long are folded into one 'exited' row per metric, so the table
# stays small while the summed counters never go backwards (which Prometheus reads as a reset).
EXITED_ROW = "exited"
FOLD_AFTER_SECONDS = 3600.0


def fold_exited(conn: psycopg.Connection, older_than: float = FOLD_AFTER_SECONDS) -> int:
    """Fold stale workers' rows into the 'exited' row; returns the number of rows folded."""
    with conn.transaction():
        # one folder at a time across all workers; the others skip this pass
        got = conn.execute("SELECT pg_try_advisory_xact_lock(hashtext('skiplock_latency_fold'))").fetchone()
        if not (got and got[0]):
            return 0
        stale = conn.execute(
            "DELETE FROM worker_latency WHERE worker_id <> %s "
            "AND updated_at < now() - make_interval(secs => %s) "
            "RETURNING metric, bounds, counts, total_count, total_sum", (EXITED_ROW, older_than)).fetchall()
        if not stale:
            return 0
        merged: dict[str, tuple[list[float], list[int], int, float]] = {}
        for row in conn.execute("SELECT metric, bounds, counts, total_count, total_sum FROM worker_latency "
                                "WHERE worker_id = %s", (EXITED_ROW,)).fetchall() + stale:
            metric, bounds, counts, total, total_sum = row
            if metric not in merged:
                merged[metric] = (list(bounds), list(counts), total, total_sum)
            elif list(bounds) == merged[metric][0]:
                b, c, n, s = merged[metric]
                merged[metric] = (b, [x + y for x, y in zip(c, counts, strict=True)], n + total, s + total_sum)
        for metric, (bounds, counts, total, total_sum) in merged.items():
            conn.execute(
                "INSERT INTO worker_latency (worker_id, metric, bounds, counts, total_count, total_sum) "
                "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (worker_id, metric) DO UPDATE "
                "SET bounds = EXCLUDED.bounds, counts = EXCLUDED.counts, total_count = EXCLUDED.total_count, "
                "total_sum = EXCLUDED.total_sum, updated_at = now()",
                (EXITED_ROW, metric, bounds, counts, total, total_sum))
        return len(stale)
