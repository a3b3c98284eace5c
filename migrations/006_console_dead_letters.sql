-- 006: the console's dead-letter list across queues. Safe to re-run.
-- "Newest dead jobs first, any queue" cannot use jobs_finished_idx (queue comes before
-- finished_at there), so without this index it sorts every dead row. Partial on dead/failed: the
-- queued/running churn never touches it, and the pruner's deletes keep it small.
CREATE INDEX IF NOT EXISTS jobs_dead_recent_idx
    ON jobs (status, finished_at, id)
    WHERE status IN ('dead', 'failed');
