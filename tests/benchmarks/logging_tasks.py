"""The handler of job_logs_cost.py's "logs" drain: a no-op that writes one INFO line through `logging`.

Loaded with SKIPLOCK_TASKS=tests.benchmarks.logging_tasks in place of skiplock.tools.bench_tasks, on the
same queue, so bench.seed_jobs and bench.wait_acked apply.
"""

from __future__ import annotations

import logging
from typing import Any

from skiplock.core.task_decorator import task
from skiplock.tools.bench import BENCH_QUEUE

log = logging.getLogger("bench.handler")


@task(BENCH_QUEUE)
def logging_job(payload: Any) -> None:
    log.info("handled %s", payload)
