"""Test helpers for applications that use skiplock: three functions, and a pytest plugin.

The functions need no pytest (a tutorial's first check runs them in a plain script); the plugin's fixtures
are in worker/tools/testing_fixtures.py, and `skiplock.testing` exports them when pytest is installed.

Enable the plugin with `pytest -p skiplock.testing`, or `pytest_plugins = ["skiplock.testing"]` in
your top-level conftest.py. It gives:

- `skiplock_database_url` (session fixture): a database created for this test session and migrated.
  It is created on the server of SKIPLOCK_TEST_SERVER_URL, else of DATABASE_URL (a database
  `skiplock_test_<pid>_<random>`, dropped at the end). To use one database you made yourself
  instead (kept, only emptied), set SKIPLOCK_TEST_DATABASE_URL. While the session runs,
  DATABASE_URL points at it, so `skiplock.enqueue` and your app use it without changes.
- `skiplock_db` (function fixture): the same URL, with every table of its schema (the app's too)
  but skiplock_migrations emptied before the test.
- `skiplock_conn` (function fixture): an autocommit psycopg connection to it.

And, usable with or without the plugin:

- `drain(queue=None, conn=None)` runs the ready jobs in this process through the real claim and
  ack statements (skiplock.core.state_changes) and the worker's own outcome rules (skiplock.runtime.outcomes),
  until none is ready: retries that are due run too, a retry scheduled later does not. Returns the outcomes.
- `run_durable(queue=None, conn=None, signals=..., crash_after_steps=..., expire_waits=...)` runs durable
  jobs to the end in one call: it drains, ends the sleeps of parked jobs now and drains again, until
  nothing moves (worker/tools/testing_durable.py has the crash it can simulate).
- `enqueued_jobs(queue=None, conn=None)` lists the queued jobs; `assert_enqueued(queue, subset)`
  fails with the list of what is queued unless a job's payload contains `subset`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import json
import os
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from skiplock.core import state_changes
from skiplock.core.batch_handlers import BatchMember
from skiplock.core.durable import service as durable_service
from skiplock.core.durable.signals import signal
from skiplock.core.errors import BatchItemsFailed, Park
from skiplock.core.features import hooks, versions
from skiplock.core.job_context import JobContext
from skiplock.core.plumbing import tracing
from skiplock.core.plumbing.config import load_settings
from skiplock.core.registry import REGISTRY, Registry, Task
from skiplock.core.status import JobStatus, OutcomeStatus
from skiplock.runtime import outcomes
from skiplock.tools import testing_durable as durable_runs
from skiplock.tools.testing_durable import SimulatedCrash as SimulatedCrash  # skiplock.testing's name

# Status names a drained job ends in, by the outcome's status (state_changes.Outcome.status).
_FINAL_STATUS: dict[str, str] = {
    OutcomeStatus.OK: JobStatus.SUCCEEDED.value, OutcomeStatus.RETRY: JobStatus.QUEUED.value,
    OutcomeStatus.DEAD: JobStatus.DEAD.value, OutcomeStatus.FAILED: JobStatus.FAILED.value,
    OutcomeStatus.SNOOZED: OutcomeStatus.SNOOZED.value, OutcomeStatus.PARKED: JobStatus.PARKED.value,
    "crashed": "crashed"}
_DELAYED = (OutcomeStatus.RETRY, OutcomeStatus.SNOOZED)  # the outcomes that set a delay (DrainedJob.retry_in)
_WORKER_ID_PREFIX = "skiplock-testing"


@dataclass(frozen=True)
class DrainedJob:
    """One run done by `drain`: `status` is the job's state after it (a retry is 'queued')."""

    id: int
    queue: str
    payload: Any
    attempt: int
    # 'succeeded' | 'queued' (a retry, with `retry_in`) | 'snoozed' | 'parked' | 'dead' | 'failed', or 'crashed'
    # (run_durable(crash_after_steps=N): the run died there, and the job is back in its queue as after a reap)
    status: str
    error: str | None
    retry_in: float | None
    result: Any = None  # the handler's return value as stored (JSON round-trip), for a success


@dataclass(frozen=True)
class EnqueuedJob:
    """A queued job as `enqueued_jobs` lists it (its payload decoded)."""

    id: int
    queue: str
    payload: Any
    priority: int
    run_at: datetime
    attempts: int
    max_attempts: int
    unique_key: str | None


class DrainLimitExceeded(AssertionError):
    """drain ran `max_jobs` jobs and more were still ready: probably a job that enqueues itself."""


@contextmanager
def _connection(conn: psycopg.Connection | None) -> Iterator[psycopg.Connection]:
    if conn is not None:
        yield conn  # the caller's connection, and its transaction if one is open
        return
    url = os.environ.get("DATABASE_URL")
    if not url:
        raise RuntimeError("skiplock.testing needs conn= or DATABASE_URL (the plugin's fixtures set it)")
    with psycopg.connect(url, autocommit=True) as own:
        yield own


def drain(queue: str | Sequence[str] | None = None, conn: psycopg.Connection | None = None, *,
          registry: Registry = REGISTRY, max_jobs: int = 1000) -> list[DrainedJob]:
    """Run every ready job of `queue` (default: every queue with a registered handler) in-process.

    Jobs are claimed with state_changes.claim and their results written with state_changes.ack_batch, one job at a
    time, as a worker would. Jobs the handlers enqueue meanwhile run too, if ready. Stops when no
    job is ready; raises DrainLimitExceeded after `max_jobs` runs.
    """
    queues = [queue] if isinstance(queue, str) else list(queue or registry.queues())
    missing = [q for q in queues if registry.get(q) is None]
    if missing:
        raise ValueError(f"no handler registered for queue(s) {', '.join(missing)}: import the module "
                         "that declares them with @task before calling drain()")
    if not queues:
        raise ValueError("no queue to drain: no handler is registered (import your task module)")
    settings = load_settings()
    leases = [float(registry.get(q).lease_seconds or settings.lease_for(q)) for q in queues]  # type: ignore[union-attr]
    worker_id = f"{_WORKER_ID_PREFIX}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    newest = [registry.get(q).version for q in queues]  # type: ignore[union-attr]
    done: list[DrainedJob] = []
    with _connection(conn) as db:
        while True:
            # the newest payload version each handler runs, as a worker's claim passes it: a newer
            # job stays queued for a newer worker
            jobs = state_changes.claim(db, worker_id, queues, leases, 1, payload_as_text=True, with_context=True,
                                       versions=newest)
            if not jobs:
                return done
            if len(done) >= max_jobs:
                state_changes.release_own(db, worker_id, [jobs[0].id])
                raise DrainLimitExceeded(f"drain ran {max_jobs} jobs and more are ready (a job that "
                                         "enqueues itself?); raise max_jobs= if that is expected")
            job = jobs[0]
            payload = json.loads(job.payload)
            tracing.remember_contexts(db, [job.id])
            tracing.start_run(job.id, job.queue, job.attempts)
            outcome = _run(registry, job, payload, worker_id, settings.backoff_base, settings.backoff_cap,
                           durable=durable_runs.make(db, job, worker_id))
            tracing.end_run(outcome.status, outcome.error)
            if outcome.status == OutcomeStatus.PARKED:
                pass  # job.sleep / job.wait_for moved it already (skiplock_park), as in a worker
            elif outcome.status == durable_runs.CRASHED:
                durable_runs.crash(db, worker_id, job)
            else:
                durable_runs.finish(db, worker_id, job)  # its cursors, before the ack ends the fence
                state_changes.ack_batch(db, worker_id, [outcome], history=settings.history)
            done.append(DrainedJob(job.id, job.queue, payload, job.attempts, _FINAL_STATUS[outcome.status],
                                   outcome.error, outcome.delay if outcome.status in _DELAYED else None,
                                   json.loads(outcome.result) if outcome.result is not None else None))


def run_durable(queue: str | Sequence[str] | None = None, conn: psycopg.Connection | None = None, *,
                signals: dict[str, Any] | None = None, crash_after_steps: int | None = None,
                expire_waits: bool = False, registry: Registry = REGISTRY, max_rounds: int = 100) -> list[DrainedJob]:
    """Run the ready jobs of `queue` (default: every registered queue) to the end, fast-forwarding sleeps.

    `signals`: {key: payload} sent first. `expire_waits`: a wait with a timeout and no signal times out now
    (its handler gets WaitTimeout). `crash_after_steps`: each job's first run dies after that many stored
    steps. Returns every run, as drain() does (DrainedJob, in order); a job still waiting for a signal ends
    the list with status 'parked'.
    """
    queues = [queue] if isinstance(queue, str) else list(queue or registry.queues())
    token = durable_runs.PLAN.set(durable_runs.CrashPlan(crash_after_steps) if crash_after_steps is not None else None)
    try:
        with _connection(conn) as db:
            for key, payload in (signals or {}).items():
                signal(key, payload, conn=db)
            runs: list[DrainedJob] = []
            for _ in range(max_rounds):
                runs += drain(queues, db, registry=registry)
                if not durable_service.fast_forward(db, queues, waits=expire_waits):
                    return runs
            return runs
    finally:
        durable_runs.PLAN.reset(token)


def _run(registry: Registry, job: state_changes.ClaimedJob, payload: Any, worker_id: str,
         backoff_base: float, backoff_cap: float, durable: Any = None) -> state_changes.Outcome:
    task = registry.get(job.queue)
    assert task is not None  # drain checked every queue it claims from
    try:
        if job.version is not None and job.version < task.version:
            # an older payload reaches the handler upgraded, as in the worker (runtime/flow.py)
            payload = versions.upgrade_payload(job.queue, payload, job.version, task.version, task.upgrade)
        if task.wants_job:
            assert job.priority is not None and job.run_at is not None
            assert job.created_at is not None and job.started_at is not None
            context = JobContext(job.id, job.queue, job.attempts, job.max_attempts, job.priority, job.run_at,
                                 job.created_at, job.started_at, job.unique_key, worker_id)
            if durable is not None:  # steps on drain's own connection (testing_durable.py)
                context._durable.append(durable)
            # drain calls a batch handler with batches of one job
            result = _batch_of_one(task, job, payload, context) if task.is_batch else task.func(payload, job=context)
        else:
            result = task.func(payload)
        if task.is_async and not task.is_batch:  # _batch_of_one awaited its own
            result = _await(result)  # the worker awaits it on its own loop; here, on one of drain's
        outcomes.check_result(job, result)
        return outcomes.succeeded(job, result)  # stored with the ack, as a worker's is
    except Park:  # job.sleep / job.wait_for parked the job: no ack, as in a worker
        return state_changes.Outcome(job.id, job.queue, job.attempts, OutcomeStatus.PARKED)
    except durable_runs.SimulatedCrash:  # run_durable(crash_after_steps=N): the run dies here
        return state_changes.Outcome(job.id, job.queue, job.attempts, durable_runs.CRASHED)
    except Exception as exc:  # what the worker does with it; KeyboardInterrupt still stops the test run
        outcome = outcomes.for_exception(job, exc, backoff_base=backoff_base, backoff_cap=backoff_cap)
        hooks.failed(job, exc, outcome)
        return outcome


def _batch_of_one(task: Task, job: state_changes.ClaimedJob, payload: Any, context: JobContext) -> Any:
    """A batch handler called with this one job (as BatchMember, core/batch_handlers.py); the exception
    a BatchItemsFailed names for it is raised as its own. Returns the job's result, if one was returned."""
    member = BatchMember(*(getattr(context, f.name) for f in dataclasses.fields(JobContext) if f.init))
    try:
        returned = task.func([payload], [member])
        if task.is_async:
            returned = _await(returned)
    except BatchItemsFailed as failed:
        if set(failed.failures) != {job.id}:
            raise ValueError(f"BatchItemsFailed names jobs {sorted(failed.failures)}, not this batch's "
                             f"{job.id}") from failed
        raise failed.failures[job.id] from None
    return returned.get(job.id) if isinstance(returned, dict) else None


def _await(coroutine: Any) -> Any:
    """Run an `async def` handler's coroutine to its end: on a new event loop, or, when the caller is
    itself inside one (an async test), on a new loop in a thread, since a running loop cannot be re-entered."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def enqueued_jobs(queue: str | None = None, conn: psycopg.Connection | None = None, *,
                  include_scheduled: bool = True) -> list[EnqueuedJob]:
    """The queued jobs (of `queue`, or all), oldest first; without `include_scheduled`, only ready ones."""
    with _connection(conn) as db:
        rows = db.execute(
            """SELECT id, queue, payload, priority, run_at, attempts, max_attempts, unique_key
                 FROM jobs
                WHERE status = 'queued' AND (%(queue)s::text IS NULL OR queue = %(queue)s)
                  AND (%(scheduled)s OR run_at <= now())
                ORDER BY id""", {"queue": queue, "scheduled": include_scheduled}).fetchall()
    return [EnqueuedJob(*row) for row in rows]


def _contains(payload: Any, subset: Any) -> bool:
    """True when every key of `subset` is in `payload` with an equal (or, for dicts, containing) value."""
    if isinstance(subset, dict):
        return isinstance(payload, dict) and all(k in payload and _contains(payload[k], v) for k, v in subset.items())
    return bool(payload == subset)


def assert_enqueued(queue: str, payload_subset: Any = None, conn: psycopg.Connection | None = None, *,
                    count: int | None = None) -> list[EnqueuedJob]:
    """Fail unless a queued job of `queue` has a payload containing `payload_subset` (a dict's keys
    are matched recursively, any other value exactly; None matches any). With `count`, exactly that
    many must match. Returns the matching jobs.
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not this helper's
    queued = enqueued_jobs(queue, conn)
    matching = [j for j in queued if payload_subset is None or _contains(j.payload, payload_subset)]
    if (count is None and matching) or (count is not None and len(matching) == count):
        return matching
    seen = "\n".join(f"  #{j.id} {j.payload!r}" for j in queued[:20]) or "  (none)"
    wanted = "a job" if count is None else f"{count} job(s)"
    raise AssertionError(f"expected {wanted} in queue {queue!r} with payload containing {payload_subset!r}, "
                         f"found {len(matching)} matching; queued in {queue!r}:\n{seen}")
