"""Typed tasks: @task returns a callable handle with .enqueue/.enqueue_many; a dataclass (or pydantic)
payload is validated at enqueue and rebuilt in a real worker; a stored payload that no longer fits
ends dead with the reason."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from skiplock import EnqueueError
from tests.conftest import REPO
from tests.support.helpers import scalar, wait_for

TYPED_TASKS = '''
from __future__ import annotations

from dataclasses import dataclass, field

from skiplock import task
from tests.support.handlers import record_effect


@dataclass
class Welcome:
    to: str
    attempts_left: int = 3
    tags: list = field(default_factory=list)
    note: str | None = None


@task("welcome")
def send_welcome(payload: Welcome, job):
    # what the handler got: the rebuilt object, recorded with its type name
    record_effect(job, {"type": type(payload).__name__, "to": payload.to, "attempts_left": payload.attempts_left,
                        "tags": payload.tags, "note": payload.note})
'''


@pytest.fixture
def typed_tasks(tmp_path: Path, monkeypatch):
    (tmp_path / "typed_tasks.py").write_text(TYPED_TASKS)
    monkeypatch.syspath_prepend(str(tmp_path))
    import typed_tasks

    yield typed_tasks
    sys.modules.pop("typed_tasks", None)
    from skiplock.core.registry import REGISTRY

    REGISTRY._tasks.pop("welcome", None)


@pytest.mark.slow
def test_a_dataclass_payload_round_trips_through_a_worker(typed_tasks, conn, spawn_worker, tmp_path: Path) -> None:
    welcome, Welcome = typed_tasks.send_welcome, typed_tasks.Welcome
    one = welcome.enqueue(Welcome(to="ada@example.com", tags=["new"]), max_attempts=2)
    two, three = welcome.enqueue_many([Welcome(to="bob@example.com"), {"to": "cy@example.com", "note": "hi"}],
                                      priority=5)
    stored = scalar(conn, "SELECT payload FROM jobs WHERE id = %s", (one,))
    assert stored == {"to": "ada@example.com", "attempts_left": 3, "tags": ["new"], "note": None}
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE priority = 5") == 2

    # a stored payload that no longer fits: a job enqueued by an older version (SQL producer here)
    stale = scalar(conn, "INSERT INTO jobs (queue, payload) VALUES ('welcome', '{\"email\": \"old@x\"}') RETURNING id")
    worker = spawn_worker(SKIPLOCK_TASKS="typed_tasks", PYTHONPATH=f"{tmp_path}:{REPO}", SKIPLOCK_POLL_INTERVAL="0.1")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE status IN ('queued', 'running')") == 0,
             timeout=60, message="every job to finish")
    seen = {row[0]: row[1] for row in conn.execute("SELECT job_id, payload FROM test_effects")}
    assert seen == {
        one: {"type": "Welcome", "to": "ada@example.com", "attempts_left": 3, "tags": ["new"], "note": None},
        two: {"type": "Welcome", "to": "bob@example.com", "attempts_left": 3, "tags": [], "note": None},
        three: {"type": "Welcome", "to": "cy@example.com", "attempts_left": 3, "tags": [], "note": "hi"},
    }
    status, attempts, error = conn.execute("SELECT status::text, attempts, last_error FROM jobs WHERE id = %s",
                                           (stale,)).fetchone()
    assert (status, attempts) == ("dead", 1)  # once, not a retry loop
    assert "stored payload no longer fits Welcome: unknown field 'email' for Welcome" in error
    assert worker.terminate() == 0


@pytest.mark.parametrize(("payload", "message"), [
    ({"to": 42}, "field 'to' of Welcome: expected str, got int"),
    ({"to": "a@x", "attempts_left": True}, "field 'attempts_left' of Welcome: expected int, got bool"),
    ({"to": "a@x", "colour": "red"}, "unknown field 'colour' for Welcome"),
    ({"attempts_left": 1}, "missing field 'to' for Welcome"),
    (["to", "a@x"], "expected a Welcome or a dict of its fields, got list"),
])
def test_a_bad_field_is_refused_at_enqueue_and_nothing_is_written(typed_tasks, conn, payload, message) -> None:
    with pytest.raises(EnqueueError, match="'welcome' payload refused: ") as refused:
        typed_tasks.send_welcome.enqueue(payload)
    assert message in str(refused.value)
    with pytest.raises(EnqueueError, match=r"job #1: .*missing field 'to'"):
        typed_tasks.send_welcome.enqueue_many([{"to": "ok@x"}, {}])
    assert scalar(conn, "SELECT count(*) FROM jobs") == 0


def test_the_handle_is_still_the_handler(typed_tasks) -> None:
    from skiplock.core.job_context import JobContext

    handle = typed_tasks.send_welcome
    assert handle.__name__ == "send_welcome" and handle.queue == "welcome"
    assert handle.payload_type is typed_tasks.Welcome
    calls = []
    handle.func = lambda payload, job: calls.append(payload)  # a direct call goes to the function
    handle(typed_tasks.Welcome(to="x@y"), job=None)
    assert calls == [typed_tasks.Welcome(to="x@y")]
    assert isinstance(JobContext, type)


pydantic: Any = pytest.importorskip("pydantic")  # installed with the test extra (pydantic-settings)


class Invoice(pydantic.BaseModel):  # at module level: the annotation below must resolve by name
    number: int
    total: float


def test_a_pydantic_payload_is_validated(conn) -> None:
    from skiplock.core.registry import REGISTRY
    from skiplock.core.task_decorator import task as task_decorator

    def bill(payload: Invoice) -> None:
        pass

    handle = task_decorator("invoices")(bill)
    try:
        job = handle.enqueue({"number": "17", "total": 9.5})
        assert scalar(conn, "SELECT payload FROM jobs WHERE id = %s", (job,)) == {"number": 17, "total": 9.5}
        with pytest.raises(EnqueueError, match="number"):
            handle.enqueue({"number": "seventeen", "total": 1})
        assert scalar(conn, "SELECT count(*) FROM jobs") == 1
    finally:
        REGISTRY._tasks.pop("invoices", None)


def test_typed_enqueue_async_validates_then_enqueues(typed_tasks, conn) -> None:
    """The typed handle's asyncio enqueue: a bad field is refused before anything is written."""
    import asyncio

    from skiplock.core.producer_async import close_default_async_pool

    async def both() -> int | None:
        try:
            with pytest.raises(EnqueueError, match="missing field 'to'"):
                await typed_tasks.send_welcome.enqueue_async({"attempts_left": 1})
            assert scalar(conn, "SELECT count(*) FROM jobs") == 0
            return await typed_tasks.send_welcome.enqueue_async(typed_tasks.Welcome(to="a@x"))
        finally:
            await close_default_async_pool()

    job_id = asyncio.run(both())
    assert scalar(conn, "SELECT payload->>'to' FROM jobs WHERE id = %s", (job_id,)) == "a@x"
