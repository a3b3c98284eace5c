"""An async recurring task for worker-process tests: `aticks` fires every second."""

from __future__ import annotations

from typing import Any

from skiplock import task
from skiplock.core.job_context import JobContext
from tests.support.async_handlers import _record


@task("aticks", every="1s")
async def tick(payload: Any, job: JobContext) -> None:
    await _record(job, job.queue, payload)
