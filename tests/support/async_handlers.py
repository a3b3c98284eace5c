"""`async def` handlers for worker-process tests (loaded with SKIPLOCK_TASKS=tests.support.async_handlers).

- `aconc`: awaits asyncio.sleep(payload["sleep"]) and appends "job_id in_flight" to the file named
  by ASYNC_RECORD_FILE, where in_flight counts this process's aconc handlers under way at its start
  (the handlers' own record of concurrency, read back by the test).
- `aeffect`: records one test_effects row per run through a psycopg AsyncConnection, like
  tests.support.handlers.behave, after awaiting payload "sleep" seconds; raises on attempts <= "fail_times".
  A run cancelled by the worker records a row in test_effects with queue 'aeffect-cancelled' first.
- `ablock`: the user bug of a coroutine that blocks its loop: time.sleep(payload["block"]), then
  records its run like `aeffect`.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import psycopg

from skiplock import task
from skiplock.core.job_context import JobContext

_in_flight = 0
_record_file: Any = None
_conn: psycopg.AsyncConnection | None = None


@task("aconc")
async def concurrent_sleeper(payload: dict[str, Any], job: JobContext) -> None:
    global _in_flight, _record_file
    _in_flight += 1
    try:
        if _record_file is None:
            _record_file = open(os.environ["ASYNC_RECORD_FILE"], "a", buffering=1)  # noqa: SIM115
        _record_file.write(f"{job.id} {_in_flight}\n")
        await asyncio.sleep(payload.get("sleep", 0.01))
    finally:
        _in_flight -= 1


async def _record(job: JobContext, queue: str, payload: Any) -> None:
    global _conn
    if _conn is None or _conn.closed:
        _conn = await psycopg.AsyncConnection.connect(os.environ["DATABASE_URL"], autocommit=True,
                                                      application_name="skiplock-test-effects")
    await _conn.execute(
        "INSERT INTO test_effects (job_id, queue, attempt, pid, payload) VALUES (%s, %s, %s, %s, %s)",
        (job.id, queue, job.attempt, os.getpid(), psycopg.types.json.Jsonb(payload)))


@task("aeffect")
async def effect(payload: dict[str, Any], job: JobContext) -> None:
    try:
        await asyncio.sleep(payload.get("sleep", 0))
    except asyncio.CancelledError:
        await _record(job, "aeffect-cancelled", payload)
        raise
    await _record(job, job.queue, payload)
    if job.attempt <= payload.get("fail_times", 0):
        raise RuntimeError(f"async failure on attempt {job.attempt}")


@task("ablock")
async def blocks_the_loop(payload: dict[str, Any], job: JobContext) -> None:
    time.sleep(payload["block"])  # deliberately blocking: nothing else on this loop runs meanwhile
    await _record(job, job.queue, payload)
