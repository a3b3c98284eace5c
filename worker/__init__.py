"""skiplock: background jobs in PostgreSQL.

Producers: `enqueue`, `enqueue_many`, and for asyncio `enqueue_async`, `enqueue_many_async`.
Handlers: `@task`, `recurring`, and the exceptions that steer a job (`PermanentFailure`, `Discard`,
`RetryAfter`, `Snooze`, and a batch handler's `BatchItemsFailed`). Durable jobs: `job.step`, `job.sleep`,
`job.wait_for` (JobContext), `signal`, `WaitTimeout`. The console is `skiplock.webapp`.

The source folders `worker/`, `webapp/`, `templates/`, `static/` and `migrations/` are mapped into
this one package at build time (pyproject.toml), so users import one name: `skiplock`.
"""

from importlib.metadata import PackageNotFoundError, version

# Nothing here imports the worker runtime (runner, APScheduler): a producer-only process does not
# pay for it. The worker wires its services itself (Worker._start_services).
from skiplock.core.durable.signals import signal, signal_async
from skiplock.core.errors import (
    BatchItemsFailed,
    ConfigError,
    Discard,
    EnqueueError,
    JobOwnershipLost,
    PermanentFailure,
    RetryAfter,
    SkiplockError,
    Snooze,
    WaitTimeout,
)
from skiplock.core.features import hooks
from skiplock.core.features.hooks import on_dead, on_failure
from skiplock.core.job_context import JobContext
from skiplock.core.producer import enqueue, enqueue_many
from skiplock.core.producer_async import enqueue_async, enqueue_many_async
from skiplock.core.registry import TASK_OPTIONS
from skiplock.core.status import JobStatus
from skiplock.core.task_decorator import task
from skiplock.core.workflows.batches import Batch, BatchInfo, batch, batch_status
from skiplock.core.workflows.results import (
    JobFailed,
    JobInfo,
    JobNotFound,
    ResultNotReady,
    ResultNotStored,
    ResultTooLarge,
    result,
    status,
    wait,
)
from skiplock.services import recurring_defs, schedules
from skiplock.services.recurring_defs import recurring

# The exceptions a handler raises are named by their public path: a worker's log line, a job's
# stored error and the console's grouping say skiplock.PermanentFailure, not the module they
# happen to live in (which moved once already, when the layers became sub-packages).
for _public in (BatchItemsFailed, ConfigError, Discard, EnqueueError, JobOwnershipLost, PermanentFailure, RetryAfter,
                SkiplockError, Snooze, WaitTimeout, JobFailed, JobNotFound, ResultNotReady, ResultNotStored,
                ResultTooLarge):
    _public.__module__ = __name__

# @task's extra keywords and what takes each: the one list (nothing registers itself on import).
TASK_OPTIONS.update({
    "on_failure": hooks.on_failure_option,  # per-queue error hooks
    "on_dead": hooks.on_dead_option,
    "every": recurring_defs.from_task,  # a recurring schedule named after the queue
    "cron": recurring_defs.from_task,
    "timezone": recurring_defs.needs_schedule,  # only with every= or cron=
    "catch_up": recurring_defs.needs_schedule,
})

try:
    __version__ = version("skiplock")
except PackageNotFoundError:  # imported from a bare source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "Batch",
    "BatchInfo",
    "BatchItemsFailed",
    "ConfigError",
    "Discard",
    "EnqueueError",
    "JobContext",
    "JobFailed",
    "JobInfo",
    "JobNotFound",
    "JobOwnershipLost",
    "JobStatus",
    "PermanentFailure",
    "ResultNotReady",
    "ResultNotStored",
    "ResultTooLarge",
    "RetryAfter",
    "SkiplockError",
    "Snooze",
    "WaitTimeout",
    "__version__",
    "batch",
    "batch_status",
    "enqueue",
    "enqueue_async",
    "enqueue_many",
    "enqueue_many_async",
    "on_dead",
    "on_failure",
    "recurring",
    "result",
    "schedules",
    "signal",
    "signal_async",
    "status",
    "task",
    "wait",
]
