-- 003: per-minute outcome counts, written by workers in their ack batches (and the reaper).
-- Keyed by worker so that concurrent ack batches never wait on each other's row lock;
-- readers sum over workers. Safe to re-run.
CREATE TABLE IF NOT EXISTS job_stats (
    minute    timestamptz NOT NULL,
    queue     text        NOT NULL,
    worker_id text        NOT NULL,
    completed bigint      NOT NULL DEFAULT 0,
    retried   bigint      NOT NULL DEFAULT 0,
    failed    bigint      NOT NULL DEFAULT 0,
    dead      bigint      NOT NULL DEFAULT 0,
    reaped    bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (minute, queue, worker_id)
);
CREATE INDEX IF NOT EXISTS job_stats_minute_idx ON job_stats (minute);
