""""Why isn't this job running?": the reasons, read from live data, for one job or one queue.

Each reason is something an operator can act on: the queue is paused (by whom, since when), no
live worker serves the queue, run_at is in the future, the job waits behind N jobs that claim
before it, every live worker's slots are busy, or the job is leased to a worker that stopped
heartbeating (and when the reaper will take it back). Nothing here changes a job; the console's
job and queue pages and `skiplock why` read it.

Counts stop at AHEAD_CAP so a million-row queue costs a bounded walk of jobs_ready_idx.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row

from skiplock.core.durable import service as durable_service
from skiplock.core.status import LIVE_WORKER_SECONDS, JobStatus

AHEAD_CAP = 10_000

# The job, its queue's pause row, the live workers that serve its queue, its lease holder's last
# heartbeat, and how many ready jobs the claim takes before it: higher priority first, then the same
# priority with an earlier (run_at, id), the order of jobs_ready_idx.
JOB_FACTS = """
SELECT j.id, j.queue, j.status::text AS status, j.priority, j.run_at, j.lease_until, j.worker_id,
       j.attempts, j.max_attempts, now() AS now,
       p.paused_by, p.paused_at,
       (SELECT count(*) FROM workers w
         WHERE j.queue = ANY(w.queues) AND w.last_seen > now() - make_interval(secs => %(live)s)) AS live_workers,
       (SELECT coalesce(sum(w.concurrency), 0) FROM workers w
         WHERE j.queue = ANY(w.queues) AND w.last_seen > now() - make_interval(secs => %(live)s)) AS slots,
       (SELECT coalesce(sum(w.in_flight), 0) FROM workers w
         WHERE j.queue = ANY(w.queues) AND w.last_seen > now() - make_interval(secs => %(live)s)) AS in_flight,
       -- a lease holder whose lease ran out is not counted: it may be dead, its row not yet stale
       (SELECT count(*) FROM workers w WHERE w.last_seen > now() - make_interval(secs => %(live)s)
           AND w.id IS DISTINCT FROM j.worker_id) AS any_live_workers,
       (SELECT w.last_seen FROM workers w WHERE w.id = j.worker_id) AS holder_last_seen,
       CASE WHEN j.status = 'queued' AND j.run_at <= now() THEN
           (SELECT count(*) FROM (SELECT 1 FROM jobs a
              WHERE a.queue = j.queue AND a.status = 'queued' AND a.run_at <= now() AND a.priority > j.priority
              LIMIT %(cap)s + 1) s) END AS ahead_higher,
       CASE WHEN j.status = 'queued' AND j.run_at <= now() THEN
           (SELECT count(*) FROM (SELECT 1 FROM jobs a
              WHERE a.queue = j.queue AND a.status = 'queued' AND a.priority = j.priority
                AND (a.run_at, a.id) < (j.run_at, j.id)
              LIMIT %(cap)s + 1) s) END AS ahead_same,
       -- flow control (migration 009): the job holding its lock key, its queue's limits, and the
       -- newest payload version a live worker of its queue runs
       j.lock_key, j.version,
       (SELECT k.id FROM jobs k WHERE k.lock_key = j.lock_key AND k.status = 'running' AND k.id <> j.id
         LIMIT 1) AS key_holder,
       l.concurrency AS limit_concurrency, l.rate AS limit_rate,
       CASE WHEN l.concurrency IS NOT NULL THEN
           (SELECT sum(least(r.weight, l.weight_cap)) FROM jobs r
             WHERE r.status = 'running' AND r.queue = j.queue) END AS limit_running,
       -- per-tenant limits and weights (migration 043): what the job counts, what its tenant runs and
       -- may still start (skiplock_tenant_allowances: no row while the tenant holds nothing)
       j.tenant, least(j.weight, l.weight_cap) AS counts, l.tenant_concurrency, l.tenant_rate, l.tenant_cap,
       CASE WHEN j.tenant IS NOT NULL AND l.tenant_cap IS NOT NULL THEN
           (SELECT sum(least(r.weight, l.weight_cap)) FROM jobs r
             WHERE r.status = 'running' AND r.queue = j.queue AND r.tenant = j.tenant) END AS tenant_running,
       CASE WHEN j.tenant IS NOT NULL AND l.tenant_cap IS NOT NULL THEN
           coalesce((SELECT a.allow FROM skiplock_tenant_allowances(ARRAY[j.queue]) a WHERE a.tenant = j.tenant),
                    l.tenant_cap) END AS tenant_allow,
       v.worker_version,
       -- the row's own part of "claimable now", the claim's and the hand-off's one definition
       -- (migrations/functions/skiplock_claimable.sql); the version as a live worker knows it
       skiplock_claimable(j.status, j.run_at, j.version, coalesce(v.worker_version, j.version)) AS row_claimable
  FROM jobs j
  CROSS JOIN LATERAL (SELECT max((w.task_versions ->> j.queue)::int) AS worker_version FROM workers w
                       WHERE w.last_seen > now() - make_interval(secs => %(live)s) AND w.task_versions ? j.queue) v
  LEFT JOIN queue_limits l ON l.queue = j.queue
  LEFT JOIN paused_queues p ON p.queue = j.queue
 WHERE j.id = %(id)s
"""

# The same facts for a queue as a whole: its pause row, its live workers, and its ready backlog.
QUEUE_FACTS = """
SELECT now() AS now, p.paused_by, p.paused_at,
       (SELECT count(*) FROM workers w
         WHERE %(queue)s = ANY(w.queues) AND w.last_seen > now() - make_interval(secs => %(live)s)) AS live_workers,
       (SELECT coalesce(sum(w.concurrency), 0) FROM workers w
         WHERE %(queue)s = ANY(w.queues) AND w.last_seen > now() - make_interval(secs => %(live)s)) AS slots,
       (SELECT coalesce(sum(w.in_flight), 0) FROM workers w
         WHERE %(queue)s = ANY(w.queues) AND w.last_seen > now() - make_interval(secs => %(live)s)) AS in_flight,
       (SELECT count(*) FROM (SELECT 1 FROM jobs j WHERE j.queue = %(queue)s AND j.status = 'queued'
                                 AND j.run_at <= now() LIMIT %(cap)s + 1) s) AS ready,
       (SELECT count(*) FROM (SELECT 1 FROM jobs j WHERE j.queue = %(queue)s AND j.status = 'running'
                                 AND j.lease_until < now() LIMIT %(cap)s + 1) s) AS expired_leases,
       -- the queue's global limits (migration 009) and how many of its jobs run now
       l.concurrency AS limit_concurrency, l.rate AS limit_rate,
       CASE WHEN l.concurrency IS NOT NULL THEN
           (SELECT sum(least(r.weight, l.weight_cap)) FROM jobs r
             WHERE r.status = 'running' AND r.queue = %(queue)s) END AS limit_running,
       -- a worker holding a lease that ran out is not counted: it may be dead, its row not yet stale
       (SELECT count(*) FROM workers w WHERE w.last_seen > now() - make_interval(secs => %(live)s)
           AND NOT EXISTS (SELECT 1 FROM jobs x WHERE x.status = 'running' AND x.lease_until < now()
                              AND x.worker_id = w.id)) AS any_live_workers
  FROM (SELECT 1) one
  LEFT JOIN paused_queues p ON p.queue = %(queue)s
  LEFT JOIN queue_limits l ON l.queue = %(queue)s
"""


@dataclass(frozen=True)
class Reason:
    """One reason a job (or a queue's jobs) is not running, in plain words, with its facts."""

    code: str  # paused | no_worker | scheduled | behind | busy | lease_expired | holder_silent | finished | ...
    text: str
    blocking: bool = True  # False for a note that explains but does not hold the job back
    facts: dict[str, Any] = field(default_factory=dict)


def _ago(now: datetime, then: datetime) -> str:
    return _span((now - then).total_seconds()) + " ago"


def _span(seconds: float) -> str:
    seconds = abs(seconds)
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def _count(n: int, cap: int = AHEAD_CAP) -> str:
    return f"{cap:,}+" if n > cap else f"{n:,}"


def _paused(f: dict[str, Any], queue: str) -> Reason | None:
    if f["paused_at"] is None:
        return None
    who = f["paused_by"] or "someone"
    return Reason("paused", f"Queue {queue} is paused: {who} paused it {_ago(f['now'], f['paused_at'])} "
                  f"({f['paused_at']:%Y-%m-%d %H:%M:%S %Z}). No worker claims its jobs until it is resumed.",
                  facts={"paused_by": who, "paused_at": f["paused_at"]})


def _no_worker(f: dict[str, Any], queue: str) -> Reason | None:
    if f["live_workers"]:
        return None
    elsewhere = (f" {f['any_live_workers']} live worker(s) serve other queues: none has a handler for {queue} "
                 "or lists it in SKIPLOCK_QUEUES." if f["any_live_workers"] else " No worker is live at all.")
    return Reason("no_worker", f"No live worker serves queue {queue} (none has heartbeated in the last "
                  f"{LIVE_WORKER_SECONDS:.0f} s with {queue} among its queues).{elsewhere}",
                  facts={"live_workers": 0, "any_live_workers": f["any_live_workers"]})


def _busy(f: dict[str, Any], queue: str) -> Reason | None:
    if not f["live_workers"] or f["in_flight"] < f["slots"]:
        return None
    return Reason("busy", f"Every handler slot of the {f['live_workers']} live worker(s) serving {queue} is busy "
                  f"({f['in_flight']} of {f['slots']} running): it starts when one frees up.",
                  facts={"in_flight": f["in_flight"], "slots": f["slots"]})


def _reaper_when(f: dict[str, Any], reaper_interval: float) -> str:
    if not f["any_live_workers"]:
        return ("No worker is live to run the reaper: it is taken back when a worker starts "
                "(its reaper runs at start-up).")
    return f"A live worker's reaper takes it back within {reaper_interval:g} s of the lease's end."


def _lease(f: dict[str, Any], reaper_interval: float) -> Reason | None:
    now, until = f["now"], f["lease_until"]
    holder = f["worker_id"]
    if until is not None and until < now:
        return Reason("lease_expired", f"It is leased to worker {holder}, whose lease ran out "
                      f"{_ago(now, until)} ({until:%H:%M:%S %Z}): that worker stopped heartbeating (crashed, "
                      f"frozen or cut off). {_reaper_when(f, reaper_interval)} Attempt {f['attempts']} of "
                      f"{f['max_attempts']} is then counted as used.",
                      facts={"worker_id": holder, "lease_until": until})
    seen = f["holder_last_seen"]
    if seen is None or (now - seen).total_seconds() > LIVE_WORKER_SECONDS:
        last = "has no worker row any more" if seen is None else f"last heartbeated {_ago(now, seen)}"
        ends = f"{until:%H:%M:%S %Z} (in {_span((until - now).total_seconds())})" if until else "soon"
        return Reason("holder_silent", f"It is leased to worker {holder}, which {last}. If it does not heartbeat "
                      f"again, its lease ends at {ends}. {_reaper_when(f, reaper_interval)}",
                      facts={"worker_id": holder, "lease_until": until, "holder_last_seen": seen})
    return None


def _scheduled(f: dict[str, Any]) -> Reason | None:
    if f["run_at"] <= f["now"]:
        return None
    # a sentence of its own for each cause (one template filled with either read "set by it was enqueued")
    why = ("its retry backoff set it after a failed attempt" if f["attempts"]
           else "it was enqueued with a later run_at (delay= or run_at=)")
    wait = _span((f["run_at"] - f["now"]).total_seconds())
    return Reason("scheduled", f"run_at is in the future: it becomes ready in {wait} "
                  f"({f['run_at']:%Y-%m-%d %H:%M:%S %Z}) because {why}. \"Run now\" makes it ready at once.",
                  facts={"run_at": f["run_at"]})


def _behind(f: dict[str, Any]) -> Reason | None:
    higher, same = f["ahead_higher"] or 0, f["ahead_same"] or 0
    if not higher and not same:
        return None
    parts = []
    if higher:
        parts.append(f"{_count(higher)} ready job(s) of higher priority than its {f['priority']}")
    if same:
        parts.append(f"{_count(same)} of the same priority that became ready earlier")
    return Reason("behind", "It waits behind " + " and ".join(parts) + ": the claim takes them first.",
                  facts={"ahead_higher": higher, "ahead_same": same})


def _lock_key(f: dict[str, Any]) -> Reason | None:
    if f["lock_key"] is None or f["key_holder"] is None:
        return None
    return Reason("lock_key", f"Its lock key {f['lock_key']!r} is taken: job {f['key_holder']} with the same key is "
                  "running, and only one job per key runs at a time. It starts when that one finishes.",
                  facts={"lock_key": f["lock_key"], "holder": f["key_holder"]})


def _limits(f: dict[str, Any]) -> Reason | None:
    concurrency, running = f["limit_concurrency"], f["limit_running"]
    if concurrency is not None and running is not None and running >= concurrency:
        return Reason("concurrency_limit", f"Its queue's concurrency limit is reached: {running} of {concurrency} "
                      "running across all workers (skiplock queues limit). It starts when one finishes.",
                      facts={"concurrency": concurrency, "running": running})
    if f["limit_rate"] is not None:
        return Reason("rate_limit", f"Its queue is rate-limited to {f['limit_rate']:g} jobs/s across all workers: "
                      "a backlog is worked off at that rate.", blocking=False, facts={"rate": f["limit_rate"]})
    return None


def _tenant_limit(f: dict[str, Any], queue: str) -> Reason | None:
    """The job's tenant is at its per-tenant limit: what it may still start is less than the job counts."""
    allow, counts, tenant = f["tenant_allow"], f["counts"], f["tenant"]
    if allow is None or allow >= counts:
        return None
    running, cap = int(f["tenant_running"] or 0), f["tenant_concurrency"]
    weighs = f" (this job counts {counts})" if counts > 1 else ""
    facts = {"tenant": tenant, "running": running, "tenant_concurrency": cap, "tenant_rate": f["tenant_rate"],
             "allow": allow}
    if cap is not None and running + counts > cap:
        return Reason("tenant_limit", f"Its tenant {tenant!r} is at its per-tenant limit of queue {queue}: {running} "
                      f"of {cap} running{weighs}, and each tenant may run at most {cap} at once across all workers "
                      "(skiplock queues limit --per-tenant-concurrency). It starts when one of its tenant's jobs "
                      "finishes; other tenants' jobs go on meanwhile.", facts=facts)
    return Reason("tenant_limit", f"Its tenant {tenant!r} is at its per-tenant rate limit of queue {queue}: each "
                  f"tenant starts at most {f['tenant_rate']:g} per second (skiplock queues limit --per-tenant-rate), "
                  f"and {tenant!r} has used its share for now{weighs}. It starts as the tenant's bucket refills; "
                  "other tenants' jobs go on meanwhile.", facts=facts)


def _version(f: dict[str, Any]) -> Reason | None:
    newest = f["worker_version"]
    if newest is None or f["version"] <= newest:
        return None
    return Reason("version", f"Its payload is version {f['version']}, and the live workers of its queue know at most "
                  f"version {newest}: it waits (no attempt used) for a worker deployed with the newer task.",
                  facts={"version": f["version"], "worker_version": newest})


# A waiting job's edges: how many, how many still open, and the first open ones with their parents'
# states (through job_deps_child_idx, so a fan-in of 100,000 parents costs one index range).
WAITING_FACTS = """
SELECT count(*) AS total, count(*) FILTER (WHERE e.parent_state IS NULL) AS open,
       (SELECT coalesce(array_agg(o.parent ORDER BY o.parent), '{}') FROM (
            SELECT parent FROM job_deps WHERE child = %(id)s AND parent_state IS NULL
             ORDER BY parent LIMIT %(shown)s) o) AS open_ids
  FROM job_deps e WHERE e.child = %(id)s
"""
WAITING_SHOWN = 20  # open parents named (and linked) on the job page


def _waiting(conn: psycopg.Connection, job_id: int) -> Reason:
    """A waiting job: "waiting on 3 of 50 dependencies", with the first open ones' ids."""
    with conn.cursor(row_factory=dict_row) as cur:
        f = cur.execute(WAITING_FACTS, {"id": job_id, "shown": WAITING_SHOWN}).fetchone()
    assert f is not None  # an aggregate: one row always
    total, open_, ids = int(f["total"]), int(f["open"]), list(f["open_ids"])
    named = ", ".join(map(str, ids)) + (f" and {open_ - len(ids):,} more" if open_ > len(ids) else "")
    return Reason("waiting", f"It is waiting on {open_:,} of {total:,} dependencies"
                  + (f" ({named})" if ids else "") + ": it becomes ready in the same transaction as the "
                  "last one's success (a dead or cancelled one ends it, unless it runs anyway).",
                  facts={"open": open_, "total": total, "open_ids": ids})


NEVER_YEAR = 9999  # a wait with no timeout parks until 9999-12-31 (migrations/functions/skiplock_park.sql)


def _parked(conn: psycopg.Connection, job_id: int) -> Reason:
    """A durable job parked by its handler: until a time (job.sleep), or until a signal (job.wait_for)."""
    wait = durable_service.parked_on(conn, job_id)
    if wait is None:
        return Reason("parked", "It is parked, but nothing says what wakes it (no wait row): the sweeper puts it "
                      "back in its queue within SKIPLOCK_SWEEP_INTERVAL.", facts={})
    until = wait["wake_at"]
    forever = until is None or until.year >= NEVER_YEAR
    if wait["key"] is None:
        return Reason("parked", f"It is sleeping ({wait['sleep']!r}) until {until:%Y-%m-%d %H:%M:%S %Z}: it "
                      "holds no worker, no lease and no attempt, and runs again from the top within about a second "
                      "of that time (its stored steps are skipped). \"Wake now\" runs it at once.",
                      facts={"sleep": wait["sleep"], "until": until})
    timeout = "with no timeout" if forever else f"until its timeout at {until:%Y-%m-%d %H:%M:%S %Z}"
    return Reason("parked", f"It is waiting for the signal {wait['key']!r} {timeout}: it holds no worker, no lease "
                  f"and no attempt. skiplock.signal({wait['key']!r}, payload), `skiplock jobs signal` or SQL "
                  "skiplock_signal() wakes it." + ("" if forever else " At the timeout its handler gets "
                                                   "skiplock.WaitTimeout."),
                  facts={"key": wait["key"], "timeout": None if forever else until})


def for_job(conn: psycopg.Connection, job_id: int, reaper_interval: float = 5.0) -> list[Reason] | None:
    """The reasons job `job_id` is not running now (empty when nothing holds it back); None if no such job."""
    with conn.cursor(row_factory=dict_row) as cur:
        f = cur.execute(JOB_FACTS, {"id": job_id, "live": LIVE_WORKER_SECONDS, "cap": AHEAD_CAP}).fetchone()
    if f is None:
        return None
    queue = f["queue"]
    if f["status"] == JobStatus.RUNNING:
        lease = _lease(f, reaper_interval)
        return [lease] if lease else []
    if f["status"] == JobStatus.WAITING:
        return [_waiting(conn, job_id)]
    if f["status"] == JobStatus.PARKED:
        return [_parked(conn, job_id)]
    if f["status"] != JobStatus.QUEUED:
        return [Reason("finished", f"It is {f['status']}: it will not run again unless it is retried.",
                       blocking=False)]
    # the row's own reasons (due, version) only when skiplock_claimable says the row is not claimable
    row = [] if f["row_claimable"] else [_scheduled(f), _version(f)]
    found = [_paused(f, queue), *row[:1], _no_worker(f, queue), *row[1:], _lock_key(f), _limits(f),
             _tenant_limit(f, queue), _behind(f), _busy(f, queue)]
    return [r for r in found if r is not None]


def _queue_limits(f: dict[str, Any], queue: str) -> Reason | None:
    """The queue's ready jobs wait on its global concurrency limit, or drain at its rate limit."""
    concurrency, running = f["limit_concurrency"], f["limit_running"]
    if concurrency is not None and running is not None and running >= concurrency:
        return Reason("concurrency_limit", f"{_count(f['ready'])} ready job(s) of {queue} wait on its concurrency "
                      f"limit: {running} of {concurrency} run now across all workers (skiplock queues limit). "
                      "One starts each time a running one finishes.",
                      facts={"concurrency": concurrency, "running": running})
    if f["limit_rate"] is not None:
        return Reason("rate_limit", f"{queue} is rate-limited to {f['limit_rate']:g} jobs/s across all workers: "
                      f"its {_count(f['ready'])} ready job(s) are worked off at that rate.", blocking=False,
                      facts={"rate": f["limit_rate"]})
    return None


TENANTS_NAMED = 5  # tenants at their limit named in a queue's reasons


def _tenants_at_limit(conn: psycopg.Connection, queue: str) -> Reason | None:
    """The tenants of `queue` at their per-tenant limit now: their jobs wait while the other tenants' run."""
    from skiplock.core.features.limits import tenants_at_limit

    at = [t for t in tenants_at_limit(conn, queue, limit=TENANTS_NAMED + 1) if t.allow == 0]
    if not at:
        return None
    named = ", ".join(f"{t.tenant!r} ({t.running} running)" for t in at[:TENANTS_NAMED])
    more = " and more" if len(at) > TENANTS_NAMED else ""
    return Reason("tenant_limit", f"Tenant(s) of {queue} at their per-tenant limit: {named}{more}. Their ready jobs "
                  "wait for their own running ones (or their rate) while the other tenants' jobs run "
                  "(skiplock queues limit --per-tenant-concurrency / --per-tenant-rate).", blocking=False,
                  facts={"tenants": [t.tenant for t in at[:TENANTS_NAMED]]})


def for_queue(conn: psycopg.Connection, queue: str, reaper_interval: float = 5.0) -> list[Reason]:
    """The reasons a queue's ready jobs are not being run now (empty when its jobs can run)."""
    with conn.cursor(row_factory=dict_row) as cur:
        f = cur.execute(QUEUE_FACTS, {"queue": queue, "live": LIVE_WORKER_SECONDS, "cap": AHEAD_CAP}).fetchone()
    assert f is not None  # one row always: FROM (SELECT 1)
    found = [_paused(f, queue)]
    if f["ready"]:
        # only worth saying when there is ready work that waits for it
        found += [_no_worker(f, queue), _queue_limits(f, queue), _tenants_at_limit(conn, queue), _busy(f, queue)]
    if f["expired_leases"]:
        found.append(Reason("lease_expired", f"{_count(f['expired_leases'])} running job(s) of {queue} have an "
                            f"expired lease: their workers stopped heartbeating. {_reaper_when(f, reaper_interval)}",
                            facts={"expired_leases": f["expired_leases"]}))
    return [r for r in found if r is not None]


# Queues with ready work that no live worker serves, not paused on purpose: each queue with queued
# jobs is found by a loose index scan, its ready jobs counted up to the cap.
UNSERVED_QUEUES = """
WITH RECURSIVE q AS (
    (SELECT queue FROM jobs WHERE status = 'queued' ORDER BY queue LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue FROM jobs j WHERE j.status = 'queued' AND j.queue > q.queue ORDER BY j.queue LIMIT 1)
      FROM q WHERE q.queue IS NOT NULL
)
SELECT q.queue, r.ready
  FROM q CROSS JOIN LATERAL (
      SELECT count(*) AS ready FROM (SELECT 1 FROM jobs j WHERE j.queue = q.queue AND j.status = 'queued'
                                        AND j.run_at <= now() LIMIT %(cap)s + 1) s) r
 WHERE q.queue IS NOT NULL AND r.ready > 0
   AND NOT EXISTS (SELECT 1 FROM paused_queues p WHERE p.queue = q.queue)
   AND NOT EXISTS (SELECT 1 FROM workers w
                    WHERE q.queue = ANY(w.queues) AND w.last_seen > now() - make_interval(secs => %(live)s))
 ORDER BY q.queue
"""


def unserved_queues(conn: psycopg.Connection) -> dict[str, int]:
    """Queue -> ready jobs (capped at AHEAD_CAP + 1), for every unpaused queue with ready work and no live worker."""
    rows = conn.execute(UNSERVED_QUEUES, {"cap": AHEAD_CAP, "live": LIVE_WORKER_SECONDS}).fetchall()
    return {queue: int(ready) for queue, ready in rows}


def describe_count(n: int) -> str:
    """A capped count as the pages show it."""
    return _count(n)
