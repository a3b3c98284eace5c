"""A durable handler for the console's tests with real workers (tests/console/test_durable_console.py).

Queue c_durable, payload {"steps": n, "cursor": c, "sleep": s} or {..., "wait": key, "timeout": t}: each run
records {"run": true} in test_effects (tests/conftest.py), then n steps that each record {"step": i} and
return a padded result, saves the cursor "row" = c, and sleeps s seconds or waits for the key (the
timeout in seconds, none when absent). After the wait it records {"got": payload}. A test counts, from
test_effects, how often the handler ran and how often each step did.
"""

from __future__ import annotations

import os
from typing import Any

from psycopg.types.json import Jsonb

from skiplock import JobContext, task
from tests.support.handlers import _conn

QUEUE = "c_durable"


def effect(job: JobContext, what: dict[str, Any]) -> None:
    _conn().execute("INSERT INTO test_effects (job_id, queue, attempt, pid, payload) VALUES (%s, %s, %s, %s, %s)",
                    (job.id, job.queue, job.attempt, os.getpid(), Jsonb(what)))


@task(QUEUE)
def durable_console_job(payload: dict[str, Any], job: JobContext) -> None:
    effect(job, {"run": True})

    def one(i: int) -> dict[str, Any]:
        effect(job, {"step": i})
        return {"i": i, "pad": "x" * (100 * (i + 1))}  # results of different sizes, for the page's column

    for i in range(int(payload.get("steps", 0))):
        job.step(f"step-{i}", one, i)
    if "cursor" in payload:
        job.save_cursor("row", payload["cursor"])
    if "sleep" in payload:
        job.sleep("nap", float(payload["sleep"]))
    if "wait" in payload:
        got = job.wait_for(payload["wait"], timeout=payload.get("timeout"))
        effect(job, {"got": got})
