"""The search page's SQL: fixed WHERE fragments, joined for the filters given, values always bound.

One page is found in at most two steps, newest job first, keyset-paginated on id:

1. RECENT: the newest RECENT_WINDOW jobs before the cursor (a walk of the primary key), filtered.
   A filter that matches many jobs (a queue, a state, a common payload value) fills its page here,
   whatever index it has.
2. INDEXED, only when step 1 found less than a page and older jobs remain: every match older than
   the window, found through the filter's own index (jobs_payload_idx, jobs_unique_key_idx,
   jobs_lock_key_idx, jobs_tenant_idx, jobs_last_error_trgm_idx: migration 030), then sorted.
   "ORDER BY id + 0" keeps the planner off the primary key: its estimate for `payload @>` is a
   fixed guess (1% of rows), and with a LIMIT that guess makes a backwards walk of the primary key
   look cheap; for a rare value that walk would read the whole table. Step 1 proved the match is
   rare among recent jobs, so collecting its matches through the index is the cheap plan.
   A state other than queued counts as such a filter (uses_index says why); a search for queued
   jobs or a queue alone keeps the planner's choice, a walk of the primary key: such jobs are many.
   The indexes leave running jobs out (migration 030 says why), so step 2 reads those apart.
"""

from __future__ import annotations

from typing import Any

from psycopg.types.json import Jsonb

from skiplock.core.error_summary import HEADLINE_SQL
from skiplock.core.status import JobStatus
from skiplock.webapp.filters import like
from skiplock.webapp.shared.search_filter import SearchFilter

# How many of the newest jobs step 1 reads at most (an index walk plus heap visits, so a
# search's first step stays short however big the table is).
RECENT_WINDOW = 20_000

COLUMNS = f"""id, queue, status::text, priority, run_at, created_at, started_at, finished_at,
       lease_until, attempts, max_attempts, unique_key, worker_id, lock_key, tenant, version,
       {HEADLINE_SQL} AS error_line, left(payload::text, 200) AS payload_head"""

# Each filter's fragment; a fragment is used only when its value is given (never formatted in).
_FRAGMENTS = {
    "id": "id = %(id)s::bigint",
    "queue": "queue = %(queue)s::text",
    "state": "status = %(state)s::job_status",
    "payload": "payload @> %(payload)s::jsonb",
    "unique_key": "unique_key = %(unique_key)s::text",
    "lock_key": "lock_key = %(lock_key)s::text",
    "tenant": "tenant = %(tenant)s::text",
    "error": "last_error ILIKE %(error)s::text",
    # the jobs parked waiting for a signal key, through job_waits_key_idx (migration 035)
    "signal_key": "id IN (SELECT w.job_id FROM job_waits w WHERE w.key = %(signal_key)s::text)",
    # the jobs whose own log lines hold the text (migration 041's job_logs_lines_trgm_idx finds them)
    "log": "id IN (SELECT job_id FROM job_logs WHERE lines ILIKE %(log)s::text)",
}


def params(flt: SearchFilter, limit: int) -> dict[str, Any]:
    """Bind parameters for the statements below (the payload as a jsonb document, error text as a
    literal ILIKE pattern: the operator's % and _ are not wildcards)."""
    return {"id": flt.id, "queue": flt.queue, "state": flt.state,
            "payload": Jsonb(flt.payload) if flt.payload is not None else None,
            "unique_key": flt.unique_key, "lock_key": flt.lock_key, "tenant": flt.tenant,
            "error": like(flt.error), "signal_key": flt.signal_key, "log": like(flt.log), "after": flt.after,
            "window": RECENT_WINDOW, "limit": limit}


def where(flt: SearchFilter) -> str:
    """The AND of the fragments for the filters `flt` gives ("true" for none)."""
    given = {"id": flt.id, "queue": flt.queue, "state": flt.state, "payload": flt.payload,
             "unique_key": flt.unique_key, "lock_key": flt.lock_key, "tenant": flt.tenant, "error": flt.error,
             "signal_key": flt.signal_key, "log": flt.log}
    parts = [_FRAGMENTS[name] for name, value in given.items() if value is not None]
    return " AND ".join(parts) or "true"


def recent(flt: SearchFilter) -> str:
    """Step 1: matches among the newest RECENT_WINDOW jobs before the cursor, newest first."""
    return f"""
SELECT {COLUMNS} FROM (
    SELECT * FROM jobs
     WHERE (%(after)s::bigint IS NULL OR id < %(after)s::bigint)
     ORDER BY id DESC
     LIMIT %(window)s
) w
 WHERE {where(flt)}
 ORDER BY id DESC
 LIMIT %(limit)s
"""


# The id that ends step 1's window (NULL when fewer jobs remain: the window saw them all).
WINDOW_END = """
SELECT id FROM jobs
 WHERE (%(after)s::bigint IS NULL OR id < %(after)s::bigint)
 ORDER BY id DESC
 OFFSET %(window)s - 1 LIMIT 1
"""


# The filters that have an index of their own (migration 030; a signal key: job_waits_key_idx, 035; log
# text: job_logs' trigram index, 041), which step 2 collects through.
INDEXED_FILTERS = ("payload", "unique_key", "lock_key", "tenant", "error", "signal_key", "log")


# States with a partial index of their own whose jobs are few next to the queued ones (migrations 001,
# 019, 025, 035: jobs_finished_idx, jobs_running_idx, jobs_waiting_idx, jobs_parked_idx).
INDEXED_STATES = (JobStatus.RUNNING.value, JobStatus.WAITING.value, JobStatus.PARKED.value,
                  JobStatus.SUCCEEDED.value, JobStatus.FAILED.value, JobStatus.DEAD.value)


def uses_index(flt: SearchFilter) -> bool:
    """Whether step 2 collects its matches through an index rather than walking the primary key.

    Only a search for queued jobs, a queue or nothing else walks the key: the planner estimates a queue
    and a state apart (billing is 20% of jobs, dead 10%: 2% together), so for a queue that has no dead
    jobs it would walk the whole table. Through the state's index, "none" costs nothing, and the
    most it costs is reading that state's jobs of that queue (dead letters: bounded by retention)."""
    return any(getattr(flt, name) is not None for name in INDEXED_FILTERS) or flt.state in INDEXED_STATES


def indexed(flt: SearchFilter) -> str:
    """Step 2: matches older than the window (id < %(before)s), through the filters' indexes.

    Migration 030's indexes leave running jobs out (a claim must not pay for them), so through them
    the statement reads the jobs that are not running, and running ones through jobs_running_idx:
    they are few, at most the workers' concurrency. A search for one state reads only its part."""
    if not uses_index(flt):
        return f"""
SELECT {COLUMNS} FROM jobs
 WHERE {where(flt)} AND id < %(before)s::bigint
 ORDER BY id DESC
 LIMIT %(limit)s
"""
    part = f"""(SELECT {COLUMNS} FROM jobs
      WHERE {where(flt)} AND id < %(before)s::bigint AND STATE_TEST
      ORDER BY id + 0 DESC
      LIMIT %(limit)s)"""
    running = part.replace("STATE_TEST", "status = 'running'")
    others = part.replace("STATE_TEST", "status <> 'running'")
    if flt.state == JobStatus.RUNNING:
        parts = [running]
    elif flt.state is not None:
        parts = [others]
    else:
        parts = [running, others]
    return f"""
SELECT * FROM (
    {" UNION ALL ".join(parts)}
) m
 ORDER BY id DESC
 LIMIT %(limit)s
"""


def by_id(flt: SearchFilter) -> str:
    """An id given: the one job, if the other filters match it too."""
    return f"SELECT {COLUMNS} FROM jobs WHERE {where(flt)}"
