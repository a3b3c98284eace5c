"""Durable handlers for the tests with real workers (tests/fault/test_durable_*.py).

Each side effect is a row in test_effects (tests/conftest.py), written by the handler's own connection,
so a test counts exactly which steps, items and wake-ups ran, and how often:
  d_steps:   payload {"steps": n, "step_sleep": s}: n steps, each records {"step": i} then sleeps s
  d_import:  payload {"items": n, "item_sleep": s}: a cursor loop, each item recorded {"item": i}
  d_sleep:   payload {"seconds": s}: records {"slept_until": ...} after job.sleep("nap", s)
  d_wait:    payload {"key": k, "timeout": t}: records {"got": payload} or {"timeout": k}
  d_many:    payload {"rounds": n}: sleeps and waits n times each (max_attempts=1 in the test)
  d_async:   an async handler with step_async and wait_for_async: records {"got": ...}
"""

from __future__ import annotations

import os
import time
from typing import Any

from psycopg.types.json import Jsonb

from skiplock import JobContext, WaitTimeout, task
from tests.support.handlers import _conn


def effect(job: JobContext, what: dict[str, Any]) -> None:
    _conn().execute("INSERT INTO test_effects (job_id, queue, attempt, pid, payload) VALUES (%s, %s, %s, "
                    "%s, %s)", (job.id, job.queue, job.attempt, os.getpid(), Jsonb(what)))


@task("d_steps")
def many_steps(payload: dict[str, Any], job: JobContext) -> int:
    def one(i: int) -> int:
        effect(job, {"step": i})
        time.sleep(float(payload.get("step_sleep", 0)))
        return i * 10

    return sum(job.step(f"step-{i}", one, i) for i in range(int(payload["steps"])))


@task("d_import")
def long_import(payload: dict[str, Any], job: JobContext) -> int:
    start = job.cursor("row") or 0
    for i in range(start, int(payload["items"])):
        effect(job, {"item": i})
        job.save_cursor("row", i + 1)
        time.sleep(float(payload.get("item_sleep", 0)))
    return int(payload["items"])


@task("d_sleep")
def sleeper(payload: dict[str, Any], job: JobContext) -> None:
    job.sleep("nap", float(payload["seconds"]))
    effect(job, {"woke": True})


@task("d_wait")
def waiter(payload: dict[str, Any], job: JobContext) -> None:
    try:
        got = job.wait_for(payload["key"], timeout=payload.get("timeout"))
    except WaitTimeout:
        effect(job, {"timeout": payload["key"]})
        return
    effect(job, {"got": got})


@task("d_many")
def many_parks(payload: dict[str, Any], job: JobContext) -> None:
    for i in range(int(payload["rounds"])):
        job.sleep(f"nap-{i}", 0.1)
        job.wait_for(f"{payload['prefix']}-{i}")
    effect(job, {"done": True})


@task("d_async")
async def async_waiter(payload: dict[str, Any], job: JobContext) -> None:
    async def fetch() -> str:
        return "fetched"

    first = await job.step_async("fetch", fetch)
    got = await job.wait_for_async(payload["key"], timeout=600)
    effect(job, {"got": got, "first": first})
