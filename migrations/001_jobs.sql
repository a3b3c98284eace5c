-- 001: the jobs table, the public contract every producer writes to.
-- Names and types follow seed 000 so that a producer that knows only SQL can enqueue,
-- and the seed's observability queries run unchanged. Safe to re-run.

DO $$
BEGIN
    -- queued    : waiting to be claimed once run_at <= now()
    -- running   : claimed by worker_id, protected by lease_until
    -- succeeded : finished without error; only kept when history is enabled (else the row is deleted)
    -- failed    : finished unsuccessfully on purpose and not worth a dead letter:
    --             cancelled by an operator, or discarded by its handler (raise Discard)
    -- dead      : gave up: attempts exhausted, a permanent failure, or a lease lost on the last attempt
    CREATE TYPE job_status AS ENUM ('queued', 'running', 'succeeded', 'failed', 'dead');
EXCEPTION WHEN duplicate_object THEN NULL;
END $$;

CREATE TABLE IF NOT EXISTS jobs (
    id           bigserial   PRIMARY KEY,
    queue        text        NOT NULL,                 -- e.g. 'emails', 'reports'
    priority     int         NOT NULL DEFAULT 0,       -- larger = earlier
    run_at       timestamptz NOT NULL DEFAULT now(),   -- schedule / backoff
    created_at   timestamptz NOT NULL DEFAULT now(),
    started_at   timestamptz,                          -- start of the latest run
    finished_at  timestamptz,                          -- set iff the job reached a final state
    lease_until  timestamptz,                          -- running only: extended by heartbeats
    attempts     int         NOT NULL DEFAULT 0,       -- started runs, incremented at claim
    max_attempts int         NOT NULL DEFAULT 20,
    unique_key   text,                                 -- idempotency key, unique while in flight
    worker_id    text,                                 -- running only: the lease holder
    last_error   text,
    payload      jsonb       NOT NULL,
    status       job_status  NOT NULL DEFAULT 'queued',

    CONSTRAINT jobs_queue_name CHECK (queue <> '' AND length(queue) <= 128),
    CONSTRAINT jobs_attempts_range CHECK (attempts >= 0 AND max_attempts >= 1),
    -- a running job always names its owner and its lease, so the reaper and the fence can work
    CONSTRAINT jobs_running_has_lease CHECK (
        status <> 'running' OR (worker_id IS NOT NULL AND lease_until IS NOT NULL)),
    -- finished_at is set iff the job is in a final state (River's finalized_at rule)
    CONSTRAINT jobs_finished_iff_final CHECK (
        (status IN ('succeeded', 'failed', 'dead')) = (finished_at IS NOT NULL))
);

-- Fast pickup of ready jobs: the claim's ORDER BY walks this index (seed 000).
CREATE INDEX IF NOT EXISTS jobs_ready_idx
    ON jobs (queue, priority DESC, run_at, id)
    WHERE status = 'queued';

-- Duplicate in-flight work collapses onto one row. A partial unique index is not a constraint:
-- producers use ON CONFLICT (unique_key) WHERE status IN ('queued','running') DO NOTHING.
CREATE UNIQUE INDEX IF NOT EXISTS jobs_unique_inflight
    ON jobs (unique_key)
    WHERE status IN ('queued', 'running');

-- The reaper looks for expired leases without scanning queued rows.
CREATE INDEX IF NOT EXISTS jobs_lease_idx
    ON jobs (lease_until)
    WHERE status = 'running';

-- Dead letters, failed and kept history by queue and finish time: the console's dead-letter
-- page and the pruner's retention scans stay on this small index instead of the heap.
CREATE INDEX IF NOT EXISTS jobs_finished_idx
    ON jobs (status, queue, finished_at, id)
    WHERE status IN ('succeeded', 'failed', 'dead');
