"""Every SQL statement that changes jobs, and the queue core's reads of them, in one place.

The queue's own (enqueue, claim, ack, the operator's transitions) and those of the core's features that
change jobs (attempts, snooze, cancel, hand-off): a feature module keeps its rules and calls its statements
here. Nothing outside this module writes jobs but the benchmark's bulk seeding (tools/bench_seed.py);
tests/unit/test_layers.py checks it. A few reads of jobs stay beside what they serve: a feature's view
that joins its own table (features/limits.py), the tracing plumbing's stored contexts (plumbing/tracing.py),
the monitor's and the console's read-only views.

Each statement names the state it expects (and, for a worker, its worker_id) so that a
transition can only happen from where the caller believes the job is: a zero row count means
someone else moved it, and the caller drops its stale result (seed 001's double completion).
Parameters are always bound, never formatted into the text.
"""

from __future__ import annotations

import re

# ---- producers ---------------------------------------------------------------------------------

# What enqueue(unique_key=k, on_conflict=...) does when a job with that key is still in flight
# (queued or running). Each is one INSERT ... ON CONFLICT, so two producers racing on one key
# leave one job (the unique index arbitrates; chancy#51 raced a read-then-write instead).
# - ignore: nothing changes, no row returned (enqueue returns None).
# - bump: the queued job's run_at becomes the later of the two (seed 000's "coalesce or bump
#   schedule", a debounce); its id is returned. A running job is left alone: no row.
# - replace: the queued job takes the new payload, its version and run_at; its id is returned.
#   A running job is left alone: no row.
ON_CONFLICT = {
    "ignore": "DO NOTHING",
    "bump": "DO UPDATE SET run_at = greatest(jobs.run_at, EXCLUDED.run_at) WHERE jobs.status = 'queued'",
    "replace": ("DO UPDATE SET payload = EXCLUDED.payload, version = EXCLUDED.version, run_at = EXCLUDED.run_at "
                "WHERE jobs.status = 'queued'"),
}
_UNIQUE_ARBITER = "ON CONFLICT (unique_key) WHERE status IN ('queued', 'running')"


def enqueue_statement(*, unique: bool, on_conflict: str = "ignore", traced: bool = False) -> str:
    """The INSERT of one job: with the unique_key arbiter and its on_conflict action when `unique`,
    with the trace_context column when `traced`. The NOTIFY that wakes workers comes from the
    statement trigger, not from here."""
    columns = "queue, payload, priority, run_at, max_attempts, lock_key, tenant, version"
    values = ("%(queue)s, %(payload)s::jsonb, %(priority)s, coalesce(%(run_at)s, now()), %(max_attempts)s, "
              "%(lock_key)s, %(tenant)s, %(version)s")
    if unique:
        columns += ", unique_key"
        values += ", %(unique_key)s"
    if traced:
        columns += ", trace_context"
        values += ", %(trace_context)s::jsonb"
    conflict = f"\n{_UNIQUE_ARBITER} {ON_CONFLICT[on_conflict]}" if unique else ""
    return f"INSERT INTO jobs ({columns})\nVALUES ({values}){conflict}\nRETURNING id\n"


# Insert one job; a unique_key already in flight collapses the insert (returns no row).
ENQUEUE = enqueue_statement(unique=True)
# The same without a unique_key: a plain INSERT. ON CONFLICT costs a speculative insertion even
# when the key is NULL and can never conflict (~10% of the one-job-per-transaction path).
ENQUEUE_PLAIN = enqueue_statement(unique=False)

# Insert many jobs in one statement from parallel arrays; collapsed unique keys return no row.
# WITH ORDINALITY keeps input order so callers can map returned ids back to their inputs.
ENQUEUE_MANY = """
INSERT INTO jobs (queue, payload, priority, run_at, unique_key, max_attempts, lock_key, tenant, version)
SELECT q, p::jsonb, pr, coalesce(ra, now()), uk, ma, lk, tn, vn
  FROM unnest(%(queues)s::text[], %(payloads)s::text[], %(priorities)s::int[],
              %(run_ats)s::timestamptz[], %(unique_keys)s::text[], %(max_attempts)s::int[],
              %(lock_keys)s::text[], %(tenants)s::text[], %(versions)s::int[])
       WITH ORDINALITY AS v(q, p, pr, ra, uk, ma, lk, tn, vn, ord)
 ORDER BY ord
ON CONFLICT (unique_key) WHERE status IN ('queued', 'running') DO NOTHING
RETURNING id
"""

# enqueue_many's COPY path for big batches of plain jobs: ids reserved first (COPY returns
# none), then every row streamed in one COPY; run_at, status and the rest take their defaults.
# The sequence is looked up once (MATERIALIZED): written inline, pg_get_serial_sequence ran per
# row and took ~80% of this statement (160-250 ms vs ~25 ms for 20,000 ids here). One array, one row.
RESERVE_JOB_IDS = """
WITH seq AS MATERIALIZED (SELECT pg_get_serial_sequence('jobs', 'id')::regclass AS s)
SELECT array_agg(nextval(seq.s)) FROM seq, generate_series(1, %(n)s)
"""
COPY_JOBS = "COPY jobs (id, queue, payload, priority, max_attempts, version) FROM STDIN"

# ---- workers -----------------------------------------------------------------------------------

# Claim up to %(limit)s ready jobs from the given queues for one worker, in one statement.
# Everything flow control decides happens here, in SQL (issue 15), never in a loop that claims a
# job it cannot run and puts it back:
# - wanted: the queues to claim from, minus paused ones, each with the newest payload version this
#   worker knows and its allowance: %(limit)s, or for a limited queue what its concurrency limit
#   (running jobs counted now) and its token bucket leave. The queues the caller believes limited
#   (%(limited)s, its cache of queue_limits) go through skiplock_limit_allowances() (migration
#   018), which locks their queue_limits rows and counts under that lock, in this one statement.
#   A limited queue it could not lock (another claim holds it), or one the caller did not name, is
#   left out of this claim: never claimed past its limit.
# - head: per queue, a LATERAL walk of jobs_ready_idx in (priority DESC, run_at, id) order with
#   SKIP LOCKED, as before flow control. A job of a newer version than the worker knows is passed
#   over (left for a newer worker). A job with a lock_key is passed over while its key has a
#   running job (a probe of jobs_lock_key_running) or while another claim in flight holds the
#   key's transaction-scoped advisory lock (taken here: two concurrent claims skip each other).
# - tenant_hops/by_tenant: skiplock_tenant_hops() (migration 009) hops from tenant to tenant over
#   jobs_tenant_ready_idx (starting after the worker's %(tenant_after)s, wrapping round, at most
#   TENANT_HOPS of them) and by_tenant reads each tenant's first ready jobs, so a small
#   tenant's jobs are candidates even behind another tenant's 100,000. A queue without tenants
#   costs one function call and one empty index probe.
# - picked: one job per lock_key (the best in order), each tenant's jobs ranked (`turn`), each
#   queue's allowance; then the best %(limit)s by (turn, priority DESC, run_at, id). Without
#   tenants every job has one partition, so `turn` follows the plain order exactly.
# The CTEs are the optimisation fence that makes Postgres lock only rows it will update.
# The claimed rows come back in that same order (the worker starts them in it): RETURNING alone
# follows the join's order, which the planner may change with the statistics.
TENANT_HOPS = 256  # most tenants of one queue one claim looks at; the worker's cursor rotates past them
LOCK_KEY_CLASS = 1936419947  # advisory lock namespace for lock keys ('sklk'), beside hashtext(lock_key)
_KEY_FREE = f"""NOT EXISTS (SELECT 1 FROM jobs r
                           WHERE r.lock_key = j.lock_key AND r.status = 'running' AND r.lock_key IS NOT NULL)
                 AND pg_try_advisory_xact_lock({LOCK_KEY_CLASS}, hashtext(j.lock_key))"""
_CLAIM = f"""
WITH allowances AS MATERIALIZED (
    -- a one-time filter: a claim of unlimited queues only never calls the function
    SELECT a.queue, a.allow FROM skiplock_limit_allowances(%(limited)s::text[], %(limit)s::int) a
     WHERE cardinality(%(limited)s::text[]) > 0
), wanted AS MATERIALIZED (
    SELECT w.queue, w.lease, w.version, w.tenant_after, coalesce(a.allow, %(limit)s::int) AS allow
      FROM unnest(%(queues)s::text[], %(leases)s::float8[], %(versions)s::int[], %(tenant_after)s::text[])
           AS w(queue, lease, version, tenant_after)
      LEFT JOIN allowances a ON a.queue = w.queue
      LEFT JOIN queue_limits l ON l.queue = w.queue AND (l.concurrency IS NOT NULL OR l.rate IS NOT NULL)
     WHERE NOT EXISTS (SELECT 1 FROM paused_queues p WHERE p.queue = w.queue)
       AND (l.queue IS NULL OR a.queue IS NOT NULL)
), head AS (
    SELECT c.id, c.queue, c.priority, c.run_at, c.lock_key, c.tenant, wanted.lease, wanted.allow
      FROM wanted
      CROSS JOIN LATERAL (
          SELECT j.id, j.queue, j.priority, j.run_at, j.lock_key, j.tenant
            FROM jobs j
           WHERE j.queue = wanted.queue AND j.status = 'queued' AND j.run_at <= now()
             AND j.version <= wanted.version
             AND (j.lock_key IS NULL OR ({_KEY_FREE}))
           ORDER BY j.priority DESC, j.run_at, j.id
           LIMIT wanted.allow
             FOR UPDATE SKIP LOCKED
      ) c
     WHERE wanted.allow > 0
), tenant_hops AS (
    SELECT w.queue, h.tenant
      FROM wanted w
      CROSS JOIN LATERAL skiplock_tenant_hops(w.queue, w.tenant_after, {TENANT_HOPS}) AS h(tenant)
     WHERE w.allow > 0
), tenant_counts AS (
    SELECT queue, count(*) AS tenants FROM tenant_hops GROUP BY queue
), by_tenant AS (
    SELECT c.id, c.queue, c.priority, c.run_at, c.lock_key, c.tenant, w.lease, w.allow
      FROM tenant_hops h
      JOIN wanted w ON w.queue = h.queue
      JOIN tenant_counts n ON n.queue = h.queue
      CROSS JOIN LATERAL (
          SELECT j.id, j.queue, j.priority, j.run_at, j.lock_key, j.tenant
            FROM jobs j
           WHERE j.queue = h.queue AND j.tenant = h.tenant AND j.status = 'queued' AND j.run_at <= now()
             AND j.version <= w.version
             AND (j.lock_key IS NULL OR ({_KEY_FREE}))
           ORDER BY j.priority DESC, j.run_at, j.id
           LIMIT ceil(w.allow::float8 / n.tenants)::int
             FOR UPDATE SKIP LOCKED
      ) c
), candidates AS (
    SELECT * FROM head
    UNION
    SELECT * FROM by_tenant
), one_per_key AS (
    SELECT c.*, row_number() OVER (PARTITION BY c.lock_key ORDER BY c.priority DESC, c.run_at, c.id) AS key_rank
      FROM candidates c
), ranked AS (
    SELECT k.*, row_number() OVER (PARTITION BY k.tenant ORDER BY k.priority DESC, k.run_at, k.id) AS turn
      FROM one_per_key k
     WHERE k.lock_key IS NULL OR k.key_rank = 1
), picked AS (
    -- Two branches, each behind a one-time filter, so only one runs. Without tenant jobs and
    -- without keyed candidates (the common case) the plain order is the answer: none of the
    -- window functions' sorts, which cost ~30 percent of a 50-job claim measured here.
    (SELECT h.id, h.lease, 1::bigint AS turn
       FROM head h
      WHERE NOT EXISTS (SELECT 1 FROM by_tenant) AND NOT EXISTS (SELECT 1 FROM head k WHERE k.lock_key IS NOT NULL)
      ORDER BY h.priority DESC, h.run_at, h.id
      LIMIT %(limit)s)
    UNION ALL
    (SELECT q.id, q.lease, q.turn
       FROM (SELECT r.*, row_number() OVER (PARTITION BY r.queue ORDER BY r.turn, r.priority DESC, r.run_at, r.id)
                         AS queue_rank
               FROM ranked r) q
      WHERE q.queue_rank <= q.allow
        AND (EXISTS (SELECT 1 FROM by_tenant) OR EXISTS (SELECT 1 FROM head k WHERE k.lock_key IS NOT NULL))
      ORDER BY q.turn, q.priority DESC, q.run_at, q.id
      LIMIT %(limit)s)
), claimed AS (
    UPDATE jobs j
       SET status = 'running',
           attempts = j.attempts + 1,
           started_at = now(),
           lease_until = now() + make_interval(secs => picked.lease),
           worker_id = %(worker_id)s
      FROM picked
     WHERE j.id = picked.id
       -- the same ids once more, as an array: jobs is then reached by its primary key for exactly
       -- these ids whatever the statistics say. Planned while jobs looked empty (a vacuum had
       -- just found the queue empty), the join alone was run as a walk of all of jobs_pkey with
       -- `picked` re-read per row: 335 ms per claim of 50 from 20,000 jobs (tests/integration/test_claim_plan.py)
       AND j.id = ANY (ARRAY(SELECT id FROM picked))
    RETURNING picked.turn, j.id, j.queue, j.payload{{payload_cast}} AS payload, j.attempts, j.max_attempts,
              j.version, j.tenant, j.priority, j.run_at, j.created_at, j.started_at, j.unique_key
), spent AS (
    -- rate-limited queues' token buckets: refilled for the time since, less what was claimed now
    UPDATE queue_limits l
       SET tokens = least(l.burst, l.tokens + l.rate * extract(epoch FROM now() - l.refilled_at)) - c.n,
           refilled_at = now()
      FROM (SELECT queue, count(*) AS n FROM claimed GROUP BY queue) c
     WHERE l.queue = c.queue AND l.rate IS NOT NULL AND l.queue IN (SELECT queue FROM allowances)
)
SELECT {{columns}} FROM claimed ORDER BY turn, priority DESC, run_at, id
"""
_CONTEXT_COLUMNS = ("id, queue, payload, attempts, max_attempts, version, tenant, "
                    "priority, run_at, created_at, started_at, unique_key")
# What a worker needs to run a job and decide its outcome; the rest is a handler's JobContext.
_LEAN_COLUMNS = "id, queue, payload, attempts, max_attempts, version, tenant"


def compact(statement: str) -> str:
    """`statement` without its comments and with its whitespace squeezed: the same SQL, shorter.

    psycopg caches the conversion of a query's %(name)s placeholders only for texts of up to 4096
    characters (psycopg._queries.MAX_CACHED_STATEMENT_LENGTH). Longer ones are parsed with a regex on
    every execute: the claim, 5,700 characters with its comments, cost ~40 us of the worker's client
    CPU per claim (~160 of it in all, measured on an empty queue; a batch of jobs makes about six
    claims). Only for texts whose quoted strings hold no spaces, '--' or punctuation (the claim's hold
    status names): squeezing would change those strings, so such a text is refused.
    """
    without_comments = re.sub(r"--[^\n]*", "", statement)  # (comments may hold apostrophes)
    literals = re.findall(r"'[^']*'", without_comments)
    if without_comments.count("'") % 2 or any(re.search(r"\W", text[1:-1]) for text in literals):
        raise ValueError("compact() would change a quoted string of this statement")
    squeezed = re.sub(r"\s+", " ", without_comments).strip()
    return re.sub(r" ?([(),=<>]) ?", r"\1", squeezed)  # no space is needed beside these


CLAIM = compact(_CLAIM.replace("{payload_cast}", "").replace("{columns}", _CONTEXT_COLUMNS))
# The same claim with each payload as its JSON text, for the worker: it decodes in the handler
# thread, off the claim loop that every job of the process waits behind.
CLAIM_PAYLOAD_TEXT = compact(_CLAIM.replace("{payload_cast}", "::text").replace("{columns}", _CONTEXT_COLUMNS))
# ... and without the JobContext columns, for a worker whose handlers never ask for `job`:
# decoding four timestamps per row was half of the claim's client CPU (~110 of ~210 us per 50).
CLAIM_LEAN_TEXT = compact(_CLAIM.replace("{payload_cast}", "::text").replace("{columns}", _LEAN_COLUMNS))

# The limits of the given queues (the worker's cache of which queues need LOCK_LIMITED).
LIMITS_OF = """
SELECT queue, concurrency, rate, burst FROM queue_limits
 WHERE queue = ANY(%(queues)s::text[]) AND (concurrency IS NOT NULL OR rate IS NOT NULL)
"""

# ---- rows this worker owns, addressed by id: heartbeat, ack batch, release ---------------------
# Heartbeats, acks and releases name their rows by id, a few hundred at most, and each row must be found
# by a primary-key probe. Left to itself the planner does not always do that: statistics taken
# while few jobs ran (a backlog just enqueued, autovacuum behind) say one row is running and
# owned by this worker, so it walked all of jobs_lease_idx (now jobs_running_idx; 0.2-1.4 s per ack in the seed
# recipe), or scanned the table, or joined the batch against a whole-index scan re-reading the
# batch per row (6-12 ms per 100-row ack, half a drain's database time). So the rows are looked
# up in a LATERAL subquery per id (OFFSET 0 keeps it from being flattened into a join, so each
# lookup is its own probe by id) and the statement then touches exactly those row versions by
# ctid. `status::text` hides jobs_running_idx's predicate from that lookup.
# The lookup is not locked: if another transaction (the reaper, an operator) changes a row
# after it was read, the UPDATE/DELETE re-checks `ctid = f.ctid` against the new version,
# which has moved, so the row is skipped - exactly what the fence would decide.
def _own_rows(with_attempt: bool) -> str:
    """A LATERAL lookup `f` of v.id's row if this worker runs it (in attempt v.attempt: the fence)."""
    attempt = " AND x.attempts = v.attempt" if with_attempt else ""
    return (f"CROSS JOIN LATERAL (SELECT x.ctid FROM jobs x WHERE x.id = v.id{attempt} "
            f"AND x.worker_id = %(worker_id)s AND x.status::text = 'running' OFFSET 0) f")


# Extend the leases of this worker's running jobs; ids missing from the result lost their lease.
HEARTBEAT = f"""
UPDATE jobs j
   SET lease_until = now() + make_interval(secs => v.lease)
  FROM unnest(%(ids)s::bigint[], %(leases)s::float8[]) AS v(id, lease)
       {_own_rows(with_attempt=False)}
 WHERE j.ctid = f.ctid
RETURNING j.id
"""

# ---- the ack batch: one statement per flush ---------------------------------------------------
# Every branch is fenced on worker_id, status AND attempt: a result is written only while the run
# that produced it still owns the job. Without the attempt, a worker that re-claimed its own
# reaped job could have an older run's late result written over the newer run.
# Three variants differ only in what a success does (delete / keep as succeeded / move to
# jobs_history); failures, the per-minute stats and the returned ids are shared.

# The successful runs of the batch, as (id, attempt) rows, each with its fenced row `f`.
_OK_RUNS = f"""unnest(%(ok_ids)s::bigint[], %(ok_attempts)s::int[]) AS v(id, attempt)
           {_own_rows(with_attempt=True)}"""
_FENCE = "j.ctid = f.ctid"


def settle_finals(source: str) -> str:
    """A `settled` CTE: the jobs of CTE `source` (id, state, batch_id, head) that reached a final state,
    passed to skiplock_settle() (migration 026) in this same statement - their dependents are released
    or ended and their batches counted down with the transition itself. Until anything was ever linked
    (the skiplock_linked flag) the function is not even called. One row, to be joined by the caller's
    final SELECT: a CTE nobody reads is not run."""
    ordered = f"FROM {source} ORDER BY id"
    return f""", settled AS MATERIALIZED (
    SELECT CASE WHEN pg_sequence_last_value('skiplock_linked') IS NOT NULL
                THEN skiplock_settle(ARRAY(SELECT id {ordered}), ARRAY(SELECT state::text {ordered}),
                                     ARRAY(SELECT batch_id {ordered}), ARRAY(SELECT head {ordered})) END AS n
)"""

# The successful runs' rows deleted (the delete and the move-to-history variants share it).
_DELETE_OK_RUNS = f"""DELETE FROM jobs j
     USING {_OK_RUNS}
     WHERE {_FENCE}"""

# Successes deleted (the default: no history, least write amplification, seed 000).
_ACK_OK_DELETE = f"""
ok AS (
    {_DELETE_OK_RUNS}
    RETURNING j.id, j.queue, j.lock_key, j.batch_id
)"""

# Successes kept as 'succeeded' rows (SKIPLOCK_HISTORY_MODE=keep); the pruner removes them later.
_ACK_OK_KEEP = f"""
ok AS (
    UPDATE jobs j
       SET status = 'succeeded', finished_at = now(), lease_until = NULL
      FROM {_OK_RUNS}
     WHERE {_FENCE}
    RETURNING j.id, j.queue, j.lock_key, j.batch_id
)"""

# Successes moved to the monthly-partitioned jobs_history (SKIPLOCK_HISTORY_MODE=partitioned):
# DELETE ... RETURNING feeds the INSERT in the same statement, so a row is never in both or neither.
_ACK_OK_MOVE = f"""
moved AS (
    {_DELETE_OK_RUNS}
    RETURNING j.*
), archived AS (
    INSERT INTO jobs_history (id, queue, priority, run_at, created_at, started_at, finished_at,
                              attempts, max_attempts, unique_key, worker_id, last_error, payload, status)
    SELECT id, queue, priority, run_at, created_at, started_at, now(),
           attempts, max_attempts, unique_key, worker_id, last_error, payload, 'succeeded'
      FROM moved
), ok AS (
    SELECT id, queue, lock_key, batch_id FROM moved
)"""

# Failures: requeued with their backoff, or finished as dead/failed; then the stats row.
_ACK_ERRORS_AND_STATS = f"""
errored AS (
    UPDATE jobs j
       SET status = v.status::job_status,
           run_at = CASE WHEN v.status = 'queued' THEN now() + make_interval(secs => v.delay)
                         ELSE j.run_at END,
           finished_at = CASE WHEN v.status = 'queued' THEN NULL ELSE now() END,
           last_error = v.error,
           error_headline = v.headline,
           error_group = v.grp,
           worker_id = NULL,
           lease_until = NULL,
           progress = NULL  -- a new attempt reports its own
      FROM unnest(%(err_ids)s::bigint[], %(err_attempts)s::int[], %(err_status)s::text[],
                  %(err_delay)s::float8[], %(err_text)s::text[], %(err_headline)s::text[], %(err_group)s::text[])
           AS v(id, attempt, status, delay, error, headline, grp)
           {_own_rows(with_attempt=True)}
     WHERE {_FENCE}
    RETURNING j.id, j.queue, v.status, j.lock_key, j.batch_id, v.headline
), stats AS (
    INSERT INTO job_stats (minute, queue, worker_id, completed, retried, failed, dead)
    SELECT date_trunc('minute', now()), s.queue, %(worker_id)s,
           count(*) FILTER (WHERE s.outcome = 'ok'),
           count(*) FILTER (WHERE s.outcome = 'queued'),
           count(*) FILTER (WHERE s.outcome = 'failed'),
           count(*) FILTER (WHERE s.outcome = 'dead')
      FROM (SELECT queue, 'ok' AS outcome FROM ok
            UNION ALL SELECT queue, status FROM errored) s
     GROUP BY s.queue
    ON CONFLICT (minute, queue, worker_id) DO UPDATE
       SET completed = job_stats.completed + EXCLUDED.completed,
           retried = job_stats.retried + EXCLUDED.retried,
           failed = job_stats.failed + EXCLUDED.failed,
           dead = job_stats.dead + EXCLUDED.dead
), results AS (
    -- handlers' return values, stored with the success they belong to (fenced: only rows in `ok`)
    -- (or, for a value too large to keep, why it was not stored: skiplock.result() says so)
    INSERT INTO job_results (job_id, state, result, error)
    SELECT r.id, 'succeeded', r.value::jsonb, r.error
      FROM unnest(%(res_ids)s::bigint[], %(res_values)s::text[], %(res_errors)s::text[]) AS r(id, value, error)
     WHERE r.id IN (SELECT id FROM ok)
    ON CONFLICT (job_id) DO UPDATE SET state = EXCLUDED.state, result = EXCLUDED.result, error = EXCLUDED.error,
                                      finished_at = now()
), finals AS MATERIALIZED (
    SELECT id, 'succeeded' AS state, batch_id, NULL::text AS head FROM ok
    UNION ALL
    SELECT id, status, batch_id, headline FROM errored WHERE status IN ('dead', 'failed')
){settle_finals("finals")}
-- each written job's lock key: its end may let the key's next job be claimed (core.ack_batch_with_keys)
SELECT id, lock_key FROM ok, settled UNION ALL SELECT id, lock_key FROM errored, settled
"""

# Ack a batch, successes deleted.
ACK_BATCH = "WITH" + _ACK_OK_DELETE + "," + _ACK_ERRORS_AND_STATS
# Ack a batch, successes kept as 'succeeded'.
ACK_BATCH_KEEP = "WITH" + _ACK_OK_KEEP + "," + _ACK_ERRORS_AND_STATS
# Ack a batch, successes moved to jobs_history.
ACK_BATCH_TO_HISTORY = "WITH" + _ACK_OK_MOVE + "," + _ACK_ERRORS_AND_STATS

# Graceful shutdown: hand this worker's unfinished jobs back at once. The interrupted run is
# not counted against the job (it was the deploy, not the job), so attempts goes back down.
# Its rows are found like the heartbeat's (by id, through _own_rows).
RELEASE_OWN = f"""
UPDATE jobs j
   SET status = 'queued', worker_id = NULL, lease_until = NULL, run_at = now(),
       attempts = greatest(j.attempts - 1, 0)
  FROM unnest(%(ids)s::bigint[]) AS v(id)
       {_own_rows(with_attempt=False)}
 WHERE j.ctid = f.ctid
RETURNING j.id
"""

# ---- reaper and operators ---------------------------------------------------------------------

# Running jobs whose lease expired (crashed or frozen worker) go back to queued, or to dead when
# that run was their last attempt. One guarded statement; the lease check is repeated in the
# UPDATE so a heartbeat that lands meanwhile wins. Also used by an operator's "release".
REAP_EXPIRED = f"""
WITH expired AS (
    SELECT id FROM jobs
     WHERE status = 'running' AND lease_until < now()
     ORDER BY lease_until
     LIMIT %(limit)s
       FOR UPDATE SKIP LOCKED
), reaped AS (
UPDATE jobs j
   SET status = CASE WHEN j.attempts >= j.max_attempts THEN 'dead'::job_status
                     ELSE 'queued'::job_status END,
       finished_at = CASE WHEN j.attempts >= j.max_attempts THEN now() END,
       last_error = concat_ws(E'\\n', 'lease expired: worker ' || j.worker_id
                              || ' stopped heartbeating during attempt ' || j.attempts, j.last_error),
       -- skiplock's own annotation is the headline of this attempt; its group names the cause
       error_headline = 'lease expired: worker ' || j.worker_id || ' stopped heartbeating',
       error_group = 'lease expired: a worker stopped heartbeating',
       worker_id = NULL,
       lease_until = NULL,
       run_at = now()
  FROM expired
 WHERE j.id = expired.id AND j.status = 'running' AND j.lease_until < now()
RETURNING j.id, j.queue, j.status, j.batch_id, j.error_headline
), finals AS MATERIALIZED (
    SELECT id, status AS state, batch_id, error_headline AS head FROM reaped WHERE status = 'dead'
){settle_finals("finals")}
SELECT id, queue, status FROM reaped, settled
"""

# Operator release of chosen running jobs: the same transition as the reaper, without waiting
# for the lease to expire.
RELEASE_RUNNING = f"""
WITH released AS (
UPDATE jobs j
   SET status = CASE WHEN j.attempts >= j.max_attempts THEN 'dead'::job_status
                     ELSE 'queued'::job_status END,
       finished_at = CASE WHEN j.attempts >= j.max_attempts THEN now() END,
       last_error = concat_ws(E'\\n', 'released by ' || %(actor)s || ' from worker ' || j.worker_id
                              || ' during attempt ' || j.attempts, j.last_error),
       error_headline = 'released by ' || %(actor)s || ' from worker ' || j.worker_id,
       error_group = 'released by an operator',
       worker_id = NULL,
       lease_until = NULL,
       run_at = now()
 WHERE j.id = ANY(%(ids)s::bigint[]) AND j.status = 'running'
RETURNING j.id, j.queue, j.status, j.batch_id, j.error_headline
), finals AS MATERIALIZED (
    SELECT id, status AS state, batch_id, error_headline AS head FROM released WHERE status = 'dead'
){settle_finals("finals")}
SELECT id, queue, status FROM released, settled
"""

# What a retry re-opens (migration 026's skiplock_reopen): the edges and batch counts the failed job
# had settled, and the jobs with parents re-evaluated against them. `retried` is (id, queue, old).
_REOPEN = """, reopened AS MATERIALIZED (
    SELECT CASE WHEN pg_sequence_last_value('skiplock_linked') IS NOT NULL
                THEN skiplock_reopen(ARRAY(SELECT id FROM retried ORDER BY id),
                                     ARRAY(SELECT old::text FROM retried ORDER BY id)) END AS n
)
SELECT id, queue FROM retried, reopened
"""

# Retry dead or failed jobs: back to queued now with a fresh attempt budget.
RETRY_FINISHED = """
WITH before AS (
    SELECT id, status AS old FROM jobs WHERE id = ANY(%(ids)s::bigint[]) AND status IN ('dead', 'failed') FOR UPDATE
), retried AS (
    UPDATE jobs j
       SET status = 'queued', attempts = 0, run_at = now(), finished_at = NULL,
           worker_id = NULL, lease_until = NULL
      FROM before b
     WHERE j.id = b.id AND j.status IN ('dead', 'failed')
    RETURNING j.id, j.queue, b.old
)""" + _REOPEN

# A purged job's tombstone in job_results: wait() and a dependent enqueued later still learn that
# it ended dead or failed (a job gone without one is taken as succeeded, history mode delete).
_TOMBSTONES = """, tombstones AS (
    INSERT INTO job_results (job_id, state, error)
    SELECT id, status, error_headline FROM purged
    ON CONFLICT (job_id) DO NOTHING
)
"""

# Purge dead or failed jobs for good.
PURGE_FINISHED = """
WITH purged AS (
    DELETE FROM jobs
     WHERE id = ANY(%(ids)s::bigint[]) AND status IN ('dead', 'failed')
    RETURNING id, status, error_headline
)""" + _TOMBSTONES + "SELECT id FROM purged\n"

# Cancel queued or waiting jobs: finish them as failed so they are never claimed. Their dependents
# that have not started are cancelled with them (skiplock_settle: a failed parent).
CANCEL_QUEUED = f"""
WITH cancelled AS (
    UPDATE jobs
       SET status = 'failed', finished_at = now(),
           last_error = concat_ws(E'\\n', 'cancelled by ' || %(actor)s, last_error),
           error_headline = 'cancelled by ' || %(actor)s, error_group = 'cancelled by an operator'
     WHERE id = ANY(%(ids)s::bigint[]) AND status IN ('queued', 'waiting', 'parked')
    RETURNING id, batch_id, error_headline
), finals AS MATERIALIZED (
    SELECT id, 'failed' AS state, batch_id, error_headline AS head FROM cancelled
){settle_finals("finals")}
SELECT id FROM cancelled, settled
"""

# Run scheduled (future) queued jobs now.
RUN_NOW = """
UPDATE jobs SET run_at = now()
 WHERE id = ANY(%(ids)s::bigint[]) AND status = 'queued' AND run_at > now()
RETURNING id, queue
"""

# Wake workers of the given queues (used after operator actions make work ready).
NOTIFY_QUEUES = "SELECT pg_notify('skiplock_jobs', q) FROM unnest(%(queues)s::text[]) AS q"

# Pause / resume a queue for every worker.
PAUSE_QUEUE = """
INSERT INTO paused_queues (queue, paused_by) VALUES (%(queue)s, %(actor)s)
ON CONFLICT (queue) DO NOTHING RETURNING queue
"""
RESUME_QUEUE = "DELETE FROM paused_queues WHERE queue = %(queue)s RETURNING queue"

# ---- the core's features that change jobs (core/features/: attempts, snooze, cancel, hand-off) -----
# Each feature module keeps its rules and calls these; the statements live here, with the queue's own.

# Append each failed run's error to its job's bounded history (state_changes.record_attempts): the last %(keep)s
# failed runs, each error cut to %(chars)s characters, fenced like the ack (this worker, this run, running).
RECORD_ATTEMPTS = f"""
UPDATE jobs j
   SET attempt_errors = (
       SELECT jsonb_agg(e.value ORDER BY e.n)
         FROM jsonb_array_elements(
                  coalesce(j.attempt_errors, '[]'::jsonb)
                  || jsonb_build_array(jsonb_build_object(
                         'attempt', v.attempt, 'worker', %(worker_id)s::text, 'started', j.started_at, 'at', now(),
                         'duration_ms', round(v.duration::numeric, 1), 'error', left(v.error, %(chars)s))))
              WITH ORDINALITY AS e(value, n)
        WHERE e.n > jsonb_array_length(coalesce(j.attempt_errors, '[]'::jsonb)) + 1 - %(keep)s)
  FROM unnest(%(ids)s::bigint[], %(attempts)s::int[], %(durations)s::float8[], %(errors)s::text[])
       AS v(id, attempt, duration, error)
       {_own_rows(with_attempt=True)}
 WHERE j.ctid = f.ctid
"""

# Snoozed runs back to queued later, the claim's attempt given back (state_changes.snooze_batch); fenced.
SNOOZE_BATCH = f"""
UPDATE jobs j
   SET status = 'queued',
       run_at = now() + make_interval(secs => v.delay),
       attempts = greatest(j.attempts - 1, 0),
       snooze_count = coalesce(j.snooze_count, 0) + 1,
       worker_id = NULL,
       lease_until = NULL
  FROM unnest(%(ids)s::bigint[], %(attempts)s::int[], %(delays)s::float8[]) AS v(id, attempt, delay)
       {_own_rows(with_attempt=True)}
 WHERE j.ctid = f.ctid
RETURNING j.id
"""

# A cancel request on running jobs (features/cancel.py), the status of one that was not running, and
# the requests of a worker's running jobs made during their current run (read with each heartbeat).
REQUEST_CANCEL = """
UPDATE jobs SET cancel_requested_at = now(), cancel_requested_by = %(actor)s
 WHERE id = ANY(%(ids)s::bigint[]) AND status = 'running'
RETURNING id
"""
CANCEL_JOB_STATUS = "SELECT status::text FROM jobs WHERE id = %(id)s"
CANCEL_REQUESTS = """
SELECT id, cancel_requested_by FROM jobs
 WHERE id = ANY(%(ids)s) AND status = 'running' AND cancel_requested_at >= started_at
"""

# The jobs handed to this worker by the insert trigger that it never received (features/handoff.py):
# back to queued, that run not counted (it never started). Running jobs are few, and this runs only
# after a listener reconnect or at a stop.
RELEASE_LOST_HANDOFFS = """
UPDATE jobs j
   SET status = 'queued', worker_id = NULL, lease_until = NULL, run_at = now(),
       attempts = greatest(j.attempts - 1, 0)
 WHERE j.status = 'running' AND j.worker_id = %(worker_id)s
   AND j.started_at < now() - make_interval(secs => %(age)s)
   AND NOT (j.id = ANY(%(known)s::bigint[]))
RETURNING j.id, j.queue
"""

# ---- worker registry ---------------------------------------------------------------------------

# Register or refresh a live worker row (its heartbeat).
WORKER_UPSERT = """
INSERT INTO workers (id, host, pid, queues, concurrency, in_flight, task_versions)
VALUES (%(id)s, %(host)s, %(pid)s, %(queues)s, %(concurrency)s, %(in_flight)s, %(task_versions)s::jsonb)
ON CONFLICT (id) DO UPDATE SET last_seen = now(), in_flight = EXCLUDED.in_flight
RETURNING command, command_by  -- an operator's quiet/stop (migration 029, worker/core/features/worker_control.py)
"""

# Remove a worker row on clean exit.
WORKER_DELETE = "DELETE FROM workers WHERE id = %(id)s"

# ---- waiters: an idle worker's one-shot wake-up token (migrations 014, 015) ----------------------
# Registers only if none of this worker's rows is left: a row still there either waits to be taken
# or is being taken by a producer, whose NOTIFY then follows at its commit. Inserting beside a row
# that a producer has locked would wait for that producer's transaction, however long it runs.
# Each row also carries what the insert trigger needs to hand this worker a job (migration 020): its
# lease and newest payload version for that queue, and its listener's key (NULL: no hand-offs).
WAITER_REGISTER = """
INSERT INTO queue_waiters (worker_id, queue, lease, version, listen_key)
SELECT %(id)s, w.queue, w.lease, w.version, %(listen_key)s
  FROM unnest(%(queues)s::text[], %(leases)s::float8[], %(versions)s::int[]) AS w(queue, lease, version)
 WHERE NOT EXISTS (SELECT 1 FROM queue_waiters w WHERE w.worker_id = %(id)s)
ON CONFLICT DO NOTHING
"""
# After the tokens have committed: the flag in front of the insert trigger (migration 022), so that
# producers run the trigger's function again. Written only when clear: a write is a WAL record.
WAITING_FLAG_SET = """
SELECT setval('skiplock_waiting', 1, true) WHERE pg_sequence_last_value('skiplock_waiting') IS NULL
"""
# A reconnected listener's new key, into this worker's tokens still out (a producer holding one
# decides with the old key: a hand-off it makes may be lost, see worker/core/features/handoff.py).
WAITER_REKEY = """
UPDATE queue_waiters SET listen_key = %(listen_key)s WHERE ctid = ANY (ARRAY(
    SELECT ctid FROM queue_waiters WHERE worker_id = %(id)s FOR UPDATE SKIP LOCKED))
"""
# Rows a producer has locked are left to it: it deletes them at its commit.
WAITER_UNREGISTER = """
DELETE FROM queue_waiters WHERE ctid = ANY (ARRAY(
    SELECT ctid FROM queue_waiters WHERE worker_id = %(id)s FOR UPDATE SKIP LOCKED))
"""
# The rows of workers that are gone (crashed: no live worker row) and that have waited a while, so a
# worker whose own row is not written yet keeps its new waiter row.
WAITER_PRUNE = """
DELETE FROM queue_waiters WHERE ctid = ANY (ARRAY(
    SELECT q.ctid FROM queue_waiters q
     WHERE q.since < now() - make_interval(secs => %(live)s)
       AND NOT EXISTS (SELECT 1 FROM workers w WHERE w.id = q.worker_id
                          AND w.last_seen > now() - make_interval(secs => %(live)s))
       FOR UPDATE OF q SKIP LOCKED))
"""

# Forget workers that stopped heartbeating long ago (their jobs are the reaper's business).
WORKER_PRUNE_STALE = """
DELETE FROM workers WHERE last_seen < now() - make_interval(secs => %(older_than)s) RETURNING id
"""

# Reaped-lease counter for metrics: one row per reaper outcome per minute.
REAPED_STATS = """
INSERT INTO job_stats (minute, queue, worker_id, reaped)
SELECT date_trunc('minute', now()), queue, 'reaper', count(*)
  FROM unnest(%(queues)s::text[]) AS queue GROUP BY queue
ON CONFLICT (minute, queue, worker_id) DO UPDATE SET reaped = job_stats.reaped + EXCLUDED.reaped
"""

# ---- operator bulk actions over a filter ------------------------------------------------------

# The first line of last_error, cut to 200 characters: the dead-letter "error kind" the console
# groups by and filters on (one definition, so the group shown and the filter applied agree).
ERROR_LINE = "coalesce(error_headline, left(split_part(coalesce(last_error, ''), E'\\n', 1), 200))"
# The group a dead letter is counted in (skiplock/core/error_summary.py): exception class + masked message.
ERROR_GROUP = "coalesce(error_group, left(split_part(coalesce(last_error, ''), E'\\n', 1), 200))"

# The filter the console's "all matching" bulk actions share: finished jobs of one status,
# optionally narrowed by queue, finish-time window, the first line of last_error, and text in
# unique_key/payload/last_error. `until` pins the set to what the operator confirmed: jobs that
# died after the confirmation page was shown are left alone.
FINISHED_MATCH = f"""
      status = %(status)s::job_status
  AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
  AND (%(since)s::timestamptz IS NULL OR finished_at >= %(since)s::timestamptz)
  AND (%(until)s::timestamptz IS NULL OR finished_at <= %(until)s::timestamptz)
  AND (%(error)s::text IS NULL OR {ERROR_GROUP} = %(error)s::text)
  AND (%(text)s::text IS NULL OR unique_key ILIKE %(text)s::text OR payload::text ILIKE %(text)s::text
       OR last_error ILIKE %(text)s::text)
"""

# How many finished jobs match the filter, counting at most %(cap)s (the confirmation's number).
COUNT_FINISHED_MATCHING = f"""
SELECT count(*) FROM (SELECT 1 FROM jobs WHERE {FINISHED_MATCH} LIMIT %(cap)s) AS m
"""

# The next %(limit)s matching finished ids after %(after)s, locked: the batch both bulk actions walk.
_MATCHING_BATCH = f"""WITH batch AS (
    SELECT id FROM jobs
     WHERE {FINISHED_MATCH} AND id > %(after)s
     ORDER BY id
     LIMIT %(limit)s
       FOR UPDATE SKIP LOCKED
)
"""

# One bounded batch of "retry all matching": the next %(limit)s matching ids after %(after)s,
# locked (SKIP LOCKED: a row another operator is changing right now is left to them), then the
# same transition as RETRY_FINISHED. Walking by id guarantees progress and a bounded statement.
RETRY_MATCHING_BATCH = f"""
{_MATCHING_BATCH}, retried AS (
    UPDATE jobs j
       SET status = 'queued', attempts = 0, run_at = now(), finished_at = NULL,
           worker_id = NULL, lease_until = NULL
      FROM batch
     WHERE j.id = batch.id AND j.status IN ('dead', 'failed')
    RETURNING j.id, j.queue, %(status)s::text AS old
)""" + _REOPEN

# One bounded batch of "purge all matching" (see RETRY_MATCHING_BATCH).
PURGE_MATCHING_BATCH = f"""
{_MATCHING_BATCH}, purged AS (
    DELETE FROM jobs j
     USING batch
     WHERE j.id = batch.id AND j.status IN ('dead', 'failed')
    RETURNING j.id, j.queue, j.status, j.error_headline
)""" + _TOMBSTONES + "SELECT id, queue FROM purged\n"

# The newest %(limit)s finished jobs the filter covers, for `skiplock jobs list` (reads only).
LIST_FINISHED_MATCHING = f"""
SELECT id, queue, status::text AS status, finished_at, attempts, max_attempts,
       coalesce(error_headline, {ERROR_GROUP}) AS error
  FROM jobs
 WHERE {FINISHED_MATCH}
 ORDER BY finished_at DESC, id DESC
 LIMIT %(limit)s
"""

# How many of the given ids are dead or failed now: what retrying or purging them would change.
COUNT_FINISHED_IDS = "SELECT count(*) FROM jobs WHERE id = ANY(%(ids)s) AND status IN ('dead', 'failed')"

# One job as `skiplock jobs show` prints it (reads only).
JOB_DETAIL = """
SELECT id, queue, status::text AS status, priority, attempts, max_attempts, created_at, run_at, started_at,
       finished_at, worker_id, unique_key, lock_key, tenant, version, error_group, last_error, payload
  FROM jobs
 WHERE id = %(id)s
"""

# ---- pruner ------------------------------------------------------------------------------------

# Delete up to %(limit)s jobs of one final status that finished more than %(older_than)s seconds
# ago, oldest first per queue. jobs_finished_idx is (status, queue, finished_at, id): a flat
# "finished_at < cutoff" scan would walk every kept row of the queues before the expired ones,
# so the recursive CTE hops from queue to queue (a loose index scan: one index probe each) and
# the LATERAL reads only each queue's expired range. The literal IN list lets the planner prove
# the partial index applies (a bound status alone would not). The limit keeps each statement's
# locks small and short; SKIP LOCKED leaves rows an operator is retrying or purging right now
# to the next pass. queued and running rows are outside the index and can never match.
PRUNE_FINISHED = """
WITH RECURSIVE queues(queue) AS (
    SELECT min(queue) FROM jobs
     WHERE status IN ('succeeded', 'failed', 'dead') AND status = %(status)s::job_status
    UNION ALL
    SELECT (SELECT min(j.queue) FROM jobs j
             WHERE j.status IN ('succeeded', 'failed', 'dead') AND j.status = %(status)s::job_status
               AND j.queue > q.queue)
      FROM queues q
     WHERE q.queue IS NOT NULL
), doomed AS (
    SELECT d.id
      FROM queues q
      CROSS JOIN LATERAL (
          SELECT j.id FROM jobs j
           WHERE j.status IN ('succeeded', 'failed', 'dead') AND j.status = %(status)s::job_status
             AND j.queue = q.queue AND j.finished_at < now() - make_interval(secs => %(older_than)s)
           ORDER BY j.finished_at
           LIMIT %(limit)s
             FOR UPDATE SKIP LOCKED
      ) d
     WHERE q.queue IS NOT NULL
     LIMIT %(limit)s
)
DELETE FROM jobs j
 USING doomed
 WHERE j.id = doomed.id AND j.status = %(status)s::job_status
RETURNING j.id
"""

# ---- job_stats retention ------------------------------------------------------------------------
# Up to %(limit)s per-minute rows older than the retention are deleted and their counts added to
# job_stats_totals in the same statement: the metrics' counters (totals + kept rows) stay monotonic.
PRUNE_STATS = """
WITH gone AS (
    DELETE FROM job_stats s
     WHERE s.ctid = ANY (ARRAY(SELECT ctid FROM job_stats
                                WHERE minute < now() - make_interval(secs => %(older_than)s)
                                LIMIT %(limit)s))
    RETURNING queue, completed, retried, failed, dead, reaped
), added AS (
    INSERT INTO job_stats_totals AS t (queue, completed, retried, failed, dead, reaped)
    SELECT queue, sum(completed), sum(retried), sum(failed), sum(dead), sum(reaped) FROM gone GROUP BY queue
    ON CONFLICT (queue) DO UPDATE SET completed = t.completed + EXCLUDED.completed,
                                      retried = t.retried + EXCLUDED.retried, failed = t.failed + EXCLUDED.failed,
                                      dead = t.dead + EXCLUDED.dead, reaped = t.reaped + EXCLUDED.reaped
)
SELECT count(*) FROM gone
"""

# ---- workflows: dependencies, batches, results, progress (migration 026) ---------------------------

# Parent ids that are not jobs and never were (past the id sequence, or not positive): an
# EnqueueError before anything is written, so the caller's transaction stays usable.
UNKNOWN_PARENTS = """
SELECT coalesce(array_agg(p ORDER BY p), '{}') FROM unnest(%(parents)s::bigint[]) AS p
 WHERE p IS NULL OR p <= 0 OR (p > (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM jobs_id_seq)
                                AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = p))
"""

# Enqueue jobs that are linked: with parents (waiting until they are final) and/or as members of a
# batch (counted into it in this statement, and only while it has not called back). One statement,
# so an autocommit connection cannot keep half of it. Ids are drawn first so that each row's edges
# can name it. skiplock_check_parents() raises on an unknown parent (the SQL path's guard; Python
# callers check first with UNKNOWN_PARENTS) and sets the skiplock_linked flag. Each edge is checked
# once more at COMMIT by the job_deps_check trigger: a parent already final releases or ends the
# child there. Parents are given per job as array literals ('{1,2}'), unique keys are refused before.
ENQUEUE_LINKED = """
WITH seq AS MATERIALIZED (SELECT pg_get_serial_sequence('jobs', 'id')::regclass AS s),
v AS MATERIALIZED (
    SELECT nextval(seq.s) AS id, u.q, u.p, u.pr, u.ra, u.ma, u.lk, u.tn, u.vn,
           -- a job without parents (a batch member) skips the per-row subquery: NULL, not '{}'
           CASE WHEN u.pa IS NULL THEN '{}'::bigint[]
                ELSE ARRAY(SELECT DISTINCT x FROM unnest(u.pa::bigint[]) AS x) END AS parents, u.pol, u.ord
      FROM seq, unnest(%(queues)s::text[], %(payloads)s::text[], %(priorities)s::int[], %(run_ats)s::timestamptz[],
                       %(max_attempts)s::int[], %(lock_keys)s::text[], %(tenants)s::text[], %(versions)s::int[],
                       %(parents)s::text[], %(policies)s::text[])
                WITH ORDINALITY AS u(q, p, pr, ra, ma, lk, tn, vn, pa, pol, ord)
     ORDER BY u.ord
), checked AS MATERIALIZED (
    SELECT skiplock_check_parents(ARRAY(SELECT DISTINCT x FROM v, unnest(v.parents) AS x)) AS root
), joined AS MATERIALIZED (
    UPDATE job_batches b SET total = b.total + (SELECT count(*) FROM v), pending = b.pending + (SELECT count(*) FROM v)
     WHERE b.id = %(batch)s::bigint AND b.called_back_at IS NULL
    RETURNING b.id
), ins AS (
    INSERT INTO jobs (id, queue, payload, priority, run_at, max_attempts, lock_key, tenant, version,
                      status, waiting_on, on_dependency_failure, workflow_id, batch_id)
    SELECT v.id, v.q, v.p::jsonb, v.pr, coalesce(v.ra, now()), v.ma, v.lk, v.tn, v.vn,
           (CASE WHEN cardinality(v.parents) > 0 THEN 'waiting' ELSE 'queued' END)::job_status,
           CASE WHEN cardinality(v.parents) > 0 THEN cardinality(v.parents) END,
           v.pol,
           CASE WHEN cardinality(v.parents) > 0
                THEN coalesce((SELECT coalesce(pj.workflow_id, pj.id) FROM jobs pj WHERE pj.id = v.parents[1]),
                              v.parents[1]) END,
           (SELECT id FROM joined)
      FROM v, checked
     WHERE %(batch)s::bigint IS NULL OR EXISTS (SELECT 1 FROM joined)
     ORDER BY v.ord
    RETURNING id
), edges AS (
    INSERT INTO job_deps (parent, child)
    SELECT x, v.id FROM v CROSS JOIN LATERAL unnest(v.parents) AS x
     WHERE EXISTS (SELECT 1 FROM ins)
)
SELECT id FROM ins ORDER BY id
"""

# A new batch, open until its enqueuing block ends (sealed). Sets the skiplock_linked flag.
BATCH_OPEN = """
WITH flag AS (SELECT setval('skiplock_linked', 1, true) WHERE pg_sequence_last_value('skiplock_linked') IS NULL)
INSERT INTO job_batches (on_complete, on_success)
SELECT %(on_complete)s::jsonb, %(on_success)s::jsonb FROM (SELECT count(*) FROM flag) f
RETURNING id
"""
# The enqueuing block ended: a batch with nothing pending (empty, or all members final already)
# calls back now; otherwise its last member's settle does.
BATCH_SEAL = """
WITH sealed AS (UPDATE job_batches SET sealed = true WHERE id = %(batch)s RETURNING id)
SELECT skiplock_batch_call_back(id) FROM sealed
"""
# Whether a batch can still take members (it exists and has not called back).
BATCH_IS_OPEN = "SELECT called_back_at IS NULL FROM job_batches WHERE id = %(batch)s"
# A batch as its members and callbacks see it (job.batch), found from any of its jobs.
BATCH_OF_JOB = """
SELECT b.id, b.total, b.pending, b.succeeded, b.dead, b.cancelled, b.sealed, b.called_back_at,
       b.complete_job_id, b.success_job_id
  FROM job_batches b
 WHERE b.id = (SELECT batch_id FROM jobs WHERE id = %(job)s)
    OR b.complete_job_id = %(job)s OR b.success_job_id = %(job)s
 LIMIT 1
"""
# One batch by id (the console's batch page and skiplock.batch_status).
BATCH_BY_ID = """
SELECT b.id, b.total, b.pending, b.succeeded, b.dead, b.cancelled, b.sealed, b.called_back_at,
       b.complete_job_id, b.success_job_id
  FROM job_batches b WHERE b.id = %(batch)s
"""

# A job's parents: id, the edge's final state (NULL while open) and the stored result (job.parent_results).
PARENTS_OF = """
SELECT e.parent, e.parent_state::text, r.result
  FROM job_deps e LEFT JOIN job_results r ON r.job_id = e.parent
 WHERE e.child = %(job)s
 ORDER BY e.parent
"""

# Where a job stands, for skiplock.status/result/wait: its row if it has one, its stored result,
# and whether its id was ever issued (a success in history mode delete leaves no row).
JOB_STATUS = """
SELECT j.status::text, j.last_error, j.error_headline, j.attempts, j.max_attempts, j.waiting_on,
       j.batch_id, j.workflow_id, j.progress, j.progress_message, j.queue,
       r.state::text, r.result, r.error,
       (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM jobs_id_seq) >= %(job)s AS issued,
       EXISTS (SELECT 1 FROM jobs_history h WHERE h.id = %(job)s) AS archived
  FROM (SELECT %(job)s::bigint AS id) x
  LEFT JOIN jobs j ON j.id = x.id
  LEFT JOIN job_results r ON r.job_id = x.id
"""

# skiplock.wait(): register, and forget, interest in a job (skiplock_settle NOTIFYs only these).
WATCH = """
WITH flag AS (SELECT setval('skiplock_linked', 1, true) WHERE pg_sequence_last_value('skiplock_linked') IS NULL)
INSERT INTO job_watchers (job_id) SELECT %(job)s FROM (SELECT count(*) FROM flag) f
"""
UNWATCH = "DELETE FROM job_watchers WHERE ctid = (SELECT ctid FROM job_watchers WHERE job_id = %(job)s LIMIT 1)"
# Watchers left by a process that died while waiting.
PRUNE_WATCHERS = "DELETE FROM job_watchers WHERE since < now() - make_interval(secs => %(older_than)s)"
# Stored results past their retention (SKIPLOCK_RESULT_TTL), a bounded batch at a time.
PRUNE_RESULTS = """
DELETE FROM job_results WHERE job_id = ANY (ARRAY(
    SELECT job_id FROM job_results WHERE finished_at < now() - make_interval(secs => %(older_than)s)
     ORDER BY finished_at LIMIT %(limit)s))
"""

# job.progress(): the latest fraction and message of this worker's running jobs, fenced like the
# heartbeat (same worker, still running), written beside it.
PROGRESS = f"""
UPDATE jobs j
   SET progress = v.fraction, progress_message = v.message, progress_at = now()
  FROM unnest(%(ids)s::bigint[], %(fractions)s::float4[], %(messages)s::text[]) AS v(id, fraction, message)
       {_own_rows(with_attempt=False)}
 WHERE j.ctid = f.ctid
"""

# Cancel the rest of a workflow: every job of it that is not running (queued, waiting or parked) ends
# failed, through CANCEL_QUEUED's statement (so their batches and dependents are settled too).
WORKFLOW_UNSTARTED = """
SELECT id FROM jobs
 WHERE (workflow_id = %(workflow)s OR id = %(workflow)s) AND status IN ('queued', 'waiting', 'parked')
"""
# The running jobs of a workflow (a cancel request each) and its dead ones (retry the dead ones:
# first the jobs that failed on their own; their dependents come back with them).
WORKFLOW_RUNNING = """
SELECT id FROM jobs WHERE (workflow_id = %(workflow)s OR id = %(workflow)s) AND status = 'running'
"""
WORKFLOW_DEAD_ROOT_CAUSES = """
SELECT id FROM jobs
 WHERE (workflow_id = %(workflow)s OR id = %(workflow)s) AND status IN ('dead', 'failed')
   AND error_group IS DISTINCT FROM 'dependency failed'
"""

# ---- the workflow sweeper (services/workflow_sweeper.py) and the doctor's check ---------------------
# Open edges whose parent is already final, or gone, while the child still waits: a finalising
# statement that did not call skiplock_settle (a hand-written UPDATE, an old client). Read through
# jobs_waiting_idx and the edges' child index, never a scan of jobs.
STRANDED_EDGES = """
SELECT e.parent, coalesce(p.status::text, r.state::text, 'succeeded') AS state,
       coalesce(p.error_headline, r.error) AS head
  FROM jobs c
  JOIN job_deps e ON e.child = c.id AND e.parent_state IS NULL
  LEFT JOIN jobs p ON p.id = e.parent
  LEFT JOIN job_results r ON r.job_id = e.parent
 WHERE c.status = 'waiting'
   AND (p.id IS NULL OR p.status IN ('succeeded', 'dead', 'failed'))
   AND c.created_at < now() - make_interval(secs => %(grace)s)
 LIMIT %(limit)s
"""
# Waiting jobs whose counter disagrees with their open edges (recounted, then released at zero).
MISCOUNTED_WAITING = """
SELECT c.id, c.waiting_on, (SELECT count(*) FROM job_deps e WHERE e.child = c.id AND e.parent_state IS NULL) AS open
  FROM jobs c
 WHERE c.status = 'waiting' AND c.created_at < now() - make_interval(secs => %(grace)s)
   AND c.waiting_on <> (SELECT count(*) FROM job_deps e WHERE e.child = c.id AND e.parent_state IS NULL)
 LIMIT %(limit)s
"""
RECOUNT_WAITING = """
WITH fixed AS (
    UPDATE jobs c
       SET waiting_on = x.open,
           status = (CASE WHEN x.open = 0 THEN 'queued' ELSE 'waiting' END)::job_status,
           run_at = CASE WHEN x.open = 0 THEN greatest(c.run_at, now()) ELSE c.run_at END
      FROM (SELECT j.id, (SELECT count(*) FROM job_deps e WHERE e.child = j.id AND e.parent_state IS NULL)::int AS open
              FROM jobs j WHERE j.id = ANY(%(ids)s::bigint[]) AND j.status::text = 'waiting' FOR UPDATE OF j) x
     WHERE c.id = x.id
    RETURNING c.id, c.queue, c.status
)
SELECT id, queue, status::text FROM fixed
"""
# Settle parents the normal path missed (STRANDED_EDGES' rows).
SETTLE = "SELECT skiplock_settle(%(ids)s::bigint[], %(states)s::text[], %(batches)s::bigint[], %(heads)s::text[])"
# Batches that are done but never called back, and batches whose pending counter disagrees with
# their members (each counted through jobs_batch_idx).
UNCALLED_BATCHES = """
SELECT id FROM job_batches WHERE called_back_at IS NULL AND sealed AND pending = 0 LIMIT %(limit)s
"""
MISCOUNTED_BATCHES = """
SELECT b.id, b.pending, m.pending AS counted
  FROM job_batches b
  CROSS JOIN LATERAL (SELECT count(*) FILTER (WHERE j.status IN ('waiting', 'queued', 'running')) AS pending
                        FROM jobs j WHERE j.batch_id = b.id) m
 WHERE b.called_back_at IS NULL AND b.sealed AND b.created_at < now() - make_interval(secs => %(grace)s)
   AND m.pending < b.pending
 LIMIT %(limit)s
"""
# A batch recounted from its members' rows: members whose rows are gone (deleted at success) are
# the total less those counted, taken as succeeded; then the call back if that made it done.
RECOUNT_BATCH = """
WITH m AS (
    SELECT count(*) FILTER (WHERE status IN ('waiting', 'queued', 'running'))::int AS pending,
           count(*) FILTER (WHERE status = 'dead')::int AS dead,
           count(*) FILTER (WHERE status = 'failed')::int AS cancelled
      FROM jobs WHERE batch_id = %(batch)s
), fixed AS (
    UPDATE job_batches b
       SET pending = m.pending, dead = m.dead, cancelled = m.cancelled,
           succeeded = b.total - m.pending - m.dead - m.cancelled
      FROM m WHERE b.id = %(batch)s AND b.called_back_at IS NULL
    RETURNING b.id
)
SELECT skiplock_batch_call_back(id) FROM fixed
"""
CALL_BACK = "SELECT skiplock_batch_call_back(%(batch)s)"

# ---- bulk statements for `skiplock bench` and tests/benchmarks -----------------------------------
# The bulk seeding statements live with the benchmark tools (worker/tools/bench_seed.py).

# The documented plain-SQL producer's INSERT (README "Enqueueing from any language"): the floor
# that enqueue() is measured against.
SQL_PRODUCER_INSERT = "INSERT INTO jobs (queue, payload) VALUES (%(queue)s, %(payload)s::jsonb)"

# An operator's edit of a dead job's payload (features/payload_edit.py), just before the same transaction
# retries it. Guarded like that retry: only a dead job's payload is ever written here.
WRITE_DEAD_PAYLOAD = "UPDATE jobs SET payload = %(new)s::jsonb WHERE id = %(id)s AND status = 'dead'"
