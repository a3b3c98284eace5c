"""Handlers for the workflow crash scenario (tests/fault/test_workflow_crashes.py).

Workers load them with SKIPLOCK_TASKS=tests.support.dag_handlers. Tables (made by the test):
  dag_starts(job_id, attempt, parents, parents_done)  every run's start, and how many of its parents'
                                                      effects were committed when it started
  dag_effects(job_id, attempt)                        the business write, committed with job.complete
"""

from __future__ import annotations

import random
import threading
from typing import Any

import psycopg

from skiplock import task
from skiplock.core.job_context import JobContext
from tests.support.helpers import thread_connection

_local = threading.local()


def _conn() -> psycopg.Connection:
    return thread_connection(_local, "skiplock-test-dag")


def _run(job: JobContext) -> None:
    conn = _conn()
    parents = list(job.parent_states)
    with conn.transaction():  # the start, on its own: a run that is killed later still shows
        conn.execute("INSERT INTO dag_starts (job_id, attempt, parents, parents_done) "
                     "SELECT %s, %s, %s, count(*) FROM dag_effects WHERE job_id = ANY(%s)",
                     (job.id, job.attempt, len(parents), parents))
    with conn.transaction():  # the effect and the completion, together: exactly once
        conn.execute("INSERT INTO dag_effects (job_id, attempt) VALUES (%s, %s)", (job.id, job.attempt))
        # server-side, so a SIGKILL of the worker lands inside this transaction as often as outside
        conn.execute("SELECT pg_sleep(%s)", (random.random() * 0.01,))
        job.complete(conn, result={"id": job.id})


@task("dag_node")
def node(payload: Any, job: JobContext) -> None:
    _run(job)


@task("dag_cb")
def callback(payload: Any, job: JobContext) -> None:
    _run(job)
