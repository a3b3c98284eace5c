"""The `flow_versions` task at payload version 3 (v2 payloads gain "title")."""

from __future__ import annotations

from typing import Any

from skiplock import task
from skiplock.core.job_context import JobContext
from tests.support.flow_handlers import record, v1_to_v2


@task("flow_versions", version=3, upgrade={1: v1_to_v2, 2: lambda p: {**p, "title": ""}})
def handle(payload: Any, job: JobContext) -> None:
    record({**payload, "handled_by": 3}, job)
