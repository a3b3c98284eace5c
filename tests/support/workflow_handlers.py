"""Handlers for the workflow tests: an import that fans out and in, failures, callbacks, progress.

Each records what it saw in wf_log (created on first use), so tests check what real runs did:
which job ran, after which others, with which parents' results.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import psycopg

from skiplock import task

LOG_TABLE = """CREATE TABLE IF NOT EXISTS wf_log (
    seq bigserial PRIMARY KEY, job_id bigint NOT NULL, queue text NOT NULL, attempt int NOT NULL,
    seen jsonb, at timestamptz NOT NULL DEFAULT clock_timestamp())"""


def record(job: Any, seen: Any = None) -> None:
    """One row per run, written in its own transaction (a run that is then lost still shows)."""
    import json

    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
        conn.execute(LOG_TABLE)
        conn.execute("INSERT INTO wf_log (job_id, queue, attempt, seen) VALUES (%s, %s, %s, %s::jsonb)",
                     (job.id, job.queue, job.attempt, json.dumps(seen)))


@task("wf_line")
def line(payload: dict, job: Any) -> dict:
    record(job)
    return {"line": payload["n"], "double": payload["n"] * 2}


@task("wf_summary")
def summary(payload: dict, job: Any) -> dict:
    results = job.parent_results
    record(job, {"parents": sorted(results)})
    return {"lines": len(results), "total": sum(r["double"] for r in results.values())}


@task("wf_boom", max_attempts=1)
def boom(payload: dict, job: Any) -> None:
    record(job)
    raise ValueError(f"boom {payload.get('n')}")


@task("wf_flaky", max_attempts=3)
def flaky(payload: dict, job: Any) -> str:
    """Fails until the test flips wf_switch on (an operator's fix), then succeeds."""
    record(job)
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS wf_switch (on_ boolean)")
        row = conn.execute("SELECT bool_or(on_) FROM wf_switch").fetchone()
    if not (row and row[0]):
        from skiplock import PermanentFailure

        raise PermanentFailure("switch is off")
    return "fixed"


@task("wf_cleanup")
def cleanup(payload: dict, job: Any) -> dict:
    states = job.parent_states
    record(job, {"states": {str(k): v for k, v in states.items()}})
    return {"states": {str(k): v for k, v in states.items()}}


@task("wf_callback")
def callback(payload: dict, job: Any) -> dict:
    b = job.batch
    seen = {"batch": b.id, "total": b.total, "succeeded": b.succeeded, "dead": b.dead,
            "cancelled": b.cancelled, "payload": payload}
    record(job, seen)
    return seen


@task("wf_progress")
def progress(payload: dict, job: Any) -> int:
    for i in range(payload["items"]):
        job.progress((i + 1) / payload["items"], f"item {i + 1} of {payload['items']}")
    record(job)
    return payload["items"]


@task("wf_slow")
def slow(payload: dict, job: Any) -> str:
    """Runs until its file appears (a test's signal), reporting progress meanwhile."""
    deadline = time.monotonic() + 60
    job.progress(0.5, "half way")
    while not os.path.exists(payload["until"]) and time.monotonic() < deadline:
        time.sleep(0.02)
    record(job)
    return "slept"


@task("wf_big")
def big(payload: dict) -> str:
    """Returns more JSON than SKIPLOCK_MAX_RESULT_BYTES' default (256 KiB)."""
    return "x" * 300_000


@task("wf_object")
def unstorable(payload: dict) -> object:
    """Returns a value JSON cannot hold: the job still succeeds, its result is the reason it was not stored."""
    return object()


@task("wf_decimal")
def price(payload: dict) -> Decimal:
    """Returns a Decimal, as an ORM's numeric column gives one: JSON cannot hold it."""
    return Decimal("19.90")


@task("wf_datetime")
def when(payload: dict) -> datetime:
    """Returns a datetime: JSON cannot hold it either."""
    return datetime(2026, 11, 29, 3, 0, tzinfo=UTC)
