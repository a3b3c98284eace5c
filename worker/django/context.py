"""The context a `takes_context=True` task receives: Django's TaskContext, plus skiplock's JobContext."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from skiplock.django.compat import TaskContext


@dataclass(frozen=True, kw_only=True)
class SkiplockTaskContext(TaskContext):
    """`context.attempt` and `context.task_result` as Django defines them; `context.job` is skiplock's
    JobContext for the run (job id, progress, durable steps and waits, and what else it offers), and
    `context.parent_results` a workflow's parents' return values."""

    job: Any

    @property
    def parent_results(self) -> dict[int, Any]:
        """In a workflow, each parent's id -> its return value. A Django task's stored result is the
        backend's record of the run (`job.parent_results` gives that whole record); this takes its
        return_value out, and gives any other parent's result as it was stored."""
        return {parent: _return_value(stored) for parent, stored in self.job.parent_results.items()}


def _return_value(stored: Any) -> Any:
    """A Django task's return_value from the backend's stored record (results.envelope), else `stored`."""
    if isinstance(stored, dict) and {"task", "backend", "return_value"} <= stored.keys():
        return stored["return_value"]
    return stored
