-- 028: handler run times per queue per minute (issue 36: "run time per task"). Safe to re-run.
-- Each worker adds its minute's histogram with its registry heartbeat (worker/core/run_times.py),
-- off the ack path; the console sums the rows of a range into p50/p95/max per queue. A queue has one
-- handler (@task), so a queue's run times are its task's. Keyed by worker, like job_stats, so that
-- workers never wait on each other's row lock; the pruner drops rows past SKIPLOCK_STATS_RETENTION.
CREATE TABLE IF NOT EXISTS job_runtimes (
    minute    timestamptz NOT NULL,
    queue     text        NOT NULL,
    worker_id text        NOT NULL,
    counts    bigint[]    NOT NULL,  -- runs per bucket of worker/core/run_times.py BOUNDS, +Inf last
    total     bigint      NOT NULL,
    sum_s     float8      NOT NULL,
    max_s     float8      NOT NULL,
    PRIMARY KEY (minute, queue, worker_id)
);
CREATE INDEX IF NOT EXISTS job_runtimes_minute_idx ON job_runtimes (minute);
