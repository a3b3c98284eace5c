-- 035: durable jobs' side tables and the indexes of the 'parked' state (docs/explanation/durable-jobs.md).
-- Safe to re-run. The hot jobs row gains no column: only jobs that use steps, cursors, sleeps or
-- signals touch these tables, and the claim never reads them. No foreign keys to jobs: a cascade would
-- cost every ack a lookup in each table; the pruner deletes the rows of jobs that are gone or final.

-- A finished step's JSON result, by (job, name): written once, fenced, before the handler goes on.
-- Sleeps and waits are steps too: sleep:<name> holds the wake time, wait_for:<key> what the wait received
-- ({"payload": ...} or {"timeout": true}), timeout:<key> the wait's deadline.
CREATE TABLE IF NOT EXISTS job_steps (
    job_id  bigint      NOT NULL,
    name    text        NOT NULL,
    result  jsonb,
    attempt int         NOT NULL,            -- the run that stored it (jobs.attempts then)
    done_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, name)
);

-- A cursor's last saved JSON value: written with the heartbeat, at a park, at a graceful shutdown and
-- when the run ends.
CREATE TABLE IF NOT EXISTS job_cursors (
    job_id   bigint      NOT NULL,
    name     text        NOT NULL,
    value    jsonb,
    saved_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, name)
);

-- What a parked job waits for: a sleep (its step name, the wake time in jobs.run_at) or a signal key
-- (with its timeout in jobs.run_at, 9999-12-31 without one). Written when the job parks, deleted when it
-- wakes. queue is copied so the Parked view counts per queue and key without reading jobs.
CREATE TABLE IF NOT EXISTS job_waits (
    job_id    bigint      PRIMARY KEY,
    queue     text        NOT NULL,
    sleep     text,                          -- the sleep's name, for a sleep
    key       text,                          -- the signal key, for a wait
    wake_at   timestamptz NOT NULL,          -- the sleep's time or the wait's timeout (9999-12-31: none)
    parked_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT job_waits_one_kind CHECK ((sleep IS NULL) <> (key IS NULL))
);
-- A signal finds its waiters here, then updates them in jobs by primary key.
CREATE INDEX IF NOT EXISTS job_waits_key_idx ON job_waits (key) WHERE key IS NOT NULL;

-- A signal's payload and when it was sent: first write wins. Kept SKIPLOCK_SIGNAL_RETENTION (7 days by
-- default), so that a wait that starts after its signal still receives it; then pruned.
CREATE TABLE IF NOT EXISTS job_signals (
    key     text        PRIMARY KEY,
    payload jsonb,
    sent_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS job_signals_sent_idx ON job_signals (sent_at);

-- Only parked rows: the wake pass walks it in run_at order and stops at the first not due, so a wake
-- never scans jobs; the claim's jobs_ready_idx does not hold them, so parked jobs cost the claim nothing.
CREATE INDEX IF NOT EXISTS jobs_parked_idx ON jobs (run_at) WHERE status = 'parked';

-- A parked job is in flight: a duplicate enqueue of its unique_key collapses onto it, and its wake can
-- never collide with a newer job of the same key. The producers' arbiter, ON CONFLICT (unique_key)
-- WHERE status IN ('queued', 'running'), still infers this index: its predicate implies the index's.
DROP INDEX IF EXISTS jobs_unique_inflight;
CREATE UNIQUE INDEX jobs_unique_inflight ON jobs (unique_key) WHERE status IN ('queued', 'running', 'parked');
