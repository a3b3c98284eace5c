"""skiplock's queue core and worker.

Producers: `enqueue`, `enqueue_many`. Handlers: `@task`, and the exceptions that steer a job
(`PermanentFailure`, `Discard`, `RetryAfter`).
"""

# Imported for their side effects: @task's every=/cron= hooks and the worker start-up hook.
import worker.recurring
import worker.recurring_service  # noqa: F401
from worker.errors import (
    ConfigError,
    Discard,
    EnqueueError,
    PermanentFailure,
    RetryAfter,
    SkiplockError,
)
from worker.producer import enqueue, enqueue_many
from worker.registry import JobContext, task
from worker.status import JobStatus

__all__ = [
    "ConfigError",
    "Discard",
    "EnqueueError",
    "JobContext",
    "JobStatus",
    "PermanentFailure",
    "RetryAfter",
    "SkiplockError",
    "enqueue",
    "enqueue_many",
    "task",
]
