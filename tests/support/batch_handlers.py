"""Batch handlers for worker-process tests (loaded with SKIPLOCK_TASKS=tests.support.batch_handlers).

- `bev`: `@task("bev", batch_size=BATCH_SIZE, batch_wait=BATCH_WAIT)` (environment, defaults 10 and 0.5).
  Each call writes one test_effects row per job with {"call": <uuid of the call>, "size": <jobs in the
  call>, "ok": <whether this job succeeded>}; a row is written before the outcome, so a run that fails
  is recorded too. What a job's payload asks of the call, on attempts <= its "times" (default 1):
  - "fail": its job alone fails (BatchItemsFailed with a ValueError naming it);
  - "boom": the whole call raises RuntimeError;
  - "stranger": the call raises BatchItemsFailed naming a job that is not in the batch;
  - "hang": the call sleeps that many seconds first (a SIGKILL test kills the worker meanwhile);
  - "wait_cancel": the call waits (up to 60 s) until an operator's cancel of this job is seen;
  - "step": the call uses a durable step on its job (refused in a batch).
  A call that waits or hangs writes a row {"started": true} per job first, so a test knows it began.
- `abev`: the same handler as an `async def`, batch_size 5, batch_wait 0.2.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from typing import Any

import psycopg

from skiplock import BatchItemsFailed, task
from skiplock.core.job_context import JobContext

_local = threading.local()


def _conn() -> psycopg.Connection:
    conn = getattr(_local, "conn", None)
    if conn is None or conn.closed or conn.broken:
        conn = psycopg.connect(os.environ["DATABASE_URL"], autocommit=True, application_name="skiplock-test-effects")
        _local.conn = conn
    return conn


def _record(jobs: list[JobContext], marks: list[dict[str, Any]]) -> None:
    with _conn().cursor() as cur:
        cur.executemany("INSERT INTO test_effects (job_id, queue, attempt, pid, payload) VALUES (%s, %s, %s, %s, %s)",
                        [(job.id, job.queue, job.attempt, os.getpid(), psycopg.types.json.Jsonb(mark))
                         for job, mark in zip(jobs, marks, strict=True)])


def _asked(payload: Any, job: JobContext, what: str) -> Any:
    """What the payload asks for on this attempt (None when it does not, or no longer)."""
    if not isinstance(payload, dict) or what not in payload:
        return None
    return payload[what] if job.attempt <= int(payload.get("times", 1)) else None


def _handle(payloads: list[Any], jobs: list[JobContext]) -> None:
    call, size = uuid.uuid4().hex, len(jobs)
    if any(_asked(p, j, "hang") or _asked(p, j, "wait_cancel") for p, j in zip(payloads, jobs, strict=True)):
        _record(jobs, [{"call": call, "size": size, "started": True}] * size)
    for payload, job in zip(payloads, jobs, strict=True):
        if _asked(payload, job, "hang"):
            time.sleep(float(payload["hang"]))
        if _asked(payload, job, "wait_cancel"):
            deadline = time.monotonic() + 60
            while not job.cancel_requested and time.monotonic() < deadline:
                time.sleep(0.05)
        if _asked(payload, job, "step"):
            job.step("refused", lambda: 1)
    failed = {j.id: ValueError(f"event of job {j.id} rejected") for p, j in zip(payloads, jobs, strict=True)
              if _asked(p, j, "fail")}
    whole = any(_asked(p, j, "boom") for p, j in zip(payloads, jobs, strict=True))
    stranger = any(_asked(p, j, "stranger") for p, j in zip(payloads, jobs, strict=True))
    _record(jobs, [{"call": call, "size": size, "ok": not (whole or stranger or j.id in failed)} for j in jobs])
    if whole:
        raise RuntimeError(f"the whole batch of {size} failed")
    if stranger:
        raise BatchItemsFailed({-1: ValueError("not one of ours")})
    if failed:
        raise BatchItemsFailed(failed)


@task("bev", batch_size=int(os.environ.get("BATCH_SIZE", "10")), batch_wait=float(os.environ.get("BATCH_WAIT", "0.5")))
def handle_events(payloads: list[Any], jobs: list[JobContext]) -> None:
    _handle(payloads, jobs)


@task("abev", batch_size=5, batch_wait=0.2)
async def handle_events_async(payloads: list[Any], jobs: list[JobContext]) -> None:
    _handle(payloads, jobs)
