"""The queue core: one function per job transition, each a single guarded statement.

Workers, the reaper, the CLI and the console call these; none of them writes job SQL of its own.
Every function takes a psycopg connection (autocommit or inside the caller's transaction).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from skiplock.core.error_summary import summarize
from skiplock.core.errors import InvalidTransition
from skiplock.core.records import ClaimedJob as ClaimedJob  # the names callers use: core.ClaimedJob
from skiplock.core.records import Outcome as Outcome  # and core.Outcome
from skiplock.core.sql import queries
from skiplock.core.status import HistoryMode, JobStatus, OutcomeStatus

JOBS_ACK_SQL = queries("jobs_ack")
JOBS_CLAIM_SQL = queries("jobs_claim")
JOBS_EDIT_SQL = queries("jobs_edit")
JOBS_MATCHING_SQL = queries("jobs_matching")
JOBS_OPERATOR_SQL = queries("jobs_operator")
JOBS_PRUNE_SQL = queries("jobs_prune")
JOBS_RUNNING_SQL = queries("jobs_running")
QUEUES_SQL = queries("queues")
STATS_SQL = queries("stats")
WORKFLOWS_SQL = queries("workflows")
WORKFLOW_REPAIR_SQL = queries("workflow_repair")

log = logging.getLogger("skiplock.core")

ANY_VERSION = 2**31 - 1  # the `versions` of a caller that runs any payload version (tests, tools)
CLAIM_RACE_RETRIES = 3  # claims again after losing a lock-key race; past this, the next turn does


def number_array(values: Sequence[int] | Sequence[float]) -> str:
    """Numbers as a PostgreSQL array literal, for a `%s::bigint[]`, `::int[]` or `::float8[]` parameter.

    psycopg dumps a list element by element in Python (a regex check per element for quoting): close
    to half of an ack's client CPU, on the worker's hot path. Numbers need no quoting and str.join runs
    in C; the server parses the literal through the statement's cast.
    """
    return "{" + ",".join(map(str, values)) + "}"


def claim_session(conn: psycopg.Connection) -> None:
    """Session settings for a connection that runs claims (the worker's claim connection).

    Bitmap scans off. The claim's LIMIT is a column of its `wanted` CTE, so the planner assumes a
    tenth of a queue's ready jobs will be read, and on a big table whose queues are interleaved
    (tests/benchmarks/growth.py) it chose a bitmap scan of every ready job and a sort over the
    ordered walk of jobs_ready_idx that stops after the batch: each claim read every ready row
    (EXPLAIN ANALYZE). Without bitmap scans the ordered index walk is the cheapest plan left; a
    claim has no use for a bitmap scan.

    Sequential scans and sorts off. The planner sizes jobs by its statistics' rows per page times
    its pages now. Right after a vacuum that found the queue empty (no live rows on a heap no vacuum
    truncates, migration 021) it believes jobs empty whatever arrives next, until the next ANALYZE,
    and every plan of a table "of one row" costs about the same. It then picked, for every claim:
    - a hash join of the claimed ids against a sequential scan of all of jobs (under load, a stall
      of every worker with PostgreSQL busy, right after an autovacuum);
    - a walk of all of jobs_unique_inflight (every queued and running job) and a sort, instead of
      the ordered walk of jobs_ready_idx that stops after the batch.
    The claim reads jobs by jobs_ready_idx (or jobs_tenant_ready_idx), in their order, and by
    primary key, at any size: it never needs a sequential scan of jobs or a sort of its rows (its
    sorts of the few rows it picked still run: no plan can do without them, so ruling sorts out
    adds the same to every plan's cost and only the needless one decides). tests/integration/test_claim_plan.py.
    Those settings give every claim plan a cost far past jit_above_cost, so JIT is turned off here
    too (every pooled connection has it off already, db.session_defaults): a connection set up with
    these settings alone compiled each claim, for far longer than the claim ran.

    A generic plan, always. Left to choose, PostgreSQL kept making a custom plan for every claim
    (planning longer than execution; pg_stat_statements, tests/benchmarks/growth.py), because the
    generic plan's estimate, made without the LIMIT's value, looks dearer. With the settings above
    (and the claimed ids reached by `id = ANY`, see jobs_claim.sql) the generic plan is the same index
    walk, and an ANALYZE or vacuum of jobs invalidates it, so it is re-made from fresh statistics
    (docs/benchmarks has the claim's latencies). A generic plan alone, without those settings, once
    collapsed a run from its start: it was the first plan above, made generic while jobs looked empty
    (auto_explain in the collapsed run: every claim walked all of jobs_pkey).
    """
    conn.execute("SET enable_bitmapscan = off")
    conn.execute("SET enable_seqscan = off")
    conn.execute("SET enable_sort = off")
    conn.execute("SET plan_cache_mode = force_generic_plan")
    conn.execute("SET jit = off")


def row_writes_session(conn: psycopg.Connection) -> None:
    """Session settings for the connection that writes a worker's own rows by id: ack batches (with
    their attempt history and snoozes), heartbeats and the shutdown release (their `f` lookup:
    core/sql/jobs_running.sql).

    A generic plan, always. psycopg prepares a statement on its 6th run on a connection; PostgreSQL
    then plans it for each call's values 5 times, and after that whenever such a custom plan is
    estimated cheaper than the generic one, as an ack of a few jobs is (the generic plan counts on
    10 ids per array). Every pooled connection planned the ack many times before settling, each plan
    costing nearly what its execution did (pg_stat_statements). These statements find each row by a
    probe per id whatever the values, so a plan made for the values buys nothing.

    No sequential scans. A plan kept for the connection's life must not depend on how big jobs
    was when it was made. Made while jobs was nearly empty (a vacuum between bursts), the cheapest
    plan scans it for every id, and keeps scanning once a backlog arrives until the next ANALYZE:
    PostgreSQL's own choice settled on such a plan after a few dozen single-job acks, and a burst
    after them drained several times slower, an ack taking seconds. With sequential scans off only
    the probes by primary key and by ctid are left, at any size (tests/integration/test_ack_plan.py).
    """
    conn.execute("SET plan_cache_mode = force_generic_plan")
    conn.execute("SET enable_seqscan = off")


def claim(
    conn: psycopg.Connection,
    worker_id: str,
    queues: Sequence[str],
    leases: Sequence[float],
    limit: int,
    *,
    payload_as_text: bool = False,
    with_context: bool = True,
    versions: Sequence[int] | None = None,
    limited: Collection[str] | None = None,
    tenant_after: Sequence[str | None] | None = None,
) -> list[ClaimedJob]:
    """queued -> running for up to `limit` ready jobs of `queues` (paused queues skipped).

    With `payload_as_text` each payload is left as its JSON text: the worker decodes it in the
    handler thread, off the claim loop that every job of the process waits behind. Without
    `with_context` only id, queue, payload, attempts (and version, tenant) come back (the
    worker's lean claim).
    Flow control (core/sql/jobs_claim.sql): `versions` are the newest payload version per queue this caller
    can run (default: any); `tenant_after` is where each queue's tenant round-robin starts;
    `limited` are the queues the caller believes have a queue_limits row (default: looked up).
    Limited queues are decided in the same one statement (skiplock_limit_allowances, migration
    018, locks their queue_limits rows); a limited queue the caller did not name is left out of
    this claim, never claimed past its limit.
    """
    if limit <= 0 or not queues:
        return []
    if not with_context:
        if not payload_as_text:
            raise ValueError("the lean claim returns payloads as text only")
        statement = JOBS_CLAIM_SQL.claim_lean_text
    else:
        statement = JOBS_CLAIM_SQL.claim_payload_text if payload_as_text else JOBS_CLAIM_SQL.claim
    params = {"queues": list(queues), "leases": number_array([float(x) for x in leases]),
              "versions": number_array(versions if versions is not None else [ANY_VERSION] * len(queues)),
              "tenant_after": list(tenant_after) if tenant_after is not None else [None] * len(queues),
              "limit": limit, "worker_id": worker_id,
              # with no cache of which queues are limited, let the statement look at all of them
              "limited": list(queues) if limited is None else [q for q in queues if q in limited]}
    for attempt in range(1, CLAIM_RACE_RETRIES + 1):
        try:
            # one statement, autocommit or the caller's transaction, limited queues or not
            rows = conn.execute(statement, params).fetchall()
            break
        except psycopg.errors.UniqueViolation as exc:
            # Two claims raced on one lock_key: the other committed between this statement's
            # snapshot and its advisory-lock check. The unique index refused the second running
            # row; the statement rolled back whole, so nothing is lost: claim again, and the new
            # snapshot sees the other run. (Outside a transaction of the caller's only.)
            if getattr(exc.diag, "constraint_name", None) != "jobs_lock_key_running" or \
                    conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                raise
            log.debug("claim raced another on a lock key (attempt %d); claiming again", attempt)
            rows = []
    # ClaimedJob(*row), not _make: a lean row has fewer fields than the tuple, the rest default
    return [ClaimedJob(*row) for row in rows]


def claim_plan(conn: psycopg.Connection, params: dict[str, Any]) -> Any:
    """The planner's plan (EXPLAIN, FORMAT JSON) of the claim for these parameters, not run (the doctor's)."""
    row = conn.execute("EXPLAIN (FORMAT JSON) " + JOBS_CLAIM_SQL.claim, params).fetchone()
    return row[0] if row else None


def heartbeat(
    conn: psycopg.Connection, worker_id: str, ids: Sequence[int], leases: Sequence[float]
) -> set[int]:
    """Extend leases of this worker's running jobs; return the ids whose lease is still ours."""
    if not ids:
        return set()
    rows = conn.execute(JOBS_RUNNING_SQL.heartbeat, {"ids": number_array(ids),
                                               "leases": number_array([float(x) for x in leases]),
                                               "worker_id": worker_id}).fetchall()
    return {row[0] for row in rows}


def write_progress(conn: psycopg.Connection, worker_id: str, reported: dict[int, tuple[float, str | None]]) -> None:
    """Write job.progress() reports of this worker's running jobs (fenced: others' rows are untouched)."""
    if not reported:
        return
    ids = list(reported)
    conn.execute(JOBS_RUNNING_SQL.progress, {"ids": number_array(ids), "fractions": [reported[i][0] for i in ids],
                                       "messages": [reported[i][1] for i in ids], "worker_id": worker_id})


# The ack statement of each history mode: they differ only in what a success does.
_ACK_BY_HISTORY = {HistoryMode.DELETE: JOBS_ACK_SQL.ack_batch, HistoryMode.KEEP: JOBS_ACK_SQL.ack_batch_keep,
                   HistoryMode.PARTITIONED: JOBS_ACK_SQL.ack_batch_to_history}


def ack_batch(
    conn: psycopg.Connection, worker_id: str, outcomes: Sequence[Outcome], *,
    history: HistoryMode | str = HistoryMode.DELETE,
) -> set[int]:
    """running -> deleted/succeeded/queued/dead/failed for a batch, fenced on this worker and run.

    Returns the ids actually written. An id missing from it lost its lease (reaped and maybe
    re-claimed, elsewhere or by this very worker as a newer attempt): its result is dropped,
    never written over the run that owns the job now.
    `history` says what a success does: delete the row, keep it as succeeded, or move it to jobs_history.
    """
    return ack_batch_with_keys(conn, worker_id, outcomes, history=history)[0]


def ack_batch_with_keys(
    conn: psycopg.Connection, worker_id: str, outcomes: Sequence[Outcome], *,
    history: HistoryMode | str = HistoryMode.DELETE,
) -> tuple[set[int], bool]:
    """ack_batch, and whether a written job had a lock key: the key's next job may be claimable now.

    Nothing else tells a worker so: no producer inserts it, so no NOTIFY comes, and a claim made
    before this ack committed passed it over (the key was still running). The worker claims again.
    """
    if not outcomes:
        return set(), False
    snoozed: set[int] = set()
    if any(o.status == OutcomeStatus.SNOOZED for o in outcomes):
        # rare, so a statement of their own keeps the hot ack statement as it is
        snoozed = snooze_batch(conn, worker_id, [o for o in outcomes if o.status == OutcomeStatus.SNOOZED])
        outcomes = [o for o in outcomes if o.status != OutcomeStatus.SNOOZED]
        if not outcomes:
            return snoozed, False
    ok = [o for o in outcomes if o.status == OutcomeStatus.OK]
    errors = [o for o in outcomes if o.status != OutcomeStatus.OK]
    record_attempts(conn, worker_id, [o for o in errors if o.error])  # each failure's error, kept on its job
    params = {
        "worker_id": worker_id,
        "ok_ids": number_array([o.job_id for o in ok]),
        "ok_attempts": number_array([o.attempt for o in ok]),
        "err_ids": number_array([o.job_id for o in errors]),
        "err_attempts": number_array([o.attempt for o in errors]),
        "err_status": [str(o.status) for o in errors],
        "err_delay": [float(o.delay) for o in errors],
        "err_text": [o.error for o in errors],
    }
    # the headline and group are computed here, once, by the one definition (worker/core/error_summary.py)
    summaries = [summarize(o.error) for o in errors]
    params["err_headline"] = [h for h, _ in summaries]
    params["err_group"] = [g for _, g in summaries]
    with_results = [o for o in ok if o.result is not None or o.result_error is not None]
    params["res_ids"] = number_array([o.job_id for o in with_results])
    params["res_values"] = [o.result for o in with_results]
    params["res_errors"] = [o.result_error for o in with_results]
    rows = conn.execute(_ACK_BY_HISTORY[HistoryMode(history)], params).fetchall()
    return {row[0] for row in rows} | snoozed, any(row[1] is not None for row in rows)


# Every failed attempt's error, kept on the job (jobs.attempt_errors, migration 012): a bounded JSON array,
# newest last, of the last KEEP_ATTEMPTS failed runs, each {attempt, worker, started, at, duration_ms, error}
# with the error cut to ERROR_CHARS. `started` is the run's claim (jobs.started_at, still this run's while its
# failure is written; older entries may lack it), `at` the ack. last_error stays as it is for
# SQL users. Runs whose lease expired (a crash) are not listed: the reaper's text in last_error says so.
KEEP_ATTEMPTS = 20
ERROR_CHARS = 2000


def record_attempts(conn: psycopg.Connection, worker_id: str, failures: Sequence[Outcome]) -> None:
    """Append each failed run's error to its job's bounded history, just before ack_batch writes the
    failures, with the same fence (this worker, this run, still running): a late result of a reaped run
    never adds a line."""
    if not failures:
        return
    conn.execute(JOBS_RUNNING_SQL.record_attempts, {
        "keep": KEEP_ATTEMPTS, "chars": ERROR_CHARS, "worker_id": worker_id,
        "ids": [o.job_id for o in failures], "attempts": [o.attempt for o in failures],
        "durations": [o.duration_ms for o in failures], "errors": [o.error for o in failures]})


def _give_back(conn: psycopg.Connection, worker_id: str, ids: Sequence[int], attempts: Sequence[int | None],
               delays: Sequence[float], snoozed: Sequence[bool]) -> list[tuple[int, str]]:
    """running -> queued with the claim's attempt given back, per row (core/sql/jobs_running.sql give_back):
    the one statement of a snooze, a shutdown's release and a lost hand-off. (id, queue) of each written."""
    if not ids:
        return []
    rows = conn.execute(JOBS_RUNNING_SQL.give_back, {
        "worker_id": worker_id, "ids": number_array(ids), "snoozed": list(snoozed),
        "attempts": "{" + ",".join("NULL" if a is None else str(a) for a in attempts) + "}",
        "delays": number_array([float(d) for d in delays])}).fetchall()
    return [(int(r[0]), str(r[1])) for r in rows]


def snooze_batch(conn: psycopg.Connection, worker_id: str, outcomes: Sequence[Outcome]) -> set[int]:
    """running -> queued later for snoozed runs (`raise Snooze(seconds)`), the claim's attempt given back;
    fenced like every ack (this worker, this run, still running), so a late result of a reaped run never
    touches the newer run. The ids written (a missing id lost its lease, as in ack_batch)."""
    given_back = _give_back(conn, worker_id, [o.job_id for o in outcomes], [o.attempt for o in outcomes],
                            [o.delay for o in outcomes], [True] * len(outcomes))
    return {job_id for job_id, _ in given_back}


def complete_statement(worker_id: str, job_id: int, attempt: int, *, history: str,
                       result: str | None = None, result_error: str | None = None) -> tuple[str, dict[str, Any]]:
    """The fenced ack of one successful run, to execute in the handler's own transaction.

    The same statement as ack_batch (so the same fence, history mode and job_stats counting),
    with one success and no failures; plain lists, so any driver (asyncpg too) can bind them.
    It returns the job's id when this run still owned the job, no row otherwise. `result` (JSON text)
    is stored with it, as the worker's ack stores a handler's return value.
    """
    statement = _ACK_BY_HISTORY[HistoryMode(history)]
    return statement, {"worker_id": worker_id, "ok_ids": [job_id], "ok_attempts": [attempt],
                       "err_ids": [], "err_attempts": [], "err_status": [], "err_delay": [], "err_text": [],
                       "err_headline": [], "err_group": [],
                       "res_ids": [job_id] if result is not None or result_error is not None else [],
                       "res_values": [result] if result is not None or result_error is not None else [],
                       "res_errors": [result_error] if result is not None or result_error is not None else []}


def release_own(conn: psycopg.Connection, worker_id: str, ids: Sequence[int]) -> list[int]:
    """running -> queued now, for this worker's unfinished jobs at graceful shutdown."""
    given_back = _give_back(conn, worker_id, ids, [None] * len(ids), [0.0] * len(ids), [False] * len(ids))
    return [job_id for job_id, _ in given_back]


def release_lost_handoffs(conn: psycopg.Connection, worker_id: str, known: Collection[int],
                          age: float) -> list[tuple[int, str]]:
    """running -> queued now for jobs running under `worker_id` for over `age` s that it does not know of:
    handed to it by the insert trigger and never received (features/handoff.py). That run never started,
    so its attempt is given back. (id, queue) of each."""
    lost = [r[0] for r in conn.execute(JOBS_RUNNING_SQL.lost_handoffs,
                                       {"worker_id": worker_id, "age": age, "known": list(known)})]
    return _give_back(conn, worker_id, lost, [None] * len(lost), [0.0] * len(lost), [False] * len(lost))


def _lease_lost(conn: psycopg.Connection, ids: Sequence[int],
                actors: Sequence[str | None]) -> list[tuple[int, str, str]]:
    """running -> queued, or dead on the last attempt, per row: an expired lease (actor None, re-checked)
    or an operator's release (core/sql/jobs_operator.sql lease_lost). (id, queue, new status) of each."""
    if not ids:
        return []
    rows = conn.execute(JOBS_OPERATOR_SQL.lease_lost, {"ids": list(ids), "actors": list(actors)}).fetchall()
    return [(r[0], r[1], str(r[2])) for r in rows]


def reap_expired(conn: psycopg.Connection, limit: int = 1000) -> list[tuple[int, str, str]]:
    """running with an expired lease -> queued, or dead on the last attempt. Returns (id, queue, status)."""
    with conn.transaction():  # the expired rows stay locked (SKIP LOCKED for other reapers) until moved
        expired = [r[0] for r in conn.execute(JOBS_OPERATOR_SQL.expired_leases, {"limit": limit})]
        rows = _lease_lost(conn, expired, [None] * len(expired))
    if rows:
        conn.execute(STATS_SQL.reaped_stats, {"queues": [r[1] for r in rows]})
    return rows


def release_running(conn: psycopg.Connection, ids: Sequence[int], actor: str) -> list[tuple[int, str, str]]:
    """Operator: running -> queued (or dead on the last attempt) without waiting for the lease."""
    rows = _lease_lost(conn, list(ids), [actor] * len(ids))
    _notify(conn, [r[1] for r in rows if r[2] == JobStatus.QUEUED])
    return rows


def retry_finished(conn: psycopg.Connection, ids: Sequence[int]) -> list[int]:
    """Operator: dead/failed -> queued now, attempts reset."""
    rows = conn.execute(JOBS_OPERATOR_SQL.retry_finished, {"ids": list(ids)}).fetchall()
    _notify(conn, [r[1] for r in rows])
    return [r[0] for r in rows]


def purge_finished(conn: psycopg.Connection, ids: Sequence[int]) -> list[int]:
    """Operator: delete dead/failed jobs."""
    return [r[0] for r in conn.execute(JOBS_OPERATOR_SQL.purge_finished, {"ids": list(ids)}).fetchall()]


def cancel_queued(conn: psycopg.Connection, ids: Sequence[int], actor: str) -> list[int]:
    """Operator: queued -> failed (cancelled), so it never runs."""
    return [r[0] for r in conn.execute(JOBS_OPERATOR_SQL.cancel_queued, {"ids": list(ids), "actor": actor})]


def run_now(conn: psycopg.Connection, ids: Sequence[int]) -> list[int]:
    """Operator: a scheduled queued job becomes ready now."""
    rows = conn.execute(JOBS_OPERATOR_SQL.run_now, {"ids": list(ids)}).fetchall()
    _notify(conn, [r[1] for r in rows])
    return [r[0] for r in rows]


def request_cancel(conn: psycopg.Connection, ids: Sequence[int], actor: str) -> list[int]:
    """Operator: ask running jobs' handlers to stop (features/cancel.py); the ids that were running."""
    return [r[0] for r in conn.execute(JOBS_OPERATOR_SQL.request_cancel, {"ids": list(ids), "actor": actor})]


def edit_queued(conn: psycopg.Connection, job_id: int, queue: str, payload_json: str, priority: int,
                run_at: datetime | None) -> bool:
    """Operator: a queued job's new queue, payload (JSON text), priority and run_at (None: now), as
    features/job_edit.py checked them; False if it is no longer queued."""
    row = conn.execute(JOBS_EDIT_SQL.edit_queued, {"id": job_id, "queue": queue, "payload": payload_json,
                                                   "priority": priority, "run_at": run_at}).fetchone()
    if row is not None:
        _notify(conn, [row[1]])  # a job made ready now wakes an idle worker of its (new) queue
    return row is not None


def write_dead_payload(conn: psycopg.Connection, job_id: int, payload: Any) -> bool:
    """Operator: a dead job's new payload (features/payload_edit.py, which retries it next); False if not dead."""
    return conn.execute(JOBS_OPERATOR_SQL.write_dead_payload, {"id": job_id, "new": Jsonb(payload)}).rowcount == 1


def settle_parents(conn: psycopg.Connection, ids: Sequence[int], states: Sequence[str],
                   heads: Sequence[str | None]) -> None:
    """Workflow repair: settle final parents the normal path missed (releases or ends their dependents)."""
    conn.execute(WORKFLOW_REPAIR_SQL.settle, {"ids": list(ids), "states": list(states),
                                              "batches": [None] * len(ids), "heads": list(heads)})


def recount_waiting(conn: psycopg.Connection, ids: Sequence[int]) -> list[tuple[int, str, str]]:
    """Workflow repair: waiting jobs' open edges recounted, those with none queued. (id, queue, status)."""
    rows = conn.execute(WORKFLOW_REPAIR_SQL.recount_waiting, {"ids": list(ids)}).fetchall()
    _notify(conn, [r[1] for r in rows if r[2] == JobStatus.QUEUED])
    return [(r[0], r[1], r[2]) for r in rows]


def recount_batch(conn: psycopg.Connection, batch_id: int) -> None:
    """Workflow repair: a batch's counters recounted from its members, then called back if that made it done."""
    conn.execute(WORKFLOW_REPAIR_SQL.recount_batch, {"batch": batch_id}).fetchall()


def call_back_batch(conn: psycopg.Connection, batch_id: int) -> bool:
    """Workflow repair: enqueue a done batch's callbacks if it has not yet; True if it did now."""
    row = conn.execute(WORKFLOW_REPAIR_SQL.call_back, {"batch": batch_id}).fetchone()
    return bool(row and row[0])


def pause_queue(conn: psycopg.Connection, queue: str, actor: str) -> bool:
    """Stop every worker from claiming `queue`; True if it was not paused before."""
    return conn.execute(QUEUES_SQL.pause_queue, {"queue": queue, "actor": actor}).fetchone() is not None


def resume_queue(conn: psycopg.Connection, queue: str) -> bool:
    """Let workers claim `queue` again; True if it was paused."""
    resumed = conn.execute(QUEUES_SQL.resume_queue, {"queue": queue}).fetchone() is not None
    if resumed:
        _notify(conn, [queue])
    return resumed


@dataclass(frozen=True)
class FinishedFilter:
    """Which finished jobs an operator's "all matching" action covers (None = any)."""

    status: str = JobStatus.DEAD.value  # JobStatus.DEAD or FAILED: the states retry and purge accept
    queue: str | None = None
    since: datetime | None = None  # finished at or after
    until: datetime | None = None  # finished at or before (the moment the operator confirmed)
    error: str | None = None  # exact error group (skiplock/core/error_summary.py), as the console lists it
    text: str | None = None  # substring of unique_key, payload or last_error

    def params(self) -> dict[str, Any]:
        """Bind parameters for the filter of core/sql/jobs_matching.sql."""
        if self.status not in (JobStatus.DEAD, JobStatus.FAILED):
            raise InvalidTransition(f"only dead or failed jobs can be retried or purged, not {self.status!r}")
        # ILIKE wildcards typed by the operator are matched literally
        text = None
        if self.text:
            text = "%" + self.text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        return {"status": self.status, "queue": self.queue, "since": self.since, "until": self.until,
                "error": self.error, "text": text}


def count_finished_matching(conn: psycopg.Connection, flt: FinishedFilter, cap: int = 1_000_000) -> int:
    """How many jobs `flt` covers, counting at most `cap` (what a bulk confirmation states)."""
    return int(conn.execute(JOBS_MATCHING_SQL.count_finished_matching, {**flt.params(), "cap": cap}).fetchone()[0])  # type: ignore[index]


def list_finished_matching(conn: psycopg.Connection, flt: FinishedFilter, limit: int = 50) -> list[dict[str, Any]]:
    """The newest `limit` jobs `flt` covers: id, queue, status, finished_at, attempts, max_attempts, error."""
    cur = conn.cursor(row_factory=dict_row)
    return cur.execute(JOBS_MATCHING_SQL.list_finished_matching, {**flt.params(), "limit": limit}).fetchall()


def count_finished_ids(conn: psycopg.Connection, ids: Sequence[int]) -> int:
    """How many of `ids` are dead or failed: what retry_finished or purge_finished would change now."""
    return int(conn.execute(JOBS_OPERATOR_SQL.count_finished_ids, {"ids": list(ids)}).fetchone()[0])  # type: ignore[index]


def job_detail(conn: psycopg.Connection, job_id: int) -> dict[str, Any] | None:
    """One job's columns as an operator reads them, or None when there is no such job."""
    cur = conn.cursor(row_factory=dict_row)
    return cur.execute(JOBS_OPERATOR_SQL.job_detail, {"id": job_id}).fetchone()


def retry_matching(conn: psycopg.Connection, flt: FinishedFilter, batch: int = 1000) -> int:
    """Operator: dead/failed -> queued for every job `flt` covers, in batches of `batch` ids."""
    return _bulk_matching(conn, retry_finished, flt, batch)


def purge_matching(conn: psycopg.Connection, flt: FinishedFilter, batch: int = 1000) -> int:
    """Operator: delete every dead/failed job `flt` covers, in batches of `batch` ids."""
    return _bulk_matching(conn, purge_finished, flt, batch)


def _bulk_matching(conn: psycopg.Connection, change: Callable[[psycopg.Connection, Sequence[int]], list[int]],
                   flt: FinishedFilter, batch: int) -> int:
    # Each batch is its own short transaction (the pool's connections are autocommit), so a 100,000-job
    # purge never holds one huge transaction or locks the whole set at once; the batch's ids stay locked
    # from their selection to their change, which is the same statement as for chosen ids.
    params = flt.params()
    after, total = 0, 0
    while True:
        with conn.transaction():
            ids = [r[0] for r in conn.execute(JOBS_MATCHING_SQL.finished_matching_batch,
                                              {**params, "after": after, "limit": batch})]
            total += len(change(conn, ids)) if ids else 0
        if len(ids) < batch:
            return total
        after = max(ids)


def _notify(conn: psycopg.Connection, queues: Sequence[str]) -> None:
    if queues:
        conn.execute(JOBS_OPERATOR_SQL.notify_queues, {"queues": sorted(set(queues))})


def prune_finished(conn: psycopg.Connection, status: str, older_than: float, limit: int) -> int:
    """Pruner: delete up to `limit` jobs in final `status` finished over `older_than` seconds ago."""
    if status not in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.DEAD):
        raise ValueError(f"only finished jobs are pruned, not {status!r}")
    cur = conn.execute(JOBS_PRUNE_SQL.prune_finished, {"status": status, "older_than": older_than, "limit": limit})
    return cur.rowcount


def prune_results(conn: psycopg.Connection, older_than: float, limit: int) -> int:
    """Delete up to `limit` stored results older than `older_than` seconds (SKIPLOCK_RESULT_TTL)."""
    return conn.execute(WORKFLOWS_SQL.prune_results, {"older_than": older_than, "limit": limit}).rowcount


def prune_stats(conn: psycopg.Connection, older_than: float, limit: int) -> int:
    """Pruner: fold up to `limit` per-minute stats rows older than `older_than` seconds into the totals."""
    row = conn.execute(STATS_SQL.prune_stats, {"older_than": older_than, "limit": limit}).fetchone()
    return int(row[0]) if row else 0
