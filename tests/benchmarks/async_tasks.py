"""The handler of compare.py's async drain: an `async def` that awaits a 10 ms sleep.

Loaded by the benchmark's skiplock worker with SKIPLOCK_TASKS=tests.benchmarks.async_tasks, in
place of skiplock.tools.bench_tasks, on the same queue so bench.seed_jobs and bench.wait_acked apply.
"""

from __future__ import annotations

import asyncio
from typing import Any

from skiplock.core.task_decorator import task
from skiplock.tools.bench import BENCH_QUEUE
from tests.benchmarks.peers import ASYNC_SLEEP


@task(BENCH_QUEUE)
async def sleeping_job(payload: Any) -> None:
    """Wait like an I/O-bound handler (an HTTP call, say) without holding a thread."""
    await asyncio.sleep(ASYNC_SLEEP)
