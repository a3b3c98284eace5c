"""`async def` handlers in real worker processes: concurrency, a mix with sync queues, SIGKILL,
SIGTERM's cancel-and-release, retries to dead, and an async recurring task.

Handlers are in tests/support/async_handlers.py; each test counts what they recorded and the job rows.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from skiplock import enqueue, enqueue_many
from skiplock.core.errors import ConfigError
from skiplock.core.registry import Task
from tests.support.helpers import scalar, wait_for

ASYNC = "tests.support.async_handlers"
MIXED = "tests.support.handlers,tests.support.async_handlers"


def left(conn, queue: str) -> int:
    """Jobs of `queue` not finished yet (succeeded jobs are deleted in the default history mode)."""
    return scalar(conn, "SELECT count(*) FROM jobs WHERE queue = %s AND status IN ('queued', 'running')", (queue,))


def effects(conn, queue: str) -> dict[int, int]:
    """job id -> runs recorded by the handler."""
    return dict(conn.execute("SELECT job_id, count(*) FROM test_effects WHERE queue = %s GROUP BY job_id",
                             (queue,)).fetchall())


def test_async_def_registers_as_an_async_task():
    from skiplock.core.registry import REGISTRY
    from skiplock.core.task_decorator import task

    @task("async-registration-check")
    async def handler(payload, job):  # pragma: no cover - never run here
        return payload

    try:
        registered = REGISTRY.get("async-registration-check")
        assert isinstance(registered, Task) and registered.is_async and registered.wants_job
        assert registered.func is handler.func  # @task returns a TaskHandle around the function
    finally:
        REGISTRY._tasks.pop("async-registration-check", None)  # the registry is process-wide


def test_async_concurrency_setting_is_validated():
    from skiplock.core.plumbing.config import load_settings

    assert load_settings({"SKIPLOCK_ASYNC_CONCURRENCY": "250"}).async_concurrency == 250
    assert load_settings({}).async_concurrency == 100
    for bad in ("0", "-3", "many", "1.5"):
        with pytest.raises(ConfigError, match="SKIPLOCK_ASYNC_CONCURRENCY must be a whole number >= 1"):
            load_settings({"SKIPLOCK_ASYNC_CONCURRENCY": bad})


@pytest.mark.slow
def test_two_thousand_async_jobs_drain_with_200_in_flight(conn, spawn_worker, tmp_path: Path):
    record = tmp_path / "in_flight.txt"
    # 0.2 s per job: claims (50 at a time) fill 200 slots long before the first ones finish, even on a
    # loaded machine; with 10 ms jobs the peak depended on how fast claims ran beside other work
    enqueue_many([("aconc", {"sleep": 0.2})] * 2000)
    worker = spawn_worker(SKIPLOCK_TASKS=ASYNC, SKIPLOCK_ASYNC_CONCURRENCY="200", ASYNC_RECORD_FILE=str(record))
    wait_for(lambda: left(conn, "aconc") == 0, timeout=120, message="2,000 async jobs drained")
    assert worker.terminate() == 0
    rows = [line.split() for line in record.read_text().splitlines()]
    runs = [int(job_id) for job_id, _ in rows]
    assert len(runs) == 2000 and len(set(runs)) == 2000  # every job ran, once
    peak = max(int(n) for _, n in rows)
    # the handlers saw 200 of themselves under way at once, and never more than the limit
    assert peak == 200, peak
    assert scalar(conn, "SELECT count(*) FROM jobs") == 0


@pytest.mark.slow
def test_sync_and_async_queues_drain_in_one_worker(conn, spawn_worker):
    enqueue_many([("t1", {"n": i}) for i in range(150)] + [("aeffect", {"n": i}) for i in range(150)])
    worker = spawn_worker(SKIPLOCK_TASKS=MIXED, SKIPLOCK_QUEUES="t1,aeffect")
    wait_for(lambda: left(conn, "t1") + left(conn, "aeffect") == 0, timeout=120, message="both queues drained")
    assert worker.terminate() == 0
    sync_runs, async_runs = effects(conn, "t1"), effects(conn, "aeffect")
    assert len(sync_runs) == 150 and set(sync_runs.values()) == {1}
    assert len(async_runs) == 150 and set(async_runs.values()) == {1}
    assert scalar(conn, "SELECT count(DISTINCT pid) FROM test_effects") == 1  # one process ran both kinds


@pytest.mark.slow
def test_blocked_sync_threads_do_not_stall_async_handlers(conn, spawn_worker):
    blockers = [enqueue("t1", {"sleep": 120}) for _ in range(2)]
    worker = spawn_worker(SKIPLOCK_TASKS=MIXED, SKIPLOCK_QUEUES="t1,aeffect", SKIPLOCK_CONCURRENCY="2",
                          SKIPLOCK_SHUTDOWN_GRACE="0.5")
    wait_for(lambda: left(conn, "t1") == 2 and scalar(
        conn, "SELECT count(*) FROM jobs WHERE queue = 't1' AND status = 'running'") == 2,
        timeout=30, message="both sync threads busy")
    enqueue_many([("aeffect", {"n": i}) for i in range(100)])
    wait_for(lambda: left(conn, "aeffect") == 0, timeout=60, message="async jobs drained beside blocked threads")
    assert len(effects(conn, "aeffect")) == 100
    # the sync jobs are still in their handlers (each sleeps 120 s), so they are released on SIGTERM
    assert conn.execute("SELECT array_agg(status::text) FROM jobs WHERE id = ANY(%s)",
                        (blockers,)).fetchone()[0] == ["running", "running"]
    assert worker.terminate() == 0
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE queue = 't1' AND status = 'queued'") == 2


@pytest.mark.slow
def test_a_blocked_loop_stalls_neither_sync_handlers_nor_the_heartbeat(conn, spawn_worker):
    blocker = enqueue("ablock", {"block": 6})
    worker = spawn_worker(SKIPLOCK_TASKS=MIXED, SKIPLOCK_QUEUES="t1,ablock", SKIPLOCK_LEASE_SECONDS="1.5",
                          SKIPLOCK_REAPER_INTERVAL="0.3")
    wait_for(lambda: scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (blocker,)) == "running",
             timeout=30, message="the blocking coroutine claimed")
    enqueue_many([("t1", {"n": i}) for i in range(30)])
    wait_for(lambda: left(conn, "t1") == 0, timeout=30, message="sync jobs drained while the loop is blocked")
    # it has now run for twice its 1.5 s lease: only heartbeats, from their own thread, kept it
    wait_for(lambda: scalar(conn, "SELECT now() - started_at > interval '3 s' FROM jobs WHERE id = %s",
                            (blocker,)), timeout=30, message="the blocker running past two leases")
    status, attempts, lease_ok = conn.execute(
        "SELECT status::text, attempts, lease_until > now() FROM jobs WHERE id = %s", (blocker,)).fetchone()
    assert (status, attempts, lease_ok) == ("running", 1, True)  # never reaped
    wait_for(lambda: left(conn, "ablock") == 0, timeout=30, message="the blocker finished and acked")
    assert worker.terminate() == 0
    assert effects(conn, "ablock") == {blocker: 1} and len(effects(conn, "t1")) == 30


@pytest.mark.slow
def test_sigkill_mid_drain_loses_nothing(conn, spawn_worker):
    ids = enqueue_many([("aeffect", {"sleep": 0.05, "n": i}) for i in range(400)])
    settings = {"SKIPLOCK_TASKS": ASYNC, "SKIPLOCK_LEASE_SECONDS": "2", "SKIPLOCK_REAPER_INTERVAL": "0.5",
                "SKIPLOCK_ASYNC_CONCURRENCY": "50"}
    first = spawn_worker(**settings)
    wait_for(lambda: len(effects(conn, "aeffect")) >= 50 and left(conn, "aeffect") > 100, timeout=60,
             message="the drain under way")
    first.kill()  # SIGKILL with jobs in flight, acked or not
    in_flight = scalar(conn, "SELECT count(*) FROM jobs WHERE queue = 'aeffect' AND status = 'running'")
    second = spawn_worker(**settings)
    wait_for(lambda: left(conn, "aeffect") == 0, timeout=120, message="the replacement finished the drain")
    assert second.terminate() == 0
    runs = effects(conn, "aeffect")
    assert set(runs) == set(ids)  # every job ran
    assert scalar(conn, "SELECT count(*) FROM jobs") == 0  # and every one was acked
    # only runs cut by the kill may repeat (at-least-once), never more than were in flight
    assert sum(n - 1 for n in runs.values()) <= max(in_flight, 50)


@pytest.mark.slow
def test_sigterm_cancels_running_coroutines_and_releases_their_jobs_at_once(conn, spawn_worker):
    job = enqueue("aeffect", {"sleep": 120})
    worker = spawn_worker(SKIPLOCK_TASKS=ASYNC, SKIPLOCK_SHUTDOWN_GRACE="0.5", SKIPLOCK_LEASE_SECONDS="300")
    wait_for(lambda: scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (job,)) == "running",
             timeout=30, message="the job claimed")
    assert worker.terminate() == 0
    # the coroutine saw CancelledError (its handler recorded that) ...
    assert effects(conn, "aeffect-cancelled") == {job: 1}
    assert effects(conn, "aeffect") == {}
    # ... and the job is queued again now, not when its 300 s lease would have run out
    status, attempts, owner = conn.execute("SELECT status::text, attempts, worker_id FROM jobs WHERE id = %s",
                                           (job,)).fetchone()
    assert (status, attempts, owner) == ("queued", 0, None)
    assert "cancelled 1 async handler(s)" in worker.log() and "Traceback" not in worker.log()


@pytest.mark.slow
def test_raising_async_handler_is_retried_then_dead(conn, spawn_worker):
    job = enqueue("aeffect", {"fail_times": 99}, max_attempts=3)
    worker = spawn_worker(SKIPLOCK_TASKS=ASYNC, SKIPLOCK_BACKOFF_BASE="0.05", SKIPLOCK_BACKOFF_CAP="0.1",
                          SKIPLOCK_POLL_INTERVAL="0.1")
    wait_for(lambda: scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (job,)) == "dead",
             timeout=60, message="the job dead after three attempts")
    assert worker.terminate() == 0
    attempts, error = conn.execute("SELECT attempts, last_error FROM jobs WHERE id = %s", (job,)).fetchone()
    assert attempts == 3
    assert "RuntimeError: async failure on attempt 3" in error
    assert effects(conn, "aeffect") == {job: 3}  # three real runs of the coroutine
    assert sorted(r[0] for r in conn.execute("SELECT attempt FROM test_effects WHERE job_id = %s",
                                             (job,)).fetchall()) == [1, 2, 3]


@pytest.mark.slow
def test_async_recurring_task_fires(conn, spawn_worker):
    worker = spawn_worker(SKIPLOCK_TASKS="tests.support.async_recurring_handlers")
    wait_for(lambda: len(effects(conn, "aticks")) >= 2, timeout=60, message="two slots run by the async task")
    assert worker.terminate() == 0
    runs = effects(conn, "aticks")
    assert set(runs.values()) == {1}
    slots = {r[0] for r in conn.execute("SELECT job_id FROM recurring_slots WHERE name = 'aticks'").fetchall()}
    assert set(runs) <= slots


def test_lanes_split_queues_by_handler_kind_with_their_own_slots():
    from skiplock.core.plumbing.config import load_settings
    from skiplock.runtime.lanes import ASYNC, SYNC, build_lanes

    async def coro(payload):  # pragma: no cover - never run
        return payload

    def plain(payload):  # pragma: no cover - never run
        return payload

    tasks = {q: Task(q, f, False, is_async=f is coro) for q, f in (("a1", coro), ("s1", plain), ("a2", coro))}
    settings = load_settings({"SKIPLOCK_CONCURRENCY": "4", "SKIPLOCK_ASYNC_CONCURRENCY": "300"})
    sync, async_ = build_lanes(settings, tasks, ["a1", "s1", "a2"], [10.0, 20.0, 30.0])
    assert (sync.kind, sync.slots, sync.queues, sync.leases) == (SYNC, 4, ["s1"], [20.0])
    assert (async_.kind, async_.slots, async_.queues, async_.leases) == (ASYNC, 300, ["a1", "a2"], [10.0, 30.0])
    assert async_.plan[0] == 300  # nothing measured yet: hold exactly the free async slots
    only_async = build_lanes(settings, tasks, ["a2"], [30.0])
    assert [lane.kind for lane in only_async] == [ASYNC]
