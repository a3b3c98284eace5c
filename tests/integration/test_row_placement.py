"""A job's row versions stay on its own page (migration 023: jobs' fillfactor 80).

A claim and an ack each write a new version of the job's row, never HOT on jobs (status is in
every index's predicate). PostgreSQL puts a new version on its old row's page when that page has
room, and otherwise wherever the free space map points: with a big kept history, the gap at the
end of some old, cold page (tests/benchmarks/growth.py: ~83,000 distinct old pages touched per
100,000 jobs drained, one full-page image each after a checkpoint). Here, jobs enqueued through the
public API on a table that keeps its history are claimed and acked by the worker's own statements,
and the pages their rows are on are read before and after.
"""

from __future__ import annotations

import psycopg

from skiplock import enqueue_many
from skiplock.core import state_changes
from skiplock.tools import bench_seed

KEPT = 20_000  # finished rows kept before the ready ones: old pages, each with a gap at its end
READY = 400
CLAIMED = 5  # the first jobs of the queue: all on its first page


PAGES = "SELECT id, (ctid::text::point)[0]::int FROM jobs WHERE id = ANY(%s)"


def _pages_before_and_after(url: str) -> tuple[dict[int, int], dict[int, int]]:
    """Kept history, then READY jobs enqueued and vacuumed; the first CLAIMED of them claimed and
    acked by the worker's statements (keep mode). Each of those jobs' page before and after."""
    with psycopg.connect(url, autocommit=True) as conn:
        bench_seed.seed_finished_jobs(conn, ["history-a", "history-b"], KEPT, status="succeeded")
        ids = enqueue_many([("placed", {}) for _ in range(READY)], conn=conn)[:CLAIMED]
        conn.execute("VACUUM jobs")  # the free space map as a vacuum leaves it, old pages' gaps included
        before: dict[int, int] = dict(conn.execute(PAGES, (ids,)).fetchall())
        jobs = state_changes.claim(conn, "w", ["placed"], [30.0], CLAIMED, payload_as_text=True, with_context=False)
        assert sorted(j.id for j in jobs) == sorted(ids)  # the oldest jobs, as always
        done = state_changes.ack_batch(conn, "w", [state_changes.Outcome(j.id, j.queue, j.attempts,
                                                                         "ok") for j in jobs],
                                       history="keep")
        assert len(done) == CLAIMED
        after: dict[int, int] = dict(conn.execute(PAGES, (ids,)).fetchall())
    return before, after


def test_a_claimed_and_acked_job_keeps_its_versions_on_its_page(fresh_db_url):
    before, after = _pages_before_and_after(fresh_db_url)
    assert after == before


def test_at_fillfactor_100_the_versions_went_to_other_pages(fresh_db_url):
    # the table as migration 005 left it: what migration 023 changed
    with psycopg.connect(fresh_db_url, autocommit=True) as conn:
        conn.execute("ALTER TABLE jobs SET (fillfactor = 100)")
    before, after = _pages_before_and_after(fresh_db_url)
    assert all(after[i] != before[i] for i in before), (before, after)
