"""`skiplock doctor`: checks that say, in plain words, whether the queue is healthy and what to do.

The same checks feed the console's Health page. Each returns a Check with a status
(ok / warn / fail), a one-sentence verdict, what to do about it, and detail rows. The CLI
exits 1 when any check fails, so it can gate a deploy or page someone from cron.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import psycopg

from skiplock.core import state_changes
from skiplock.core.plumbing.config import Settings, load_settings
from skiplock.core.status import LIVE_WORKER_SECONDS, JobStatus
from skiplock.monitor import why
from skiplock.monitor.metrics import QUEUES_WITH_STATUS, sum_histograms

OK, WARN, FAIL = "ok", "warn", "fail"
MAX_XACT_AGE = 60.0  # seconds: a transaction older than this holds back vacuum long enough to matter
SMALL_TABLE_ROWS = 10_000  # below this a sequential scan of jobs is cheap and the planner may prefer it
DEAD_MIN = 10_000  # dead tuples below this are never worth a warning
DEAD_RATIO = 0.2  # dead / (live + dead) above this, with DEAD_MIN exceeded, is bloat to look at
SATURATION = 0.8  # observed rate / capacity above this, with a ready backlog, means "at the limit"
STATS_WINDOW_MINUTES = 5
WORKER_EXTRA_CONNECTIONS = 2  # the listener's and the claim loop's own connections, besides the pool

# The per-table settings migrations 005 and 023 (fillfactor) ship for jobs (see their comments for why).
JOBS_SETTINGS = {
    "fillfactor": "80",
    "autovacuum_vacuum_scale_factor": "0.01",
    "autovacuum_vacuum_threshold": "1000",
    "autovacuum_vacuum_insert_scale_factor": "0.05",
    "autovacuum_analyze_scale_factor": "0.02",
    "autovacuum_vacuum_cost_delay": "0",
}


@dataclass(frozen=True)
class Check:
    """One check's result: status, a plain-words verdict, what to do, and detail rows."""

    name: str
    status: str  # ok | warn | fail
    verdict: str
    action: str = ""
    details: list[dict[str, Any]] = field(default_factory=list)


# ---- 1. the claim uses the ready partial index ----------------------------------------------------


def _plan_nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from _plan_nodes(child)


def _claim_plan(conn: psycopg.Connection, queues: list[str], limit: int) -> list[dict[str, Any]]:
    params = {"queues": queues, "leases": [30.0] * len(queues), "limit": limit, "worker_id": "doctor",
              "versions": [2**31 - 1] * len(queues), "tenant_after": [None] * len(queues), "limited": []}
    plan = state_changes.claim_plan(conn, params)
    assert plan is not None
    return [n for n in _plan_nodes(plan[0]["Plan"]) if n.get("Relation Name") == "jobs"]


def _describe(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"node": n["Node Type"], "index": n.get("Index Name", "")} for n in nodes]


def check_claim_plan(conn: psycopg.Connection, settings: Settings) -> Check:
    """EXPLAIN the claim statement: it must walk jobs_ready_idx, not scan the whole table."""
    name = "claim plan"
    queues = [r[0] for r in conn.execute(QUEUES_WITH_STATUS, {"status": JobStatus.QUEUED.value})][:5] or ["default"]
    nodes = _claim_plan(conn, queues, settings.batch_size)
    if any(n.get("Index Name") == "jobs_ready_idx" for n in nodes):
        return Check(name, OK, "The claim walks the ready partial index jobs_ready_idx, so it reads only "
                     "ready rows however big the table grows.", details=_describe(nodes))
    # Maybe only the planner's preference on a tiny table: ask whether the index is usable at all.
    with conn.transaction():
        conn.execute("SET LOCAL enable_seqscan = off")
        forced = _claim_plan(conn, queues, settings.batch_size)
    usable = any(n.get("Index Name") == "jobs_ready_idx" for n in forced)
    est = conn.execute("SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = 'jobs'::regclass").fetchone()
    rows = int(est[0]) if est else 0
    if usable and rows < SMALL_TABLE_ROWS:
        return Check(name, OK, f"jobs is small (~{rows} rows), so the planner reads it directly for now; "
                     "jobs_ready_idx is usable and will be chosen as the table grows.", details=_describe(nodes))
    if usable:
        return Check(name, WARN, f"The claim does not use jobs_ready_idx although jobs has ~{rows} rows: "
                     "the planner's statistics are probably stale.",
                     "Run ANALYZE jobs; check that autovacuum/analyze runs on jobs (see the table check).",
                     _describe(nodes))
    return Check(name, FAIL, "The claim cannot use the ready partial index jobs_ready_idx: it is missing or "
                 "does not match the claim's WHERE status = 'queued', so every claim scans the whole table.",
                 "Recreate it: CREATE INDEX CONCURRENTLY jobs_ready_idx ON jobs (queue, priority DESC, "
                 "run_at, id) WHERE status = 'queued'; (or run `skiplock migrate`).", _describe(nodes))


# ---- 2. transactions that hold back vacuum -------------------------------------------------------

OLD_TRANSACTIONS = """
SELECT pid, coalesce(application_name, ''), state,
       extract(epoch FROM now() - xact_start)::float8 AS xact_age,
       extract(epoch FROM now() - state_change)::float8 AS state_age,
       left(coalesce(query, ''), 160)
  FROM pg_stat_activity
 WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'
   AND xact_start IS NOT NULL
   AND (state LIKE 'idle in transaction%%' OR now() - xact_start > make_interval(secs => %(max_age)s))
 ORDER BY xact_start
"""

OLD_PREPARED = """
SELECT gid, extract(epoch FROM now() - prepared)::float8 FROM pg_prepared_xacts
 WHERE database = current_database() AND now() - prepared > make_interval(secs => %(max_age)s)
"""


def check_long_transactions(conn: psycopg.Connection, settings: Settings, max_age: float = MAX_XACT_AGE) -> Check:
    """Sessions idle in transaction, and transactions older than `max_age` seconds (they stall vacuum)."""
    name = "long transactions"
    rows = conn.execute(OLD_TRANSACTIONS, {"max_age": max_age}).fetchall()
    prepared = conn.execute(OLD_PREPARED, {"max_age": max_age}).fetchall()
    details = [{"pid": pid, "application": app, "state": state, "transaction_age_s": round(age, 1),
                "in_state_s": round(state_age or 0, 1), "query": query}
               for pid, app, state, age, state_age, query in rows]
    details += [{"prepared_transaction": gid, "transaction_age_s": round(age, 1)} for gid, age in prepared]
    ages = [r[3] for r in rows] + [p[1] for p in prepared]  # unrounded, in details' order
    old = [d for d, age in zip(details, ages, strict=True) if age > max_age]
    if old:
        worst = max(ages)
        return Check(name, FAIL, f"{len(old)} transaction(s) older than {max_age:g}s (the oldest {worst:.0f}s): "
                     "while they stay open, vacuum cannot remove any dead job row newer than they are, "
                     "so jobs bloats and claims slow down.",
                     "Find the code that opens them (application name, query) and keep transactions short; "
                     "end one now with SELECT pg_terminate_backend(pid). Consider "
                     "idle_in_transaction_session_timeout.", details)
    if details:
        return Check(name, WARN, f"{len(details)} session(s) idle in transaction right now, younger than "
                     f"{max_age:g}s: harmless if brief, a problem if they linger.",
                     "Watch whether the same pids stay idle in transaction; commit or roll back promptly.", details)
    return Check(name, OK, f"No session is idle in transaction and no transaction is older than {max_age:g}s: "
                 "vacuum can clean up behind the queue.")


# ---- 3. the jobs table: dead tuples, vacuum, size, settings in force -----------------------------

TABLE_STATS = """
SELECT coalesce(c.reloptions, '{}'), pg_table_size(c.oid), pg_indexes_size(c.oid),
       s.n_live_tup, s.n_dead_tup, s.last_autovacuum, s.last_vacuum, s.autovacuum_count,
       s.last_autoanalyze, current_setting('autovacuum'), current_setting('track_counts'),
       current_setting('autovacuum_naptime'), current_setting('autovacuum_vacuum_cost_limit'),
       current_setting('autovacuum_vacuum_scale_factor'), current_setting('autovacuum_vacuum_threshold')
  FROM pg_class c JOIN pg_stat_user_tables s ON s.relid = c.oid
 WHERE c.oid = 'jobs'::regclass
"""

INDEX_SIZES = """
SELECT indexrelid::regclass::text, pg_relation_size(indexrelid) FROM pg_index
 WHERE indrelid = 'jobs'::regclass ORDER BY 1
"""


def _mb(n: int) -> str:
    return f"{n / 1048576:.1f} MB"


def check_table_health(conn: psycopg.Connection, settings: Settings, dead_min: int = DEAD_MIN,
                       dead_ratio: float = DEAD_RATIO) -> Check:
    """Dead tuples, last autovacuum, sizes of jobs and its indexes, and the autovacuum settings in force."""
    name = "jobs table"
    row = conn.execute(TABLE_STATS).fetchone()
    assert row is not None
    (options, heap, index, live, dead, last_auto, last_manual, auto_count, _last_analyze, av_on, track,
     naptime, cost_limit, g_scale, g_threshold) = row
    opts = dict(o.split("=", 1) for o in options)
    in_force = {
        "autovacuum (server)": av_on, "track_counts (server)": track, "autovacuum_naptime (server)": naptime,
        "autovacuum_vacuum_cost_limit (server)": cost_limit,
        "autovacuum_enabled (jobs)": opts.get("autovacuum_enabled", "true"),
        "autovacuum_vacuum_scale_factor (jobs)": opts.get("autovacuum_vacuum_scale_factor", f"{g_scale} (server)"),
        "autovacuum_vacuum_threshold (jobs)": opts.get("autovacuum_vacuum_threshold", f"{g_threshold} (server)"),
        **{f"{k} (jobs)": opts.get(k, "default") for k in JOBS_SETTINGS
           if k not in ("autovacuum_vacuum_scale_factor", "autovacuum_vacuum_threshold")},
    }
    details: list[dict[str, Any]] = [{"setting": k, "value": v} for k, v in in_force.items()]
    details += [{"index": i, "size": _mb(size)} for i, size in conn.execute(INDEX_SIZES)]
    last = max([t for t in (last_auto, last_manual) if t is not None], default=None)
    summary = (f"jobs: {live} live / {dead} dead tuples, heap {_mb(heap)}, indexes {_mb(index)}; "
               f"last vacuum {last.isoformat(timespec='seconds') if last else 'never'} "
               f"({auto_count} autovacuum runs).")
    if av_on != "on" or track != "on" or opts.get("autovacuum_enabled", "true").lower() in ("false", "off", "0"):
        return Check(name, FAIL, "Autovacuum is off for jobs (server autovacuum/track_counts, or the table's "
                     "autovacuum_enabled). skiplock's workers vacuum jobs themselves when their role owns it "
                     "(SKIPLOCK_VACUUM_DEAD_ROWS), but nothing vacuums its other tables (job_stats, "
                     "queue_waiters, workers, ...), whose dead rows stay and which only grow. "
                     + summary,
                     "Turn it back on: ALTER TABLE jobs RESET (autovacuum_enabled); and autovacuum = on, "
                     "track_counts = on in postgresql.conf.", details)
    total = (live or 0) + (dead or 0)
    if dead > dead_min and total and dead / total > dead_ratio:
        return Check(name, WARN, f"{dead / total:.0%} of jobs' tuples are dead: vacuum is not keeping up. "
                     + summary,
                     "Look for long transactions (check above). At high throughput lower the server's "
                     "autovacuum_naptime (e.g. 10s; the default 1min lets a busy queue pile up dead rows "
                     "between visits), keep jobs' autovacuum_vacuum_cost_delay at 0, or run VACUUM jobs. "
                     "Workers vacuum jobs themselves only if their role owns it (their log says so "
                     "once otherwise) and SKIPLOCK_VACUUM_DEAD_ROWS is not 0.",
                     details)
    missing = [k for k, v in JOBS_SETTINGS.items() if k not in opts]
    if missing:
        return Check(name, WARN, "jobs is healthy now but lacks skiplock's per-table settings "
                     f"({', '.join(missing)}), so it will bloat more between vacuums under load. " + summary,
                     "Run `skiplock migrate` (migrations 005 and 023) or ALTER TABLE jobs SET (...) by hand.", details)
    return Check(name, OK, "Vacuum keeps up with jobs. " + summary, details=details)


# ---- 4. the throughput envelope -----------------------------------------------------------------

OBSERVED_RATE = """
SELECT coalesce(sum(completed + retried + failed + dead), 0)
  FROM job_stats
 WHERE minute >= date_trunc('minute', now()) - make_interval(mins => %(window)s)
   AND minute < date_trunc('minute', now())
"""

READY_BACKLOG = """
SELECT count(*) FROM (SELECT 1 FROM jobs WHERE status = 'queued' AND run_at <= now() LIMIT 100000) s
"""

LIVE_SLOTS = """
SELECT count(*), coalesce(sum(concurrency), 0) FROM workers WHERE last_seen > now() - make_interval(secs => %(live)s)
"""


def check_throughput(conn: psycopg.Connection, settings: Settings, window: int = STATS_WINDOW_MINUTES) -> Check:
    """Envelope workers x batch / (claim RTT + handler time) from measured data, next to the observed rate."""
    name = "throughput envelope"
    hist = sum_histograms(conn.execute("SELECT metric, bounds, counts, total_count, total_sum "
                                       "FROM worker_latency").fetchall())

    def mean(metric: str) -> float | None:
        _b, _c, n, s = hist.get(metric, ([], [], 0, 0.0))
        return s / n if n else None

    claim, handler, batch = mean("claim"), mean("handler"), mean("claim_batch")
    workers_row = conn.execute(LIVE_SLOTS, {"live": LIVE_WORKER_SECONDS}).fetchone()
    workers, slots = (int(workers_row[0]), int(workers_row[1])) if workers_row else (0, 0)
    done = conn.execute(OBSERVED_RATE, {"window": window}).fetchone()
    observed = float(done[0]) / (window * 60) if done else 0.0
    backlog_row = conn.execute(READY_BACKLOG).fetchone()
    backlog = int(backlog_row[0]) if backlog_row else 0
    if claim is None or handler is None or not workers:
        return Check(name, OK, f"Not enough measurements yet ({workers} live worker(s)); workers publish claim "
                     f"and handler times every 5 s. Observed {observed:.1f} jobs/s.",
                     details=[{"observed_jobs_per_s": round(observed, 2), "ready_backlog": backlog}])
    batch = max(batch or 1.0, 1.0)
    seed = workers * batch / (claim + handler)  # seed 000's formula
    handler_bound = slots / handler if handler > 0 else math.inf  # every slot busy all the time
    claim_bound = workers * batch / claim if claim > 0 else math.inf  # claim loop never idle
    capacity = min(handler_bound, claim_bound)
    limiting = "handler time" if handler_bound <= claim_bound else "claim round trip"
    details = [{
        "live_workers": workers, "slots": slots, "mean_jobs_per_claim": round(batch, 1),
        "claim_rtt_ms": round(claim * 1000, 2), "handler_ms": round(handler * 1000, 2),
        "seed_envelope_jobs_per_s": round(seed, 1), "handler_bound_jobs_per_s": round(handler_bound, 1),
        "claim_bound_jobs_per_s": round(claim_bound, 1), "observed_jobs_per_s": round(observed, 1),
        "ready_backlog": backlog,
    }]
    envelope = (f"Envelope: {workers} workers x {batch:.1f} jobs/claim / ({claim * 1000:.1f} ms claim + "
                f"{handler * 1000:.1f} ms handler) = {seed:.0f} jobs/s; handler slots allow {handler_bound:.0f}/s, "
                f"claims {claim_bound:.0f}/s; observed {observed:.1f} jobs/s over {window} min.")
    fix = ("add worker processes or concurrency, or make handlers faster" if limiting == "handler time"
           else "raise SKIPLOCK_BATCH_SIZE or cut the claim round trip (closer database, less load on it)")
    if backlog and observed >= SATURATION * capacity:
        return Check(name, WARN, f"At capacity: ready jobs are waiting and the rate is at {observed / capacity:.0%} "
                     f"of what the workers can do; {limiting} is the limit. " + envelope,
                     f"To go faster, {fix}.", details)
    return Check(name, OK, f"Headroom left; {limiting} would be the limit. " + envelope,
                 f"When the backlog grows: {fix}.", details)


# ---- 5. the connection budget --------------------------------------------------------------------

CONNECTIONS = """
SELECT current_setting('max_connections')::int, current_setting('superuser_reserved_connections')::int
"""

CONNECTIONS_BY_APP = """
SELECT CASE WHEN application_name LIKE 'skiplock-worker%' OR application_name LIKE 'skiplock-listener%'
            THEN 'skiplock workers'
            WHEN application_name LIKE 'skiplock-web%' OR application_name LIKE 'skiplock-console%'
            THEN 'skiplock web'
            WHEN application_name LIKE 'skiplock-producer%' THEN 'skiplock producers'
            WHEN application_name LIKE 'skiplock%' THEN 'skiplock other'
            ELSE 'other clients' END AS grp, count(*)
  FROM pg_stat_activity WHERE backend_type = 'client backend'
 GROUP BY 1 ORDER BY 1
"""


def check_connections(conn: psycopg.Connection, settings: Settings) -> Check:
    """Pools of web, workers, reaper and producers against max_connections."""
    name = "connection budget"
    row = conn.execute(CONNECTIONS).fetchone()
    assert row is not None
    max_conn, reserved = row
    available = max_conn - reserved
    now: dict[str, int] = dict(conn.execute(CONNECTIONS_BY_APP).fetchall())
    live = conn.execute(LIVE_SLOTS, {"live": LIVE_WORKER_SECONDS}).fetchone()
    workers = int(live[0]) if live else 0
    # each worker's pool (acks, heartbeats, its reaper) is at least 3, plus its listener and claim connections
    per_worker = max(settings.pool_size, 3) + WORKER_EXTRA_CONNECTIONS
    worker_budget = workers * per_worker
    others = sum(v for k, v in now.items() if k != "skiplock workers")
    planned = worker_budget + others
    details = [{"group": k, "connections_now": v} for k, v in now.items()]
    details.append({"group": "skiplock workers (budget)", "connections_now": now.get("skiplock workers", 0),
                    "budget": f"{workers} live x {per_worker} = {worker_budget}"})
    details.append({"group": "available", "connections_now": sum(now.values()),
                    "budget": f"max_connections {max_conn} - {reserved} reserved = {available}"})
    summary = (f"{workers} live worker(s) may open {worker_budget} connections; with the {others} other "
               f"connections open now that is {planned} of {available} available.")
    if planned > available:
        return Check(name, FAIL, "Over budget: at full load the pools can open more connections than the server "
                     "accepts, and the next one will be refused. " + summary,
                     "Lower SKIPLOCK_POOL_SIZE or the number of processes, put PgBouncer (transaction mode) in "
                     "front, or raise max_connections.", details)
    if planned > 0.8 * available:
        return Check(name, WARN, "Close to max_connections. " + summary,
                     "Leave headroom for deploys (old and new processes overlap) and admin sessions.", details)
    return Check(name, OK, "Within budget. " + summary, details=details)


# ---- 6. queues nobody serves --------------------------------------------------------------------


def check_unserved_queues(conn: psycopg.Connection, settings: Settings) -> Check:
    """Ready jobs in a queue that is not paused and that no live worker serves never run: fail."""
    name = "served queues"
    unserved = why.unserved_queues(conn)
    if not unserved:
        return Check(name, OK, "Every queue with ready jobs is served by a live worker (or paused on purpose).")
    listed = ", ".join(f"{q} ({why.describe_count(n)} ready)" for q, n in unserved.items())
    return Check(name, FAIL, f"{len(unserved)} queue(s) have ready jobs and no live worker: {listed}. "
                 "Nothing will run them.",
                 "Start a worker whose --tasks register a handler for each queue (and whose SKIPLOCK_QUEUES, if "
                 "set, lists it), or pause the queue on purpose.",
                 [{"queue": q, "ready": why.describe_count(n)} for q, n in unserved.items()])
# ---- 6. payload versions no live worker can run -----------------------------------------------------

# The newest payload version any live worker runs, per queue (workers.task_versions, migration 009).
LIVE_VERSIONS = """
SELECT v.key, max(v.value::int)
  FROM workers w, jsonb_each_text(coalesce(w.task_versions, '{}'::jsonb)) v
 WHERE w.last_seen > now() - make_interval(secs => %(live)s)
 GROUP BY v.key
"""
# Queued jobs of `queue` newer than `version`, counted up to a cap (a walk of the queue's ready index).
NEWER_QUEUED = """
SELECT count(*), max(version) FROM (SELECT version FROM jobs
                                     WHERE queue = %(queue)s AND status = 'queued' AND version > %(version)s
                                     LIMIT 1000) s
"""


def check_versions(conn: psycopg.Connection, settings: Settings) -> Check:
    """Queued jobs of a payload version newer than every live worker of their queue knows."""
    from skiplock.monitor.metrics import LIVE_WORKER_SECONDS

    name = "payload versions"
    details = []
    for queue, version in conn.execute(LIVE_VERSIONS, {"live": LIVE_WORKER_SECONDS}).fetchall():
        row = conn.execute(NEWER_QUEUED, {"queue": queue, "version": version}).fetchone()
        if row and row[0]:
            details.append({"queue": queue, "workers_run_up_to": version, "newest_queued": row[1],
                            "jobs_waiting": f"{row[0]}+" if row[0] >= 1000 else row[0]})
    if details:
        queues = ", ".join(d["queue"] for d in details)
        return Check(name, WARN, f"Queued jobs in {queues} have a payload version no live worker handles: they "
                     "are left queued (not failed) until a worker of that version runs.",
                     "Deploy the workers with the newer @task(version=...) (or roll the producers back).", details)
    return Check(name, OK, "Every queued job's payload version is one a live worker of its queue handles.")


# ---- 8. workflows: nothing stranded ----------------------------------------------------------------


def check_workflows(conn: psycopg.Connection, settings: Settings, grace: float | None = None) -> Check:
    """Waiting jobs whose parents are all final, and finished batches with no callback: the workflow
    sweeper (services/workflow_sweeper.py) repairs them; here they are only reported."""
    from skiplock.core.workflows import workflow_repair

    name = "workflows"
    found = workflow_repair.find(conn, workflow_repair.GRACE_SECONDS if grace is None else grace)
    if not found.found:
        return Check(name, OK, "No waiting job whose parents are all final, and no finished batch without "
                     "its callback.")
    details = ([{"stranded_parent": i} for i in found.stranded_parents]
               + [{"miscounted_waiting_job": i} for i in found.recounted_jobs]
               + [{"miscounted_batch": i} for i in found.recounted_batches]
               + [{"batch_without_callback": i} for i in found.called_back])
    return Check(name, FAIL, f"{found.found} workflow item(s) would wait forever without the sweeper: "
                 f"{len(found.stranded_parents)} finished parent(s) whose dependents were not told, "
                 f"{len(found.recounted_jobs)} miscounted waiting job(s), {len(found.recounted_batches)} "
                 f"miscounted batch(es), {len(found.called_back)} finished batch(es) without callback.",
                 "Run a worker (its workflow sweeper repairs these within SKIPLOCK_SWEEP_INTERVAL), and look "
                 "for what finished these jobs outside skiplock (a hand-written UPDATE or DELETE of jobs).",
                 details)

# ---- 9. workers that stopped heartbeating, and jobs the reaper took back ----------------------------

# Workers whose row is older than a live worker's, with the jobs they still hold (orphans).
STALE_WORKERS = """
SELECT w.id, w.host, w.pid, w.last_seen, extract(epoch FROM now() - w.last_seen)::int AS silent_s,
       (SELECT count(*) FROM jobs j WHERE j.status = 'running' AND j.worker_id = w.id) AS holding
  FROM workers w
 WHERE w.last_seen < now() - make_interval(secs => %(live)s)
 ORDER BY w.last_seen DESC
 LIMIT 50
"""
# Leases the reaper took back in the last hour, per queue (job_stats.reaped, written by the reaper).
REAPED_LAST_HOUR = """
SELECT queue, sum(reaped)::bigint FROM job_stats
 WHERE minute >= now() - interval '1 hour' AND reaped > 0
 GROUP BY queue ORDER BY 2 DESC
"""


def check_workers(conn: psycopg.Connection, settings: Settings) -> Check:
    """A worker that stopped heartbeating (crashed, killed, cut off) and the jobs reaped after one."""
    name = "workers"
    stale = conn.execute(STALE_WORKERS, {"live": LIVE_WORKER_SECONDS}).fetchall()
    reaped = conn.execute(REAPED_LAST_HOUR).fetchall()
    details: list[dict[str, Any]] = [
        {"worker": wid, "host": host, "pid": pid, "silent for": f"{silent}s", "jobs it still holds": holding}
        for wid, host, pid, _seen, silent, holding in stale]
    details += [{"queue": q, "reaped in the last hour": n} for q, n in reaped]
    total_reaped = sum(n for _, n in reaped)
    if not stale and not total_reaped:
        return Check(name, OK, "Every registered worker is heartbeating, and the reaper took back no lease in the "
                     "last hour.")
    parts = []
    if stale:
        holding = sum(row[5] for row in stale)
        parts.append(f"{len(stale)} worker(s) stopped heartbeating more than {LIVE_WORKER_SECONDS:g} s ago"
                     + (f", holding {holding} running job(s) that the reaper takes back when their leases end"
                        if holding else ""))
    if total_reaped:
        parts.append(f"the reaper took back {total_reaped} job(s) in the last hour (a worker died or froze "
                     "mid-job: each such job ran again or went dead)")
    return Check(name, WARN, "; ".join(parts).capitalize() + ".",
                 "Look at the stopped workers' logs (OOM kill, deploy without SIGTERM, lost network). A job reaped "
                 "again and again kills its worker: its page shows each attempt.", details)


# ---- 10. recurring schedules whose last run died ------------------------------------------------------

# Each enabled schedule's newest finished run: its slot's job is dead (recurring_slots keeps the job id;
# a job that is gone succeeded and was not kept). Runs still queued or running are skipped.
RECURRING_LAST_DIED = """
SELECT s.name, s.queue, r.fire_at, r.job_id, r.error_headline
  FROM recurring_schedules s
 CROSS JOIN LATERAL (SELECT sl.fire_at, sl.job_id, j.status, j.error_headline
                       FROM recurring_slots sl LEFT JOIN jobs j ON j.id = sl.job_id
                      WHERE sl.name = s.name AND (j.status IS NULL OR j.status NOT IN ('queued', 'running'))
                      ORDER BY sl.fire_at DESC LIMIT 1) r
 WHERE s.enabled AND r.status = 'dead'
 ORDER BY s.name
 LIMIT 50
"""


def check_recurring(conn: psycopg.Connection, settings: Settings) -> Check:
    """A schedule still fires but its latest run died: 'enabled' alone hides that it does nothing useful."""
    name = "recurring runs"
    rows = conn.execute(RECURRING_LAST_DIED).fetchall()
    if not rows:
        return Check(name, OK, "No enabled recurring schedule's latest run died.")
    details = [{"schedule": n, "queue": q, "slot": f"{at:%Y-%m-%d %H:%M:%S} UTC", "job": job, "error": err or ""}
               for n, q, at, job, err in rows]
    return Check(name, WARN, f"The latest run of {len(rows)} recurring schedule(s) died: "
                 + ", ".join(r[0] for r in rows) + ". They keep firing, and each run may die the same way.",
                 "Open the dead job from the Recurring page (its error says why), fix the handler or its "
                 "configuration, then retry it; pause the schedule meanwhile if its runs do harm.", details)


# ---- 11. parked durable jobs that nothing can wake -----------------------------------------------------

def check_parked(conn: psycopg.Connection, settings: Settings) -> Check:
    """Parked jobs with no time and no signal key: no wake pass and no signal can ever move them."""
    from skiplock.core.durable import service

    name = "parked jobs"
    count, oldest = service.unwakeable(conn)
    if not count:
        return Check(name, OK, "Every parked job has a time or a signal key that wakes it.")
    details = [{"job": job_id, "queue": queue, "parked_at": f"{at:%Y-%m-%d %H:%M:%S} UTC" if at else "unknown"}
               for job_id, queue, at in oldest]
    return Check(name, FAIL, f"{count} parked job(s) have no wake time and no signal key: nothing will ever wake "
                 "them.", "Run a worker (its parked-job sweeper puts a parked job with no wait row back in its "
                 "queue within SKIPLOCK_SWEEP_INTERVAL), and look for what changed these rows outside skiplock "
                 "(a hand-written UPDATE of jobs or DELETE of job_waits). `skiplock jobs wake ID` runs one now.",
                 details)


# ---- running them ----------------------------------------------------------------------------------

CHECKS: list[tuple[str, Callable[..., Check]]] = [
    ("claim plan", check_claim_plan),
    ("long transactions", check_long_transactions),
    ("jobs table", check_table_health),
    ("throughput envelope", check_throughput),
    ("connection budget", check_connections),
    ("served queues", check_unserved_queues),
    ("payload versions", check_versions),
    ("workflows", check_workflows),
    ("workers", check_workers),
    ("recurring runs", check_recurring),
    ("parked jobs", check_parked),
]


def run_checks(conn: psycopg.Connection, settings: Settings | None = None,
               max_xact_age: float = MAX_XACT_AGE) -> list[Check]:
    """Every check, in order; a check that itself errors is reported as failing, not raised."""
    settings = settings or load_settings()
    results = []
    for name, func in CHECKS:
        kwargs = {"max_age": max_xact_age} if func is check_long_transactions else {}
        try:
            results.append(func(conn, settings, **kwargs))
        except psycopg.Error as exc:
            if conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR:
                conn.rollback()
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            results.append(Check(name, FAIL, f"The check could not run: {first}",
                                 "Is the schema migrated (skiplock migrate) and may this role read pg_stat_*?"))
    return results


def format_checks(checks: list[Check]) -> str:
    """Plain text for a terminal: one block per check."""
    label = {OK: "[ OK ]", WARN: "[WARN]", FAIL: "[FAIL]"}
    lines = []
    for c in checks:
        lines.append(f"{label[c.status]} {c.name}: {c.verdict}")
        if c.action and c.status != OK:
            lines.append(f"       what to do: {c.action}")
        if c.status != OK:
            for d in c.details[:20]:
                lines.append("       - " + ", ".join(f"{k}={v}" for k, v in d.items()))
    return "\n".join(lines)
