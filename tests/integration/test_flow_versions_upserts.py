"""Payload versions and upserts on unique_key (issue 15)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from skiplock import enqueue
from skiplock.core.errors import ConfigError, EnqueueError
from skiplock.core.features.versions import check_upgrades, upgrade_payload
from tests.support.flow_handlers import FLOW_RUNS
from tests.support.helpers import race, scalar, wait_for

# ---- versions --------------------------------------------------------------------------------


def _insert(conn: psycopg.Connection, payload: str, version: int) -> int:
    """A job as a producer of that version (or plain SQL) writes it."""
    return scalar(conn, "INSERT INTO jobs (queue, payload, version) VALUES ('flow_versions', %s, %s) RETURNING id",
                  (payload, version))


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_v1_is_upgraded_for_v2_and_v3_waits_for_a_v3_worker(
        db_url: str, conn: psycopg.Connection, spawn_worker: Callable[..., Any]) -> None:
    conn.execute(FLOW_RUNS)
    v1 = _insert(conn, '{"name": "Ada Lovelace"}', 1)
    v3 = _insert(conn, '{"first": "Grace", "last": "Hopper", "title": "RAdm"}', 3)
    spawn_worker(SKIPLOCK_TASKS="tests.support.flow_v2", SKIPLOCK_QUEUES="flow_versions", SKIPLOCK_POLL_INTERVAL="0.1")
    wait_for(lambda: scalar(conn, "SELECT payload FROM flow_runs WHERE job_id = %s", (v1,)), message="v1 ran")
    assert scalar(conn, "SELECT payload FROM flow_runs WHERE job_id = %s", (v1,)) == {
        "first": "Ada", "last": "Lovelace", "handled_by": 2}
    # a v2 job enqueued after the v3 one runs too: the v2 worker claims past the v3 job ...
    v2 = _insert(conn, '{"first": "Alan", "last": "Turing"}', 2)
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM flow_runs WHERE job_id = %s", (v2,)), message="v2 ran")
    # ... and leaves it exactly as it was: queued, no attempt used, no error
    assert conn.execute("SELECT status::text, attempts, last_error FROM jobs WHERE id = %s",
                        (v3,)).fetchone() == ("queued", 0, None)
    spawn_worker(SKIPLOCK_TASKS="tests.support.flow_v3", SKIPLOCK_QUEUES="flow_versions")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE id = %s", (v3,)) == 0, message="v3 ran")
    assert scalar(conn, "SELECT payload->>'handled_by' FROM flow_runs WHERE job_id = %s", (v3,)) == "3"


def test_enqueue_stamps_the_task_version(db_url: str, conn: psycopg.Connection) -> None:
    import tests.support.flow_v2  # noqa: F401  (flow_versions at version 2)

    job = enqueue("flow_versions", {"first": "A", "last": "B"})
    assert scalar(conn, "SELECT version FROM jobs WHERE id = %s", (job,)) == 2
    old = enqueue("flow_versions", {"name": "A B"}, version=1)
    assert scalar(conn, "SELECT version FROM jobs WHERE id = %s", (old,)) == 1
    assert scalar(conn, "SELECT version FROM jobs WHERE id = %s", (enqueue("unregistered", {}),)) == 1


def test_upgrade_steps_and_their_validation() -> None:
    steps = {1: lambda p: {**p, "b": 1}, 2: lambda p: {**p, "c": 1}}
    assert upgrade_payload("q", {}, 1, 3, steps) == {"b": 1, "c": 1}
    assert upgrade_payload("q", {}, 2, 3, steps) == {"c": 1}
    assert upgrade_payload("q", {"x": 1}, 3, 3, steps) == {"x": 1}
    with pytest.raises(ConfigError, match="no upgrade from version"):
        check_upgrades("q", 3, {1: steps[1]})
    with pytest.raises(ConfigError, match="upgrade keys"):
        check_upgrades("q", 2, {2: steps[1]})
    with pytest.raises(ConfigError, match="version must be"):
        check_upgrades("q", 0, None)


# ---- upserts ---------------------------------------------------------------------------------


def _job(conn: psycopg.Connection, job_id: int) -> tuple[Any, ...]:
    row = conn.execute("SELECT payload, run_at, status::text FROM jobs WHERE id = %s", (job_id,)).fetchone()
    assert row is not None
    return row


def test_each_on_conflict_mode(db_url: str, conn: psycopg.Connection) -> None:
    soon = datetime.now(UTC) + timedelta(minutes=1)
    later = soon + timedelta(minutes=5)
    first = enqueue("t1", {"v": 1}, unique_key="k", run_at=soon)
    assert first is not None
    assert enqueue("t1", {"v": 2}, unique_key="k") is None  # ignore: the default
    assert _job(conn, first)[0] == {"v": 1}
    assert enqueue("t1", {"v": 3}, unique_key="k", on_conflict="bump", run_at=later) == first
    assert _job(conn, first)[:2] == ({"v": 1}, later)  # run_at bumped, payload kept
    assert enqueue("t1", {"v": 4}, unique_key="k", on_conflict="bump", run_at=soon) == first
    assert _job(conn, first)[1] == later  # never earlier: GREATEST
    assert enqueue("t1", {"v": 5}, unique_key="k", on_conflict="replace", run_at=soon) == first
    assert _job(conn, first)[:2] == ({"v": 5}, soon)
    assert scalar(conn, "SELECT count(*) FROM jobs") == 1
    # a running job is never changed: bump and replace return None, like ignore
    conn.execute("UPDATE jobs SET status = 'running', worker_id = 'w', lease_until = now() + interval '1 min'")
    assert enqueue("t1", {"v": 6}, unique_key="k", on_conflict="replace") is None
    assert enqueue("t1", {"v": 6}, unique_key="k", on_conflict="bump") is None
    assert _job(conn, first)[0] == {"v": 5}
    with pytest.raises(EnqueueError, match="needs a unique_key"):
        enqueue("t1", {}, on_conflict="bump")
    with pytest.raises(EnqueueError, match="on_conflict must be one of"):
        enqueue("t1", {}, unique_key="x", on_conflict="merge")


@pytest.mark.parametrize("mode", ["ignore", "bump", "replace"])
def test_eight_racing_producers_leave_one_job(db_url: str, conn: psycopg.Connection, mode: str) -> None:
    results: list[int | None] = []

    def produce(index: int) -> None:
        with psycopg.connect(db_url, autocommit=True) as c:
            for n in range(25):
                results.append(enqueue("t1", {"p": index, "n": n}, conn=c, unique_key="race", on_conflict=mode))

    race(8, produce)  # no producer sees an error
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE unique_key = 'race'") == 1
    [only] = {r for r in results if r is not None}
    assert only == scalar(conn, "SELECT id FROM jobs WHERE unique_key = 'race'")


# The SQL forms the docs give producers in other languages (docs/howto/flow-control.md), run as written there.
README_SQL = {
    "ignore": """INSERT INTO jobs (queue, payload, unique_key) VALUES ('emails', '{"to": "a@x"}', 'welcome:1')
ON CONFLICT (unique_key) WHERE status IN ('queued', 'running') DO NOTHING
RETURNING id""",
    "bump": """INSERT INTO jobs (queue, payload, unique_key, run_at)
VALUES ('emails', '{"to": "a@x"}', 'welcome:1', now() + interval '10 minutes')
ON CONFLICT (unique_key) WHERE status IN ('queued', 'running')
DO UPDATE SET run_at = greatest(jobs.run_at, EXCLUDED.run_at) WHERE jobs.status = 'queued'
RETURNING id""",
    "replace": """INSERT INTO jobs (queue, payload, unique_key, run_at)
VALUES ('emails', '{"to": "b@x"}', 'welcome:1', now())
ON CONFLICT (unique_key) WHERE status IN ('queued', 'running')
DO UPDATE SET payload = EXCLUDED.payload, version = EXCLUDED.version, run_at = EXCLUDED.run_at
 WHERE jobs.status = 'queued'
RETURNING id""",
}


def test_readme_sql_forms(db_url: str, conn: psycopg.Connection) -> None:
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "docs" / "howto" / "flow-control.md").read_text()
    for sql in README_SQL.values():
        assert sql in readme
    first = scalar(conn, README_SQL["ignore"])
    assert conn.execute(README_SQL["ignore"]).fetchone() is None
    assert scalar(conn, README_SQL["bump"]) == first
    assert scalar(conn, "SELECT run_at > now() + interval '9 minutes' FROM jobs WHERE id = %s", (first,))
    assert scalar(conn, README_SQL["replace"]) == first
    assert scalar(conn, "SELECT payload->>'to' FROM jobs WHERE id = %s", (first,)) == "b@x"
    assert scalar(conn, "SELECT count(*) FROM jobs") == 1
