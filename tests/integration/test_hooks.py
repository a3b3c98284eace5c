"""on_failure / on_dead hooks with a real worker: called with the exception and the run, and a hook
that raises is logged and changes nothing (the job still retries, then goes dead, as without it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from skiplock import enqueue
from skiplock.core.errors import ConfigError
from skiplock.core.features import hooks
from skiplock.core.registry import Registry, Task
from skiplock.tools.testing import drain
from tests.conftest import REPO
from tests.support.helpers import scalar, wait_for

HOOK_TASKS = '''
import skiplock
from skiplock import Discard, task
from tests.support.handlers import _conn


def record(kind):
    def hook(exc, job):
        _conn().execute(
            "INSERT INTO test_effects (job_id, queue, attempt, pid, payload) "
            "VALUES (%s, %s, %s, 0, jsonb_build_object('exc', %s::text, 'status', %s::text, 'dead', %s))",
            (job.id, kind, job.attempt, f"{type(exc).__name__}: {exc}", job.status, job.dead))
    return hook


@skiplock.on_failure
def broken_reporter(exc, job):
    raise RuntimeError("the error reporter is down")


skiplock.on_failure(record("global-failure"))
skiplock.on_dead(record("global-dead"))


@task("fragile", on_failure=record("fragile-failure"), on_dead=record("fragile-dead"))
def fragile(payload):
    if payload.get("discard"):
        raise Discard("not wanted")
    if payload.get("fail"):
        raise ValueError(f"bad input {payload['n']}")


@task("other")
def other(payload):
    raise KeyError("boom")
'''


def effects(conn, job_id: int) -> list[tuple]:
    return conn.execute("SELECT queue, attempt, payload->>'exc', payload->>'status', payload->>'dead' "
                        "FROM test_effects WHERE job_id = %s ORDER BY attempt, queue", (job_id,)).fetchall()


@pytest.mark.slow
def test_hooks_see_each_failure_and_a_raising_hook_changes_nothing(conn, spawn_worker, tmp_path: Path) -> None:
    (tmp_path / "hook_tasks.py").write_text(HOOK_TASKS)
    failing = enqueue("fragile", {"fail": True, "n": 7}, max_attempts=2)
    ok = enqueue("fragile", {"n": 1})
    discarded = enqueue("fragile", {"discard": True})
    other = enqueue("other", {}, max_attempts=1)
    worker = spawn_worker(SKIPLOCK_TASKS="hook_tasks", PYTHONPATH=f"{tmp_path}:{REPO}", SKIPLOCK_POLL_INTERVAL="0.1",
                          SKIPLOCK_BACKOFF_BASE="0.05", SKIPLOCK_BACKOFF_CAP="0.1")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE status IN ('queued', 'running')") == 0,
             timeout=60, message="every job to finish")

    # the outcomes are what they would be without hooks, the raising one included
    rows = dict(conn.execute("SELECT id, status::text || '/' || attempts FROM jobs").fetchall())
    assert rows == {failing: "dead/2", discarded: "failed/1", other: "dead/1"}  # `ok` succeeded (deleted)
    assert ok not in rows
    retry = ("ValueError: bad input 7", "queued", "false")
    dead = ("ValueError: bad input 7", "dead", "true")
    assert effects(conn, failing) == [
        ("fragile-failure", 1, *retry), ("global-failure", 1, *retry),
        ("fragile-dead", 2, *dead), ("fragile-failure", 2, *dead), ("global-dead", 2, *dead),
        ("global-failure", 2, *dead),
    ]
    assert effects(conn, ok) == []
    assert [e[0] for e in effects(conn, discarded)] == ["fragile-failure", "global-failure"]
    # a queue's own hooks stay on its queue; the global ones see every queue
    assert [e[0] for e in effects(conn, other)] == ["global-dead", "global-failure"]
    assert worker.terminate() == 0
    log = worker.log()
    # the broken reporter is logged once per failed run (two runs of `failing`, `discarded`, `other`)
    assert log.count("error hook broken_reporter raised") == 4
    assert "RuntimeError: the error reporter is down" in log


def test_drain_calls_the_hooks_too(conn) -> None:
    seen: list[tuple[str, int, str]] = []

    def fail(payload):
        raise ValueError("no")

    registry = Registry()
    registry.add(Task("drained", fail, wants_job=False))
    hooks.on_dead(lambda exc, job: seen.append((str(exc), job.id, job.status)))
    try:
        job = enqueue("drained", {}, max_attempts=1)
        assert [r.status for r in drain("drained", registry=registry)] == ["dead"]
    finally:
        hooks.clear()
    assert seen == [("no", job, "dead")]


def test_a_hook_must_be_callable() -> None:
    with pytest.raises(ConfigError, match="callable"):
        hooks.on_failure("sentry")  # type: ignore[arg-type]
