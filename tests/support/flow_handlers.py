"""Handlers for the flow-control tests (issue 15): each run records itself in flow_runs.

`flow_runs` rows: the job, its lock_key/tenant from the payload, the attempt, the worker's pid,
the claim time (job.started_at) and the handler's own start and end (clock_timestamp()).
Payload options: sleep (seconds, every attempt), sleep_first (seconds, attempt 1 only).
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import psycopg

from skiplock import task
from skiplock.core.job_context import JobContext
from tests.support.helpers import thread_connection

FLOW_RUNS = """
CREATE TABLE IF NOT EXISTS flow_runs (
    seq        bigserial   PRIMARY KEY,
    job_id     bigint      NOT NULL,
    queue      text        NOT NULL,
    lock_key   text,
    tenant     text,
    attempt    int         NOT NULL,
    pid        int         NOT NULL,
    claimed_at timestamptz NOT NULL,
    started    timestamptz NOT NULL DEFAULT clock_timestamp(),
    ended      timestamptz,
    payload    jsonb
);
"""

_local = threading.local()


def _conn() -> psycopg.Connection:
    return thread_connection(_local, "flow-test-effects")


def record(payload: Any, job: JobContext) -> None:
    """Record the start, do what the payload asks, record the end."""
    opts = payload if isinstance(payload, dict) else {}
    row = _conn().execute(
        "INSERT INTO flow_runs (job_id, queue, lock_key, tenant, attempt, pid, claimed_at, payload) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s) RETURNING seq",
        (job.id, job.queue, opts.get("key"), opts.get("tenant"), job.attempt, os.getpid(), job.started_at,
         psycopg.types.json.Jsonb(payload))).fetchone()
    assert row is not None
    if job.attempt == 1 and opts.get("sleep_first"):
        time.sleep(float(opts["sleep_first"]))
    if opts.get("sleep"):
        time.sleep(float(opts["sleep"]))
    _conn().execute("UPDATE flow_runs SET ended = clock_timestamp() WHERE seq = %s", (row[0],))


def v1_to_v2(payload: dict[str, Any]) -> dict[str, Any]:
    """The flow_versions upgrade step 1 -> 2: {"name": "Ada Lovelace"} -> {"first": "Ada", "last": "Lovelace"}."""
    first, _, last = payload["name"].partition(" ")
    return {"first": first, "last": last}


for _queue in ("flow_keyed", "flow_tenant", "flow_limited", "flow_rate", "flow_tenant_capped", "flow_tenant_rate"):
    task(_queue)(record)


@task("flow_derived", lock_key=lambda p: f"account:{p['account']}")
def derived(payload: Any, job: JobContext) -> None:
    """A task whose lock_key comes from the payload."""
    record(payload, job)
