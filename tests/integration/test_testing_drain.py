"""skiplock.tools.testing.drain runs jobs as a worker does: an older payload reaches the handler upgraded, a job
newer than the handler stays queued, and an `async def` handler is awaited (found by the docs' examples)."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from skiplock.core.registry import REGISTRY
from skiplock.core.task_decorator import task
from skiplock.tools.testing import drain


@pytest.fixture
def versioned_queue() -> Iterator[list[object]]:
    seen: list[object] = []

    @task("drain-versions", version=2, upgrade={1: lambda p: {"email": p["mail"]}})
    def handler(payload):
        seen.append(payload)

    yield seen
    REGISTRY._tasks.pop("drain-versions", None)  # the registry is process-wide


def test_drain_upgrades_an_older_payload_and_leaves_a_newer_job_queued(versioned_queue, conn: psycopg.Connection):
    conn.execute("""INSERT INTO jobs (queue, payload, version) VALUES
                    ('drain-versions', '{"mail": "old@x"}', 1),
                    ('drain-versions', '{"email": "now@x"}', 2),
                    ('drain-versions', '{"email": "future@x", "v3": true}', 3)""")
    runs = drain("drain-versions")
    assert [r.status for r in runs] == ["succeeded", "succeeded"]
    assert versioned_queue == [{"email": "old@x"}, {"email": "now@x"}]
    left = conn.execute("SELECT version, status FROM jobs WHERE queue = 'drain-versions'").fetchall()
    assert left == [(3, "queued")]  # for a worker that runs version 3


def test_drain_awaits_an_async_handler(conn: psycopg.Connection) -> None:
    """An `async def` handler runs to its end under drain (before, its coroutine was never awaited and
    the job went dead as 'returned an awaitable')."""
    import asyncio

    seen: list[int] = []

    @task("drain-async")
    async def handler(payload):
        await asyncio.sleep(0)
        seen.append(payload["n"])

    try:
        conn.execute("""INSERT INTO jobs (queue, payload) VALUES ('drain-async', '{"n": 1}')""")
        assert [r.status for r in drain("drain-async")] == ["succeeded"]

        async def from_an_async_test() -> list[str]:  # a running loop in the caller
            conn.execute("""INSERT INTO jobs (queue, payload) VALUES ('drain-async', '{"n": 2}')""")
            return [r.status for r in drain("drain-async")]

        assert asyncio.run(from_an_async_test()) == ["succeeded"]
        assert seen == [1, 2]
    finally:
        REGISTRY._tasks.pop("drain-async", None)
