-- 013: job_stats is pruned after SKIPLOCK_STATS_RETENTION (default 8 days). The pruned minutes are
-- added to these per-queue totals in the same statement, so /metrics' counters (totals + the kept
-- minutes) never go down: Prometheus would read a drop as a counter reset. Safe to re-run.
CREATE TABLE IF NOT EXISTS job_stats_totals (
    queue     text   PRIMARY KEY,
    completed bigint NOT NULL DEFAULT 0,
    retried   bigint NOT NULL DEFAULT 0,
    failed    bigint NOT NULL DEFAULT 0,
    dead      bigint NOT NULL DEFAULT 0,
    reaped    bigint NOT NULL DEFAULT 0
);
