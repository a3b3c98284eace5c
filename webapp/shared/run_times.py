"""Each queue's run times (p50, p95, max) from the per-minute histograms the workers save
(worker/core/features/run_times.py, migration 028): the Run times page's table, Long-runners' comparison."""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

from skiplock.core.features.run_times import percentile
from skiplock.webapp.queries import page_queries

# Long-runners paints a running job red only when it is in trouble by both measures: LONG_FACTOR times its
# task's p95 (a run at 1.2x p95 is one of the 5% that are slower every hour) AND LONG_FLOOR_S seconds (a
# 312 ms webhook over a 100 ms p95 is no one's emergency). docs/howto/console.md names both.
LONG_FACTOR = 3.0
LONG_FLOOR_S = 30.0


def is_long(runtime_s: float, p95_s: float | None) -> bool:
    """Whether a run of `runtime_s` is long enough for its task to mean trouble.

    >>> is_long(0.312, 0.1), is_long(45.0, 10.0), is_long(45.0, 20.0), is_long(40.0, None)
    (False, True, False, False)
    """
    return p95_s is not None and runtime_s >= LONG_FLOOR_S and runtime_s >= LONG_FACTOR * p95_s


@dataclass(frozen=True)
class RunTime:
    """One queue's run times over a range; p50 and p95 are estimates inside their histogram bucket."""

    queue: str
    runs: int
    mean_s: float
    p50_s: float | None
    p95_s: float | None
    max_s: float


def run_times(conn: psycopg.Connection, seconds: int, queue: str | None = None) -> list[RunTime]:
    """Each queue's run times over the last `seconds` (only queues that ran something)."""
    out = []
    for name, counts, runs, sum_s, max_s in conn.execute(page_queries.RUN_TIMES, {"seconds": seconds, "queue": queue}):
        counts = [int(c) for c in counts]
        out.append(RunTime(name, int(runs), float(sum_s) / max(int(runs), 1), percentile(counts, 0.5, float(max_s)),
                           percentile(counts, 0.95, float(max_s)), float(max_s)))
    return out


def p95_by_queue(conn: psycopg.Connection, seconds: int = 3600) -> dict[str, float]:
    """queue -> p95 run time over the last `seconds`, for Long-runners' comparison."""
    return {r.queue: r.p95_s for r in run_times(conn, seconds) if r.p95_s}
