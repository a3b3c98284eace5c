"""The transition table against the SQL guards: every operator action from every situation, on real
PostgreSQL, with each job brought to its situation by the queue core itself (enqueue, claim, ack; a parked
job by its handler's job.sleep).

An allowed action changes the job to the table's result; a forbidden one returns no id and leaves
the row exactly as it was.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from skiplock import enqueue
from skiplock.core import state_changes
from skiplock.core.errors import Park
from skiplock.core.job_context import JobContext
from skiplock.core.transitions import SITUATIONS, TRANSITIONS, allowed, situation

WORKER = "transitions-test-worker"


def _claimed(conn: psycopg.Connection, queue: str) -> state_changes.ClaimedJob:
    [job] = state_changes.claim(conn, WORKER, [queue], [30.0], 1)
    return job


def _finish(conn: psycopg.Connection, queue: str, status: str, error: str | None) -> int:
    job = _claimed(conn, queue)
    written = state_changes.ack_batch(conn, WORKER, [state_changes.Outcome(job.id, job.queue, job.attempts, status,
                                                                           error=error)],
                                      history="keep")
    assert written == {job.id}
    return job.id


def make(conn: psycopg.Connection, where: str) -> int:
    """A job in situation `where`, made the way the product makes it."""
    queue = f"tr_{where}"
    if where == "scheduled":
        return enqueue(queue, {"w": where}, delay=3600) or 0
    job_id = enqueue(queue, {"w": where}, max_attempts=3) or 0
    if where == "ready":
        return job_id
    if where == "running":
        return _claimed(conn, queue).id
    if where == "parked":  # a durable job's handler parked it: job.sleep, as a handler does it
        claimed = _claimed(conn, queue)
        with pytest.raises(Park):
            JobContext(claimed.id, claimed.queue, claimed.attempts, claimed.max_attempts, 0, datetime.now(UTC),
                       datetime.now(UTC), datetime.now(UTC), None, WORKER).sleep("nap", 3600)
        return claimed.id
    return _finish(conn, queue, {"succeeded": "ok", "failed": "failed", "dead": "dead"}[where],
                   None if where == "succeeded" else f"ValueError: made {where}")


def row(conn: psycopg.Connection, job_id: int) -> tuple[Any, ...] | None:
    return conn.execute("SELECT to_jsonb(j) FROM jobs j WHERE id = %s", (job_id,)).fetchone()


def where_now(conn: psycopg.Connection, job_id: int) -> str:
    found = conn.execute("SELECT status::text, run_at > now() FROM jobs WHERE id = %s", (job_id,)).fetchone()
    return "deleted" if found is None else situation(found[0], found[1])


@pytest.mark.parametrize("where", [*SITUATIONS, "parked"])  # parked: a job page's situation, not a tab
@pytest.mark.parametrize("action", [t.action for t in TRANSITIONS])
def test_every_action_from_every_situation(conn: psycopg.Connection, where: str, action: str) -> None:
    transition = next(t for t in TRANSITIONS if t.action == action)
    job_id = make(conn, where)
    assert where_now(conn, job_id) == where
    before = row(conn, job_id)
    changed = transition.apply(conn, [job_id], "tester")
    if where in transition.sources:
        assert changed == [job_id]
        assert where_now(conn, job_id) == transition.result
    else:
        assert changed == []
        assert row(conn, job_id) == before  # not one column moved


def test_release_on_the_last_attempt_makes_the_job_dead(conn: psycopg.Connection) -> None:
    job_id = enqueue("tr_last", {}, max_attempts=1) or 0
    _claimed(conn, "tr_last")
    assert allowed("running")[0].apply(conn, [job_id], "tester") == [job_id]
    assert where_now(conn, job_id) == "dead"


def test_pages_offer_exactly_the_allowed_actions() -> None:
    from skiplock.webapp.pages.queues import TAB_ACTIONS

    for where in SITUATIONS:
        assert [a for a, _label in TAB_ACTIONS[where]] == [t.action for t in allowed(where)], where


def test_a_running_job_is_released_or_cancelled_through_the_table(conn: psycopg.Connection) -> None:
    # the job page and the queue page's running tab show exactly these, in this order (templates/jobs/_job.html)
    assert [(t.action, t.label) for t in allowed("running")] == [("release", "Release"), ("cancel-running", "Cancel")]
    job_id = make(conn, "running")
    cancel_running = allowed("running")[1]
    assert cancel_running.apply(conn, [job_id], "tester") == [job_id]
    assert conn.execute("SELECT status::text, cancel_requested_by FROM jobs WHERE id = %s",
                        (job_id,)).fetchone() == ("running", "tester")  # asked; its handler ends it
