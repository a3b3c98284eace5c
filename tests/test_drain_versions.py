"""skiplock.testing.drain treats payload versions as a worker does: an older payload reaches the handler
upgraded, and a job newer than the handler stays queued (found by the flow-control page's example)."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from skiplock.core.registry import REGISTRY, task
from skiplock.testing import drain


@pytest.fixture
def versioned_queue() -> Iterator[list[object]]:
    seen: list[object] = []

    @task("drain-versions", version=2, upgrade={1: lambda p: {"email": p["mail"]}})
    def handler(payload):  # type: ignore[no-untyped-def]
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
