"""The context a `takes_context=True` task receives: Django's TaskContext, plus skiplock's JobContext."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from skiplock.django.compat import TaskContext


@dataclass(frozen=True, kw_only=True)
class SkiplockTaskContext(TaskContext):
    """`context.attempt` and `context.task_result` as Django defines them; `context.job` is skiplock's
    JobContext for the run (job id, progress, parents' results in a workflow, and what else it offers)."""

    job: Any
