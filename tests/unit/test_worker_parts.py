"""The worker's three parts, each driven on its own against a real database (worker/runtime/):
the claimer's `run_once()` (one turn of the claim loop), the executor's `execute(job)` (one handler
run and its outcome), and the shutdown's `release_work()` (the grace, the acks, the release).

The Worker is built but never `run()`: no thread starts, and the test makes its connections.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from skiplock import enqueue
from skiplock.core import state_changes
from skiplock.core.plumbing.config import load_settings
from skiplock.core.plumbing.db import make_pool
from skiplock.core.registry import Registry, Task
from skiplock.core.status import OutcomeStatus
from skiplock.runtime.claimer import claims_commit_async
from skiplock.runtime.executor import Executor
from skiplock.runtime.run_hooks import RunHook
from skiplock.runtime.runner import Worker
from tests.support.helpers import scalar


@pytest.fixture
def worker(db_url: str) -> Iterator[Worker]:
    """A Worker for queue 'parts' (its handler records payloads, and raises for {"fail": true}),
    with the pools its run() would make; the pools are closed at the end."""
    ran: list[Any] = []

    def handler(payload: Any) -> None:
        ran.append(payload)
        if payload.get("fail"):
            raise RuntimeError("told to fail")

    registry = Registry()
    registry.add(Task("parts", handler, wants_job=False))
    built = Worker(load_settings(), registry=registry, queues=["parts"])
    built.ran = ran  # type: ignore[attr-defined]
    built.pool = make_pool(db_url, "skiplock-test-parts", size=2, open_wait=True)
    built.claim_pool = make_pool(db_url, "skiplock-test-parts", size=1, configure=claims_commit_async, open_wait=True)
    built.rows_pool = make_pool(db_url, "skiplock-test-parts", size=1, configure=state_changes.row_writes_session,
                                open_wait=True)
    try:
        yield built
    finally:
        for pool in (built.pool, built.claim_pool, built.rows_pool):
            pool.close()


def _statuses(conn: psycopg.Connection) -> dict[str, int]:
    return dict(conn.execute("SELECT status, count(*) FROM jobs WHERE queue = 'parts' GROUP BY status").fetchall())


def test_the_claimer_claims_what_is_there_and_hands_it_to_the_executor(
        worker: Worker, conn: psycopg.Connection) -> None:
    ids = [enqueue("parts", {"n": n}) for n in range(3)]
    worker.claimer.run_once()
    assert sorted(worker.held.running_ids()) == sorted(ids) and worker.held.held_in(worker.lanes[0]) == 3
    handed = [worker.executor.jobs.get_nowait() for _ in ids]
    assert sorted(job.id for job in handed if job is not None) == sorted(ids)
    assert _statuses(conn) == {"running": 3}
    assert worker.counters.claimed == 3


def test_an_idle_claimer_registers_as_a_waiter_instead_of_waiting_out_the_poll(
        worker: Worker, conn: psycopg.Connection) -> None:
    worker.claimer.run_once()  # finds nothing: registers, and returns to claim once more
    assert worker.counters.claimed == 0 and worker.lanes[0].found_nothing
    assert scalar(conn, "SELECT count(*) FROM queue_waiters WHERE queue = 'parts'") == 1


def test_the_executor_runs_a_handler_and_the_acker_writes_its_outcome(
        worker: Worker, conn: psycopg.Connection) -> None:
    ok, failing = enqueue("parts", {"n": 1}), enqueue("parts", {"fail": True})
    worker.claimer.run_once()
    for _ in range(2):
        job = worker.executor.jobs.get_nowait()
        assert job is not None
        worker.executor.execute(job)
    assert sorted(p.get("n", -1) for p in worker.ran) == [-1, 1]  # type: ignore[attr-defined]
    assert worker.held.leases() == ({ok: "parts", failing: "parts"}, [])
    assert worker.acker.run_once(first_wait=5.0) is True
    assert worker.held.known_ids() == []
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE id = %s", (ok,)) == 0  # succeeded: deleted
    assert conn.execute("SELECT status, attempts, last_error LIKE '%%told to fail%%' FROM jobs WHERE id = %s",
                        (failing,)).fetchone() == ("queued", 1, True)  # a retry, its attempt counted
    assert (worker.counters.succeeded, worker.counters.retried) == (1, 1)


def test_the_shutdown_releases_claimed_jobs_that_never_ran(worker: Worker, conn: psycopg.Connection) -> None:
    ids = [enqueue("parts", {"n": n}) for n in range(2)]
    worker.claimer.run_once()
    assert _statuses(conn) == {"running": 2}
    worker.request_stop()
    worker.request_stop()  # the second request skips the grace: no handler thread will take them
    released = worker.shutdown.release_work()
    assert sorted(released) == sorted(ids)
    assert worker.signals.stopped_claiming.is_set()
    assert conn.execute("SELECT status, count(*), max(attempts) FROM jobs WHERE queue = 'parts' "
                        "GROUP BY status").fetchall() == [("queued", 2, 0)]  # the runs are not counted
    assert worker.ran == []  # type: ignore[attr-defined]


class RecordingHook(RunHook):
    """An appended feature: records what it sees, replaces the payload, and turns the handler's
    exception into its own outcome (a snooze) before it is classified, as durable jobs' park will."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []

    def before(self, job: state_changes.ClaimedJob, payload: Any) -> Any:
        self.seen.append(("before", payload))
        return {**payload, "fail": payload.get("park", False)}  # replaces the payload the handler gets

    def caught(self, job: state_changes.ClaimedJob, exc: BaseException) -> state_changes.Outcome | None:
        self.seen.append(("caught", type(exc).__name__))
        if isinstance(exc, RuntimeError):
            return state_changes.Outcome(job.id, job.queue, job.attempts, OutcomeStatus.SNOOZED, delay=60.0)
        return None

    def after(self, job: state_changes.ClaimedJob, outcome: state_changes.Outcome, seconds: float,
              exc: BaseException | None) -> state_changes.Outcome:
        self.seen.append(("after", outcome.status))
        return outcome


def test_adding_a_feature_around_a_run_is_appending_a_hook(worker: Worker, conn: psycopg.Connection) -> None:
    hook = RecordingHook()
    executor = Executor(worker.parts, [*worker.executor.hooks, hook])
    ok, parked = enqueue("parts", {"n": 1}), enqueue("parts", {"n": 2, "park": True})
    worker.claimer.run_once()
    for _ in range(2):
        job = worker.executor.jobs.get_nowait()
        assert job is not None
        executor.execute(job)
    # the handler raised RuntimeError for the payload the hook replaced; the hook saw it first and
    # made it a snooze, which no classification (a retry) replaced
    assert sorted(p["fail"] for p in worker.ran) == [False, True]  # type: ignore[attr-defined]
    expected = [("before", {"n": 1}), ("after", "ok"), ("before", {"n": 2, "park": True}),
                ("caught", "RuntimeError"), ("after", "snoozed")]
    assert sorted(hook.seen, key=repr) == sorted(expected, key=repr)
    assert executor.acker.run_once(first_wait=5.0) is True
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE id = %s", (ok,)) == 0
    assert conn.execute("SELECT status::text, attempts FROM jobs WHERE id = %s", (parked,)).fetchone() == ("queued", 0)
