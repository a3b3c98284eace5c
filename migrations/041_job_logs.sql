-- 041: the job's own log lines (worker/runtime/job_logs.py captures them, worker/core/features/job_logs.py
-- writes and reads them). One row per attempt that logged anything: a handler that logs nothing has no row.
-- The row is rewritten whole at each heartbeat while the run goes on and once more with its ack, so a
-- killed run keeps what it had logged until its last heartbeat. The lines are bounded per attempt
-- (worker/runtime/job_logs.py: MAX_LINES, MAX_BYTES); `dropped` counts those past the bound.
-- A side table, never a column on jobs: the claim and the ack never read or lock it. The pruner drops
-- rows past the longest of the history and dead retentions.
CREATE TABLE IF NOT EXISTS job_logs (
    job_id      bigint      NOT NULL,
    attempt     integer     NOT NULL,
    worker_id   text        NOT NULL,
    lines       text        NOT NULL,  -- the formatted records, one per line (a traceback's lines included)
    line_count  integer     NOT NULL,
    dropped     integer     NOT NULL DEFAULT 0,  -- records past the bound, not kept
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, attempt)
);
CREATE INDEX IF NOT EXISTS job_logs_updated_idx ON job_logs (updated_at);
-- The console's search finds jobs by any text in their lines through a trigram index, when pg_trgm is
-- there (030 creates it where it can); without it the search scans job_logs, and the migration goes on.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm') THEN
        CREATE INDEX IF NOT EXISTS job_logs_lines_trgm_idx ON job_logs USING gin (lines gin_trgm_ops);
    ELSE
        RAISE NOTICE 'pg_trgm is not installed: the console''s log-text search will scan job_logs';
    END IF;
END $$;
