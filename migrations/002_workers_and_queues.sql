-- 002: live worker registry, paused queues, and the wake-up trigger. Safe to re-run.

-- One row per live worker process; its heartbeat keeps last_seen fresh.
CREATE TABLE IF NOT EXISTS workers (
    id          text        PRIMARY KEY,
    host        text        NOT NULL,
    pid         int         NOT NULL,
    queues      text[]      NOT NULL,
    concurrency int         NOT NULL,
    in_flight   int         NOT NULL DEFAULT 0,
    started_at  timestamptz NOT NULL DEFAULT now(),
    last_seen   timestamptz NOT NULL DEFAULT now()
);

-- A queue listed here is not claimed by any worker until it is removed (resumed).
CREATE TABLE IF NOT EXISTS paused_queues (
    queue     text        PRIMARY KEY,
    paused_at timestamptz NOT NULL DEFAULT now(),
    paused_by text        NOT NULL DEFAULT ''
);

-- Wake idle workers when ready work is inserted, whoever inserts it (Python or plain SQL).
-- Statement-level with a transition table: one NOTIFY per queue per statement, and Postgres
-- folds identical notifications within a transaction, so a bulk insert costs one message.
CREATE OR REPLACE FUNCTION skiplock_notify_jobs() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('skiplock_jobs', q.queue)
       FROM (SELECT DISTINCT queue FROM new_jobs WHERE status = 'queued' AND run_at <= now()) q;
    RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS jobs_notify_insert ON jobs;
CREATE TRIGGER jobs_notify_insert
    AFTER INSERT ON jobs
    REFERENCING NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION skiplock_notify_jobs();
