"""Durable jobs' guarantees under crashes, with real worker processes and SIGKILL (tests/support/durable_handlers.py):
- a step that completed before a SIGKILL never runs again; the step that was interrupted runs again;
- a cursor resumes from its last written value (the items redone are bounded by about a second of work);
- SIGTERM during a run writes the cursors, releases the job without spending its attempt, and it resumes
  in another worker from where it got to.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from skiplock import enqueue
from tests.fault.conftest import FAST_RECOVERY, stop
from tests.support.helpers import scalar, wait_for

DURABLE = {**FAST_RECOVERY, "SKIPLOCK_TASKS": "tests.support.durable_handlers", "SKIPLOCK_CONCURRENCY": "4"}


def step_runs(conn: psycopg.Connection, job_id: int) -> dict[int, int]:
    rows = conn.execute("SELECT (payload->>'step')::int, count(*) FROM test_effects "
                        "WHERE job_id = %s AND payload ? 'step' GROUP BY 1", (job_id,)).fetchall()
    return {step: int(n) for step, n in rows}


def items_done(conn: psycopg.Connection, job_id: int) -> list[int]:
    return [r[0] for r in conn.execute("SELECT (payload->>'item')::int FROM test_effects "
                                       "WHERE job_id = %s AND payload ? 'item' ORDER BY at", (job_id,))]


def gone(conn: psycopg.Connection, job_id: int) -> bool:
    return scalar(conn, "SELECT count(*) FROM jobs WHERE id = %s", (job_id,)) == 0


@pytest.mark.slow
def test_a_step_done_before_a_sigkill_never_runs_again(conn, spawn_worker) -> None:
    job_id = enqueue("d_steps", {"steps": 6, "step_sleep": 0.4}, max_attempts=5)
    first = spawn_worker(**DURABLE)
    # step 3 is under way: its effect is written, its result not yet stored
    wait_for(lambda: step_runs(conn, job_id).get(3) == 1, timeout=60, message="step 3 to start")
    first.kill()
    stored = {r[0] for r in conn.execute("SELECT name FROM job_steps WHERE job_id = %s", (job_id,))}
    assert stored == {"step-0", "step-1", "step-2"}

    second = spawn_worker(**DURABLE)
    wait_for(lambda: gone(conn, job_id), timeout=90, message="the job to finish in the second worker")
    assert stop(second, conn) == 0
    # steps 0-2 ran once; step 3 was interrupted and ran again (at-least-once); 4 and 5 once
    assert step_runs(conn, job_id) == {0: 1, 1: 1, 2: 1, 3: 2, 4: 1, 5: 1}


@pytest.mark.slow
def test_a_cursor_resumes_from_its_last_written_value_after_a_sigkill(conn, spawn_worker) -> None:
    items, per_item = 400, 0.01  # about 4 s of work; cursors are written about once a second
    job_id = enqueue("d_import", {"items": items, "item_sleep": per_item}, max_attempts=5)
    first = spawn_worker(**DURABLE)
    wait_for(lambda: len(items_done(conn, job_id)) >= 150, timeout=60, message="the import to be under way")
    wait_for(lambda: scalar(conn, "SELECT value FROM job_cursors WHERE job_id = %s", (job_id,)),
             timeout=30, message="a cursor to be written")
    first.kill()
    saved = int(scalar(conn, "SELECT value FROM job_cursors WHERE job_id = %s", (job_id,)))
    before_kill = len(items_done(conn, job_id))

    second = spawn_worker(**DURABLE)
    wait_for(lambda: gone(conn, job_id), timeout=90, message="the import to finish")
    assert stop(second, conn) == 0
    done = items_done(conn, job_id)
    # the second run started at the saved cursor, never at row 0
    assert done[before_kill] == saved, (saved, done[before_kill - 3:before_kill + 3])
    assert sorted(set(done)) == list(range(items))
    redone = len(done) - items
    assert 0 <= redone == before_kill - saved
    # a cursor is written about once a second: the redone items are about a second of work or less
    # (generous bound: a loaded machine stretches the second)
    assert redone <= 3.0 / per_item, redone


@pytest.mark.slow
def test_sigterm_writes_the_cursors_and_the_job_resumes_without_spending_its_attempt(conn, spawn_worker) -> None:
    items = 2000
    job_id = enqueue("d_import", {"items": items, "item_sleep": 0.005}, max_attempts=1)
    settings: dict[str, Any] = {**DURABLE, "SKIPLOCK_SHUTDOWN_GRACE": "0.5"}
    first = spawn_worker(**settings)
    wait_for(lambda: len(items_done(conn, job_id)) >= 100, timeout=60, message="the import to be under way")
    at_sigterm = len(items_done(conn, job_id))
    assert stop(first, conn) == 0  # a deploy: SIGTERM, the grace runs out, the job is released
    saved = int(scalar(conn, "SELECT value FROM job_cursors WHERE job_id = %s", (job_id,)))
    before = len(items_done(conn, job_id))
    status, attempts = conn.execute("SELECT status::text, attempts FROM jobs WHERE id = %s", (job_id,)).fetchone()
    assert (status, attempts) == ("queued", 0)  # released, its attempt given back: max_attempts=1 still runs
    # the shutdown wrote the cursor after the grace, so at least every item done when SIGTERM came; the
    # handler, still running, stopped at its next save_cursor: at most the item in progress is redone
    assert at_sigterm <= saved <= before <= saved + 1, (at_sigterm, saved, before)

    second = spawn_worker(**DURABLE)
    wait_for(lambda: gone(conn, job_id), timeout=120, message="the import to finish in the second worker")
    assert stop(second, conn) == 0
    done = items_done(conn, job_id)
    assert done[before] == saved
    assert sorted(set(done)) == list(range(items))
