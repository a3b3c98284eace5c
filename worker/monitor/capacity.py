"""The capacity model: what one job costs this database, and what that allows (`skiplock capacity`).

Two snapshots of the server's own counters, taken `seconds` apart (or one, against the counters'
last reset), give per-job figures measured on the user's database with the user's jobs:

- server time per enqueue, claim and ack: pg_stat_statements' execution + planning time of each
  kind of statement, divided by the rows it handled (jobs inserted, claimed, acked). Executor time
  is CPU plus any waits; it leaves out parsing, the protocol and the commit's WAL flush, so the
  projections below are an upper bound (docs/reference/capacity.md measures by how much);
- WAL bytes per job (pg_stat_statements' wal_bytes of skiplock's statements; without the
  extension, pg_stat_wal's cluster-wide counter);
- dead tuples per job: each UPDATE and DELETE of a `jobs` row leaves one for vacuum;
- statements per job: an upper bound on round trips per job (pipelined statements share one);
- the handler's mean run time, from the workers' histograms (worker_latency).

From them: the jobs/s this database could carry at 50% and 80% of its CPUs, and the worker
processes a target rate needs (Little's law: busy slots = rate x service time). Read-only.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import psycopg

# Which of skiplock's statements a pg_stat_statements row is, from its SQL text (the statements of
# worker/core/sql/*.sql, as sent: squeezed), checked in order on the lowercased text with whitespace collapsed.
KINDS: list[tuple[str, re.Pattern[str]]] = [
    ("claim", re.compile(r"\bskiplock_limit_allowances\b.*\bfor update skip locked\b")),
    ("ack", re.compile(r"^with.*\berrored as\b.*\binsert\s+into\s+job_stats\b")),
    ("enqueue", re.compile(r"^(insert\s+into|copy)\s+jobs\b")),
]
# The rest of skiplock's writes (heartbeats, reaper, waiters, the worker row, its histograms) are
# "other"; read-only SELECTs are not: the console's and monitoring's reads are no job's cost.
OTHER_TABLES = ("jobs", "job_stats", "workers", "worker_latency", "queue_waiters", "recurring_slots",
                "recurring_schedules", "paused_queues", "queue_limits")
WRITE_VERBS = ("insert", "update", "delete", "with")
JOB_KINDS = ("enqueue", "claim", "ack")

STATEMENTS_SQL = """
SELECT query, calls, rows, total_exec_time + total_plan_time AS ms, wal_bytes
  FROM pg_stat_statements
 WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
"""
TABLE_SQL = """
SELECT coalesce(sum(n_tup_upd + n_tup_del), 0), coalesce(sum(n_tup_ins), 0)
  FROM pg_stat_user_tables WHERE relname = 'jobs'
"""
FINISHED_SQL = """
SELECT coalesce((SELECT sum(completed + retried + failed + dead) FROM job_stats), 0)
     + coalesce((SELECT sum(completed + retried + failed + dead) FROM job_stats_totals), 0)
"""
HANDLER_SQL = "SELECT coalesce(sum(total_sum), 0), coalesce(sum(total_count), 0) FROM worker_latency " \
              "WHERE metric = 'handler'"
CONCURRENCY_SQL = "SELECT coalesce(avg(concurrency), 0), count(*) FROM workers " \
                  "WHERE last_seen > now() - interval '30 seconds'"


@dataclass
class Snapshot:
    """The server's cumulative counters at one moment."""

    at: float
    statements: dict[str, dict[str, float]] | None  # kind -> calls, rows, ms, wal; None: no pg_stat_statements
    wal_bytes: float
    dead_tuples: float
    inserted: float
    finished: float
    handler_seconds: float
    handler_runs: float
    concurrency: float
    workers: int


def _kind(query: str) -> str | None:
    text = " ".join(query.lower().split())
    for kind, pattern in KINDS:
        if pattern.search(text):
            return kind
    words = set(text.replace("(", " ").replace(",", " ").split())
    if text.split(" ", 1)[0] in WRITE_VERBS and words & set(OTHER_TABLES):
        return "other"
    return None


def _statements(conn: psycopg.Connection) -> dict[str, dict[str, float]] | None:
    try:
        with conn.transaction():
            rows = conn.execute(STATEMENTS_SQL).fetchall()
    except psycopg.Error:  # not created in this database, or not in shared_preload_libraries
        return None
    kinds = {k: {"calls": 0.0, "rows": 0.0, "ms": 0.0, "wal": 0.0} for k in (*JOB_KINDS, "other")}
    for query, calls, nrows, ms, wal in rows:
        kind = _kind(query)
        if kind:
            for key, value in (("calls", calls), ("rows", nrows), ("ms", ms), ("wal", wal)):
                kinds[kind][key] += float(value or 0)
    return kinds


def _one(conn: psycopg.Connection, sql: str) -> tuple[Any, ...]:
    row = conn.execute(sql).fetchone()
    assert row is not None  # aggregates always return a row
    return tuple(row)


def snapshot(conn: psycopg.Connection) -> Snapshot:
    """Read every counter the model needs (one consistent moment is not needed: they are rates)."""
    statements = _statements(conn)
    try:
        with conn.transaction():
            wal = float(_one(conn, "SELECT wal_bytes FROM pg_stat_wal")[0])
    except psycopg.Error:  # PostgreSQL < 14
        wal = math.nan
    dead, inserted = _one(conn, TABLE_SQL)
    handler_s, handler_n = _one(conn, HANDLER_SQL)
    concurrency, workers = _one(conn, CONCURRENCY_SQL)
    return Snapshot(time.monotonic(), statements, wal, float(dead), float(inserted),
                    float(_one(conn, FINISHED_SQL)[0]), float(handler_s), float(handler_n), float(concurrency),
                    int(workers))


@dataclass
class Costs:
    """Per-job costs between two snapshots (NaN where a figure could not be measured)."""

    seconds: float
    jobs: float  # jobs finished (acked: completed, retried, failed or dead)
    enqueued: float
    server_ms: dict[str, float] = field(default_factory=dict)  # per enqueue / claim / ack / other, per job
    wal_bytes_per_job: float = math.nan
    dead_tuples_per_job: float = math.nan
    statements_per_job: float = math.nan
    handler_ms: float = math.nan
    concurrency: float = 0.0
    workers: int = 0

    @property
    def server_ms_per_job(self) -> float:
        """Server time of one job's whole life: enqueue + claim + ack + its share of the rest."""
        return sum(self.server_ms.values()) if self.server_ms else math.nan


def _per(value: float, count: float) -> float:
    return value / count if count else math.nan


def costs(before: Snapshot, after: Snapshot) -> Costs:
    """What the jobs between two snapshots cost, per job."""
    jobs = after.finished - before.finished
    result = Costs(seconds=after.at - before.at, jobs=jobs, enqueued=after.inserted - before.inserted,
                   dead_tuples_per_job=_per(after.dead_tuples - before.dead_tuples, jobs),
                   handler_ms=_per(1000 * (after.handler_seconds - before.handler_seconds),
                                   after.handler_runs - before.handler_runs),
                   concurrency=after.concurrency, workers=after.workers)
    if before.statements is not None and after.statements is not None:
        delta = {k: {m: after.statements[k][m] - before.statements[k][m] for m in after.statements[k]}
                 for k in after.statements}
        for kind in JOB_KINDS:
            result.server_ms[kind] = _per(delta[kind]["ms"], delta[kind]["rows"])
        result.server_ms["other"] = _per(delta["other"]["ms"], jobs)
        result.wal_bytes_per_job = _per(sum(d["wal"] for d in delta.values()), jobs)
        result.statements_per_job = (_per(delta["enqueue"]["calls"], delta["enqueue"]["rows"])
                                     + _per(delta["claim"]["calls"], delta["claim"]["rows"])
                                     + _per(delta["ack"]["calls"], delta["ack"]["rows"])
                                     + _per(delta["other"]["calls"], jobs))
    else:
        result.wal_bytes_per_job = _per(after.wal_bytes - before.wal_bytes, jobs)
    return result


@dataclass
class Projection:
    """What the measured costs allow."""

    db_cores: float | None
    jobs_per_s_at_50: float | None  # the database's CPU at 50%
    jobs_per_s_at_80: float | None
    target_rate: float | None
    service_ms: float | None  # per job, per slot: the handler's mean run time
    busy_slots: float | None  # Little's law: target_rate x service time
    processes: int | None  # worker processes for the target rate, each at `occupancy` of its slots
    occupancy: float = 0.8


def project(c: Costs, *, db_cores: float | None, target_rate: float | None = None,
            concurrency: float | None = None, occupancy: float = 0.8) -> Projection:
    """The database's ceiling at 50%/80% CPU, and the workers a target rate needs."""
    per_job_s = c.server_ms_per_job / 1000
    at50 = at80 = None
    if db_cores and per_job_s and not math.isnan(per_job_s):
        at50, at80 = 0.5 * db_cores / per_job_s, 0.8 * db_cores / per_job_s
    service = None if math.isnan(c.handler_ms) else c.handler_ms
    slots = processes = None
    per_process = concurrency or c.concurrency
    if target_rate and service is not None:
        slots = target_rate * service / 1000
        if per_process:
            processes = max(1, math.ceil(slots / (per_process * occupancy)))
    return Projection(db_cores, at50, at80, target_rate, service, slots, processes, occupancy)


def measure(conn: psycopg.Connection, seconds: float) -> Costs:
    """Costs over the next `seconds` of this database's life (sleeps in between: a CLI's wait)."""
    before = snapshot(conn)
    time.sleep(seconds)  # the measurement window itself, not a synchronisation
    return costs(before, snapshot(conn))


def report(c: Costs, p: Projection) -> dict[str, Any]:
    """Everything as one JSON-ready dict (NaN as None)."""
    def clean(value: Any) -> Any:
        if isinstance(value, float) and math.isnan(value):
            return None
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        return value
    return {"measured": clean({**asdict(c), "server_ms_per_job": c.server_ms_per_job}), "projection": clean(asdict(p))}


def format_report(c: Costs, p: Projection) -> str:
    """The report for people: what one job costs, then what it allows."""
    def num(value: float | None, unit: str = "", digits: int = 3) -> str:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "unknown"
        return f"{value:,.{digits}f}{unit}"
    lines = [f"measured over {c.seconds:.0f} s: {c.jobs:,.0f} jobs finished, {c.enqueued:,.0f} enqueued, "
             f"{c.workers} live workers"]
    if c.server_ms:
        lines.append("server time per job (pg_stat_statements, executor + planner): "
                     + ", ".join(f"{k} {num(v, ' ms')}" for k, v in c.server_ms.items())
                     + f"; total {num(c.server_ms_per_job, ' ms')}")
    else:
        lines.append("server time per job: unknown (pg_stat_statements is not loaded in this database: "
                     "add it to shared_preload_libraries and CREATE EXTENSION pg_stat_statements)")
    lines += [f"WAL per job: {num(c.wal_bytes_per_job, ' bytes', 0)}",
              f"dead tuples per job: {num(c.dead_tuples_per_job, '', 2)}",
              f"statements (round trips at most) per job: {num(c.statements_per_job, '', 3)}",
              f"handler mean run time: {num(c.handler_ms, ' ms')}"]
    if p.db_cores:
        lines.append(f"this database could carry about {num(p.jobs_per_s_at_50, ' jobs/s', 0)} at 50% of "
                     f"{p.db_cores:g} CPUs, {num(p.jobs_per_s_at_80, ' jobs/s', 0)} at 80% (executor time only: "
                     "an upper bound)")
    else:
        lines.append("database ceiling: pass --db-cores N (the database server's CPUs) to project it")
    if p.target_rate:
        lines.append(f"for {p.target_rate:,.0f} jobs/s with {num(p.service_ms, ' ms')} handlers: "
                     f"{num(p.busy_slots, ' busy slots', 1)} (Little's law), "
                     f"{p.processes if p.processes is not None else 'unknown'} worker processes "
                     f"at {p.occupancy:.0%} of their slots")
    return "\n".join(lines)
