"""Bulk rows for the benchmarks (`skiplock bench`, tests/benchmarks) and for tests that need many.

Millions of ready or finished jobs in one statement each, and a scratch queue emptied whatever its
jobs' states. These statements change jobs, yet they are not the queue core's: no running system
makes jobs this way, so they live with the benchmark tools. Every statement a running
system uses to change jobs stays in worker/core/sql/.
"""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

from skiplock.core.error_summary import summarize
from skiplock.core.status import JobStatus

# %(n)s ready jobs in one statement, the seed's way. With %(recipe)s: random priorities 0-10 and
# payload {"s": 1} (a 2-5 ms handler), {"s": 1, "p": g} on every %(probe_every)s-th job (a probe).
SEED_READY_JOBS = """
INSERT INTO jobs (queue, priority, payload)
SELECT %(queue)s,
       CASE WHEN %(recipe)s THEN (random() * 10)::int ELSE 0 END,
       CASE WHEN NOT %(recipe)s THEN '{}'::jsonb
            WHEN %(probe_every)s > 0 AND g %% %(probe_every)s = 0 THEN jsonb_build_object('s', 1, 'p', g)
            ELSE jsonb_build_object('s', 1) END
  FROM generate_series(1, %(n)s) g
"""

# %(n)s finished jobs in one statement (tests/benchmarks/growth.py: millions of kept rows), over
# %(queues)s in turn, finished one every %(spacing)s seconds back from now (the newest first). A
# `dead` job carries the error texts in turn, with their headline and group (computed by the core).
SEED_FINISHED_JOBS = """
INSERT INTO jobs (queue, status, attempts, max_attempts, run_at, created_at, started_at, finished_at, payload,
                  last_error, error_headline, error_group)
SELECT (%(queues)s::text[])[1 + g %% cardinality(%(queues)s::text[])], %(status)s::job_status,
       CASE WHEN %(status)s = 'dead' THEN 20 ELSE 1 END, 20, f.at - interval '2 ms', f.at - interval '2 ms',
       f.at - interval '1 ms', f.at, jsonb_build_object('n', g, 'to', 'user' || g || '@example.com'),
       (%(errors)s::text[])[1 + g %% greatest(1, cardinality(%(errors)s::text[]))],
       (%(headlines)s::text[])[1 + g %% greatest(1, cardinality(%(headlines)s::text[]))],
       (%(groups)s::text[])[1 + g %% greatest(1, cardinality(%(groups)s::text[]))]
  FROM generate_series(1, %(n)s) g
 CROSS JOIN LATERAL (SELECT now() - make_interval(secs => g * %(spacing)s::float8) AS at) f
"""

# Every job and stats row of one queue (a benchmark's scratch queue), whatever their state.
DELETE_QUEUE_JOBS = "DELETE FROM jobs WHERE queue = %(queue)s"
DELETE_QUEUE_STATS = "DELETE FROM job_stats WHERE queue = %(queue)s"


def seed_ready_jobs(conn: psycopg.Connection, queue: str, n: int, *, recipe: bool = False,
                    probe_every: int = 0) -> None:
    """Insert `n` ready jobs in one statement (seed 000's way); `recipe`: random priorities, 2-5 ms payloads."""
    conn.execute(SEED_READY_JOBS, {"queue": queue, "n": n, "recipe": recipe, "probe_every": probe_every})


def seed_finished_jobs(conn: psycopg.Connection, queues: Sequence[str], n: int, *, status: str = "succeeded",
                       errors: Sequence[str] = (), spacing: float = 0.01) -> None:
    """Insert `n` finished jobs in one statement: kept history (`succeeded`) or dead letters with `errors`.

    Jobs go to `queues` in turn and finished one every `spacing` seconds back from now; a dead job
    takes the `errors` in turn, with the headline and group the worker would have stored.
    """
    if status not in (JobStatus.SUCCEEDED, JobStatus.DEAD, JobStatus.FAILED):
        raise ValueError(f"only finished jobs are seeded here, not {status!r}")
    summaries = [summarize(e) for e in errors]
    conn.execute(SEED_FINISHED_JOBS, {
        "queues": list(queues), "status": status, "n": n, "spacing": spacing, "errors": list(errors),
        "headlines": [h for h, _ in summaries], "groups": [g for _, g in summaries]})


def delete_queue(conn: psycopg.Connection, queue: str) -> int:
    """Delete every job and stats row of `queue` (a benchmark's scratch queue); returns the jobs deleted."""
    deleted = conn.execute(DELETE_QUEUE_JOBS, {"queue": queue}).rowcount
    conn.execute(DELETE_QUEUE_STATS, {"queue": queue})
    return deleted
