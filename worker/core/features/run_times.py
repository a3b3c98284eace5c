"""Handler run times per queue and minute, measured in the worker and saved with its heartbeat.

The console's "Run times" (p50, p95 and max per queue over 1 h, 24 h or 7 d) and Long-runners'
"x times its task's p95" read them. A worker counts each run into a fixed-bucket histogram per
(minute, queue); its registry heartbeat adds the finished counts to `job_runtimes` (migration 028)
in one statement, so the ack path pays nothing but a dict update under a lock.
"""

from __future__ import annotations

import bisect
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import psycopg
import psycopg.errors

log = logging.getLogger("skiplock.run_times")

# Bucket upper bounds in seconds (+Inf implied), fixed so that rows of every worker add up bucket by bucket.
BOUNDS: tuple[float, ...] = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0,
                             30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)

# Add one worker's counts for some (minute, queue) pairs to what is stored.
SAVE = """
INSERT INTO job_runtimes AS r (minute, queue, worker_id, counts, total, sum_s, max_s)
SELECT m, q, %(worker_id)s, c::bigint[], n, s, x
  FROM unnest(%(minutes)s::timestamptz[], %(queues)s::text[], %(counts)s::text[], %(totals)s::bigint[],
              %(sums)s::float8[], %(maxes)s::float8[]) AS v(m, q, c, n, s, x)
ON CONFLICT (minute, queue, worker_id) DO UPDATE
   SET counts = (SELECT array_agg(a + b ORDER BY i)
                   FROM unnest(r.counts, EXCLUDED.counts) WITH ORDINALITY AS u(a, b, i)),
       total = r.total + EXCLUDED.total, sum_s = r.sum_s + EXCLUDED.sum_s, max_s = greatest(r.max_s, EXCLUDED.max_s)
"""

# Rows older than the retention, in batches (the pruner calls this with job_stats' retention).
PRUNE = """
DELETE FROM job_runtimes WHERE ctid = ANY (ARRAY(SELECT ctid FROM job_runtimes
                                                 WHERE minute < now() - make_interval(secs => %(older_than)s)
                                                 LIMIT %(limit)s))
"""


@dataclass
class Cell:
    """One (minute, queue)'s runs: counts per bucket (+Inf last), how many, their sum and the longest."""

    counts: list[int]
    total: int = 0
    sum_s: float = 0.0
    max_s: float = 0.0


class RunTimeRecorder:
    """Thread-safe per-(minute, queue) histograms of one worker process, emptied by each save()."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cells: dict[tuple[int, str], Cell] = {}  # (minutes since the epoch, queue)
        self._warned = False

    def observe(self, queue: str, seconds: float, now: datetime | None = None) -> None:
        """Count one run of `queue`'s handler that took `seconds`.

        On every job's path: the minute is an int of time.time() (a datetime per job, now() and
        replace(), cost a measurable share of a no-op drain's rate), made a datetime only in save()."""
        if not seconds >= 0:  # negative, or NaN
            return
        minute = int((time.time() if now is None else now.timestamp()) // 60)
        index = bisect.bisect_left(BOUNDS, seconds)
        with self._lock:
            cell = self._cells.get((minute, queue))
            if cell is None:
                cell = self._cells[(minute, queue)] = Cell([0] * (len(BOUNDS) + 1))
            cell.counts[index] += 1
            cell.total += 1
            cell.sum_s += seconds
            if seconds > cell.max_s:
                cell.max_s = seconds

    def save(self, conn: psycopg.Connection, worker_id: str) -> int:
        """Add the counted runs to job_runtimes; returns how many (minute, queue) rows were written.
        A failed write puts the counts back, so the next heartbeat carries them."""
        with self._lock:
            cells, self._cells = self._cells, {}
        if not cells:
            return 0
        keys = list(cells)
        try:
            conn.execute(SAVE, {
                "worker_id": worker_id, "minutes": [datetime.fromtimestamp(m * 60, UTC) for m, _ in keys],
                "queues": [q for _, q in keys],
                "counts": ["{" + ",".join(map(str, cells[k].counts)) + "}" for k in keys],
                "totals": [cells[k].total for k in keys], "sums": [cells[k].sum_s for k in keys],
                "maxes": [cells[k].max_s for k in keys]})
        except psycopg.errors.UndefinedTable:
            if not self._warned:  # new code on an old schema: run times are optional, say so once
                log.warning("job_runtimes table missing: run `skiplock migrate` to record run times")
                self._warned = True
            return 0
        except psycopg.Error:
            self._merge_back(cells)
            raise
        return len(keys)

    def _merge_back(self, cells: dict[tuple[int, str], Cell]) -> None:
        with self._lock:
            for key, old in cells.items():
                cell = self._cells.setdefault(key, Cell([0] * (len(BOUNDS) + 1)))
                cell.counts = [a + b for a, b in zip(cell.counts, old.counts, strict=True)]
                cell.total += old.total
                cell.sum_s += old.sum_s
                cell.max_s = max(cell.max_s, old.max_s)


def percentile(counts: Sequence[int], q: float, max_s: float) -> float | None:
    """The q-quantile (0..1) of a histogram of BOUNDS buckets, interpolated inside its bucket and never
    above the longest run seen: an estimate whose error is at most its bucket's width.

    >>> percentile([0] * 7 + [10] + [0] * 14, 0.5, 0.2)  # ten runs in (0.1, 0.2]
    0.15
    >>> percentile([], 0.95, 0.0) is None
    True
    """
    total = sum(counts)
    if total == 0:
        return None
    rank = q * total
    seen = 0
    for i, n in enumerate(counts):
        if n and seen + n >= rank:
            low = BOUNDS[i - 1] if i > 0 else 0.0
            high = BOUNDS[i] if i < len(BOUNDS) else max_s
            value = low + (high - low) * (rank - seen) / n
            return min(round(value, 6), max_s)
        seen += n
    return max_s


def prune(conn: psycopg.Connection, older_than: float, limit: int) -> int:
    """Delete up to `limit` run-time rows older than `older_than` seconds; returns how many."""
    return conn.execute(PRUNE, {"older_than": older_than, "limit": limit}).rowcount
