"""The limited queue's handler for tests/benchmarks/flow.py: sleeps 2-5 ms (the seed recipe's job)."""

from __future__ import annotations

import random
import time
from typing import Any

from skiplock.core.task_decorator import task

LIMITED_QUEUE = "skiplock_bench_limited"


@task(LIMITED_QUEUE)
def limited_job(payload: Any) -> None:
    """A short job of the busy limited queue."""
    time.sleep(random.uniform(0.002, 0.005))
