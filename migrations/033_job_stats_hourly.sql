-- 033: job_stats summed per hour and queue, for the console's 7-day charts (issue 36: every page under
-- 100 ms with 7 days of per-minute rows; summing 604,800 minute rows took 350 ms). The pruner adds each
-- closed hour once (worker/core/features/stats_rollup.py); job_stats_rollup.until says how far: readers
-- take the hours before it from here and the minutes from it on from job_stats, so a rollup that has
-- not run makes a chart slower, never wrong. Workers do not write here: the ack path is unchanged.
-- Safe to re-run.
CREATE TABLE IF NOT EXISTS job_stats_hourly (
    hour      timestamptz NOT NULL,  -- the hour's start, whole UTC hours
    queue     text        NOT NULL,
    completed bigint      NOT NULL DEFAULT 0,
    retried   bigint      NOT NULL DEFAULT 0,
    failed    bigint      NOT NULL DEFAULT 0,
    dead      bigint      NOT NULL DEFAULT 0,
    reaped    bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (hour, queue)
);
-- one row: every job_stats minute before `until` is in job_stats_hourly
CREATE TABLE IF NOT EXISTS job_stats_rollup (
    one   boolean     PRIMARY KEY DEFAULT true CHECK (one),
    until timestamptz NOT NULL
);
