"""Handlers that write through `logging` during their run, for the job's own log lines
(worker/runtime/job_logs.py) and a running job's stack."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

from skiplock import task
from tests.support.handlers import record_effect

log = logging.getLogger("shop.orders")


@task("logs_sync")
def logs_sync(payload: Any, job: Any) -> None:
    log.info("charging order %s", payload["order"])
    log.warning("card declined once for order %s, trying again", payload["order"])
    try:
        raise ValueError("gateway said no")
    except ValueError:
        log.exception("second try failed")
    # a thread of its own: not this run's lines (its records go nowhere near the job)
    side = threading.Thread(target=lambda: log.warning("from a side thread"))
    side.start()
    side.join()
    if payload.get("fail"):
        raise RuntimeError(f"giving up on order {payload['order']}")


@task("logs_async")
async def logs_async(payload: Any, job: Any) -> None:
    log.info("async start %s", payload["order"])
    await asyncio.sleep(0.01)
    log.info("async done %s", payload["order"])


@task("logs_many")
def logs_many(payload: Any, job: Any) -> None:
    for n in range(payload["lines"]):
        log.info("line %d", n)


@task("logs_none")
def logs_none(payload: Any, job: Any) -> None:
    return None


@task("logs_then_hang")
def logs_then_hang(payload: Any, job: Any) -> None:
    log.info("step one of %s done", payload["order"])
    record_effect(job, payload)  # the test waits for this, then for the heartbeat's write, then kills
    deadline = time.monotonic() + 120  # bounded: never outlives the test
    while time.monotonic() < deadline:
        time.sleep(0.05)


def wait_for_the_gateway(seconds: float) -> None:
    """A named function the handler sleeps in: its stack shows this name."""
    deadline = time.monotonic() + seconds  # bounded: never outlives the test
    while time.monotonic() < deadline:
        time.sleep(0.05)


@task("stack_sync")
def stack_sync(payload: Any, job: Any) -> None:
    record_effect(job, payload)  # the test waits for this: the handler is running
    wait_for_the_gateway(payload.get("seconds", 120))


async def await_the_slow_api(seconds: float) -> None:
    """A named coroutine the async handler awaits in: its task's stack shows this name."""
    await asyncio.sleep(seconds)


@task("stack_async")
async def stack_async(payload: Any, job: Any) -> None:
    record_effect(job, payload)
    await await_the_slow_api(payload.get("seconds", 120))
