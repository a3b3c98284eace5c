-- 042: a running job's stack, on request (worker/core/features/job_stacks.py). One row per job: an
-- operator's request (from the console or `skiplock jobs stack`), then the stack the worker holding the
-- job captured from the handler's thread or task, with the time it was taken. A new request replaces the
-- row. A side table: the claim and the ack never read it; the worker reads it only for the jobs it runs.
-- The pruner drops rows past the audit retention (the request is audited too).
CREATE TABLE IF NOT EXISTS job_stacks (
    job_id        bigint      PRIMARY KEY,
    requested_at  timestamptz NOT NULL DEFAULT now(),
    requested_by  text        NOT NULL,
    worker_id     text,                   -- who captured it
    attempt       integer,                -- the run it was captured in
    captured_at   timestamptz,            -- NULL: asked, not captured yet
    stack         text
);
CREATE INDEX IF NOT EXISTS job_stacks_asked_idx ON job_stacks (job_id) WHERE captured_at IS NULL;
