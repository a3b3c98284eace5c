-- 030: indexes for the console's search (issue 36: "find jobs by payload fields, unique key, lock key,
-- tenant or error text; fast on 1,000,000 rows"). Safe to re-run.
--
-- Write cost: a claim and an ack are not HOT updates (status is in partial indexes' predicates), so every
-- index on jobs takes an insertion per enqueue, per claim and per ack of each row it covers. So:
--   * none of these indexes covers running jobs (status <> 'running'): the claim, the hot path's busiest
--     write, adds nothing to them. Running jobs are few (at most the workers' concurrency), and the
--     search reads them through jobs_running_idx instead (webapp/search_queries.py);
--   * keys and tenants are indexed only where they are set (most jobs have none, and pay nothing);
--   * error text only where a job has an error (last_error IS NOT NULL): the failure path;
--   * the payload index covers every other job, because a search by payload is the one an operator needs
--     for queued work too ("where is customer 42's job?"). jsonb_path_ops keeps one hash per leaf value,
--     smaller and cheaper to update than the default jsonb_ops, and serves `payload @> '{...}'`, the only
--     form the console builds.
-- Measured (docs/benchmarks/console-search.md): covering running jobs too cost a 20,000-job drain ~50%
-- more database CPU; with running jobs left out, the enqueue pays for the payload index and the
-- drain's claims and acks nothing.

CREATE INDEX IF NOT EXISTS jobs_payload_idx ON jobs USING gin (payload jsonb_path_ops)
    WHERE status <> 'running';

CREATE INDEX IF NOT EXISTS jobs_unique_key_idx ON jobs (unique_key) WHERE unique_key IS NOT NULL AND status <> 'running';
CREATE INDEX IF NOT EXISTS jobs_lock_key_idx ON jobs (lock_key) WHERE lock_key IS NOT NULL AND status <> 'running';
CREATE INDEX IF NOT EXISTS jobs_tenant_idx ON jobs (tenant) WHERE tenant IS NOT NULL AND status <> 'running';

-- Error text is a substring search (ILIKE '%...%'): a trigram index serves it. pg_trgm ships with
-- PostgreSQL's contrib package, which a server may lack, and creating it needs CREATE on the database:
-- without either, the migration goes on and the search still works, as a scan of the jobs that have an
-- error (slow on a big table). The migration must not fail on such a server.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm') THEN
        RAISE NOTICE 'pg_trgm is not available: the console''s error-text search will scan the jobs that have an error';
        RETURN;
    END IF;
    CREATE EXTENSION IF NOT EXISTS pg_trgm;
    CREATE INDEX IF NOT EXISTS jobs_last_error_trgm_idx ON jobs USING gin (last_error gin_trgm_ops)
        WHERE last_error IS NOT NULL AND status <> 'running';
EXCEPTION WHEN insufficient_privilege THEN
    RAISE NOTICE 'no privilege to create pg_trgm: the console''s error-text search will scan the jobs that have an error';
END $$;
