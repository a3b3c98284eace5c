"""The handlers of tests/benchmarks/batch.py: the same event write, one job per call and a batch per call.

Loaded with SKIPLOCK_TASKS=tests.benchmarks.batch_tasks; each worker works one of the two queues. Every
event is one row in `bench_events` (created by batch.py), written on the handler thread's own connection:
- `bench_events_one`: one INSERT, in its own transaction, per job (what a one-job handler does);
- `bench_events_batch`: `@task(batch_size=500, batch_wait=1.0)`, one COPY of the batch's rows per call.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from skiplock import JobContext, task

ONE = "bench_events_one"
BATCH = "bench_events_batch"
_local = threading.local()


def _conn() -> psycopg.Connection:
    conn = getattr(_local, "conn", None)
    if conn is None or conn.closed:
        conn = psycopg.connect(os.environ["DATABASE_URL"], autocommit=True, application_name="bench-events")
        _local.conn = conn
    return conn


@task(ONE)
def write_event(payload: Any, job: JobContext) -> None:
    _conn().execute("INSERT INTO bench_events (job_id, kind, payload) VALUES (%s, 'one', %s)", (job.id, Jsonb(payload)))


@task(BATCH, batch_size=500, batch_wait=1.0)
def write_events(payloads: list[Any], jobs: list[JobContext]) -> None:
    conn = _conn()
    copy_rows = "COPY bench_events (job_id, kind, payload) FROM STDIN"
    with conn.transaction(), conn.cursor() as cur, cur.copy(copy_rows) as copy:
        for payload, job in zip(payloads, jobs, strict=True):
            copy.write_row((job.id, "batch", Jsonb(payload)))
