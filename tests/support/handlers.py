"""Handlers with known behaviour for tests (RQ's fixtures.py idea).

Queues t1..t4 and the others below all run `behave`: it records its effect in test_effects
(one row per run, with the job id and the pid) and then does what the payload asks:
  sleep: seconds to sleep first        fail_times: raise on attempts <= this
  permanent: raise PermanentFailure    discard: raise Discard
  retry_after: raise RetryAfter(secs)  exit_on_attempt_le: os._exit(3) while attempt <= this
  raise_base: "KeyboardInterrupt" or "SystemExit"      returns: a value to return
  sleep_after: seconds to sleep after the effect is recorded (a run visibly under way)
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import psycopg

from skiplock import Discard, PermanentFailure, RetryAfter, task
from skiplock.core.job_context import JobContext

_local = threading.local()


def _conn() -> psycopg.Connection:
    conn = getattr(_local, "conn", None)
    if conn is None or conn.closed or conn.broken:
        # behind PgBouncer in transaction mode a handler's own connection must not prepare either
        prepare = None if os.environ.get("SKIPLOCK_PREPARED_STATEMENTS") == "off" else 5
        conn = psycopg.connect(os.environ["DATABASE_URL"], autocommit=True, application_name="skiplock-test-effects",
                               prepare_threshold=prepare)
        _local.conn = conn
    return conn


def record_effect(job: JobContext, payload: Any) -> None:
    """Write this run's effect; the fault suite counts these rows to find lost or doubled work."""
    _conn().execute(
        "INSERT INTO test_effects (job_id, queue, attempt, pid, payload) VALUES (%s, %s, %s, %s, %s)",
        (job.id, job.queue, job.attempt, os.getpid(), psycopg.types.json.Jsonb(payload)),
    )


def behave(payload: Any, job: JobContext) -> Any:
    opts = payload if isinstance(payload, dict) else {}
    if opts.get("sleep"):
        time.sleep(float(opts["sleep"]))
    if job.attempt <= int(opts.get("exit_on_attempt_le", 0)):
        os._exit(3)
    if opts.get("no_effect") is not True:
        record_effect(job, payload)
    if opts.get("sleep_after"):
        time.sleep(float(opts["sleep_after"]))
    if job.attempt <= int(opts.get("fail_times", 0)):
        raise RuntimeError(f"planned failure on attempt {job.attempt}")
    if opts.get("permanent"):
        raise PermanentFailure("planned permanent failure")
    if opts.get("discard"):
        raise Discard("planned discard")
    if opts.get("retry_after") is not None and job.attempt == 1:
        raise RetryAfter(float(opts["retry_after"]))
    if opts.get("raise_base") == "KeyboardInterrupt":
        raise KeyboardInterrupt("handler raised KeyboardInterrupt")
    if opts.get("raise_base") == "SystemExit":
        raise SystemExit(7)
    return opts.get("returns")


for _queue in ("t1", "t2", "t3", "t4", "default", "slow", "fast"):
    task(_queue)(behave)


@task("noop")
def noop(payload: Any) -> None:
    """Does nothing: for drain counts where effects are not needed."""
