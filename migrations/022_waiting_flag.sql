-- 022: a flag in front of the insert trigger, so that producers pay nothing while no worker waits
-- (issue 19, part 1). Safe to re-run.
-- Since 014 the trigger's function ran for every INSERT statement, only to find queue_waiters empty:
-- 64 pgbench producers with no worker waiting made 0.89 of the trigger-free insert rate, and a
-- trigger whose function does nothing at all 0.95. A WHEN condition is evaluated before the trigger
-- is queued, so with it false the statement runs no function at all: 0.97 with this flag (same run).
--
-- The flag is a sequence's "is_called": pg_sequence_last_value() is NULL while it is clear. It is
-- a hint, like the NOTIFY it guards: set means "tokens may exist", clear means "none did when a
-- producer last looked". Sequence writes are not transactional, which is what makes it work:
-- - a worker sets it after its token has committed (skiplock.core.waiting), so a producer that sees
--   the flag clear can only miss a token whose flag-setting comes later, and then sees the flag;
-- - a producer whose trigger finds no token at all clears it, then looks once more (a new snapshot)
--   and sets it again if a token appeared: a worker whose flag-setting came before the clear had
--   committed its token before it, so the second look finds that token;
-- - a producer that takes tokens leaves the flag set: if it rolls back, the tokens are back and the
--   next producer still looks. One extra trigger call per idle spell clears it afterwards.
-- Anyone may read the flag (the WHEN runs as the producer) and flip it: the worst a flip does is
-- one wasted trigger call or a wake-up left to polling, which stays the truth.
CREATE SEQUENCE IF NOT EXISTS skiplock_waiting MINVALUE 0 START 0;
GRANT SELECT, UPDATE ON SEQUENCE skiplock_waiting TO PUBLIC;
-- set: workers may be registered already (this runs while old workers are up)
SELECT setval('skiplock_waiting', 1, true);

-- 020's function, with the stale flag cleared where it found no token.
CREATE OR REPLACE FUNCTION skiplock_notify_jobs() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    taken queue_waiters[];
    token queue_waiters;
    last_id bigint;
    job record;
    handed_to text;
    lease float8;
    sent text;  -- pg_notify's void, unused
    handed_at timestamptz;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM queue_waiters) THEN
        -- the flag is stale: clear it, then look again in a new snapshot (see the header)
        PERFORM setval('skiplock_waiting', 0, false);
        IF EXISTS (SELECT 1 FROM queue_waiters) THEN
            PERFORM setval('skiplock_waiting', 1, true);
        END IF;
        RETURN NULL;
    END IF;
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        PERFORM pg_notify('skiplock_jobs', '');  -- see 015: no token is taken there
        RETURN NULL;
    END IF;
    WITH gone AS (
        DELETE FROM queue_waiters w
         WHERE w.ctid = ANY (ARRAY(SELECT q.ctid FROM queue_waiters q FOR UPDATE SKIP LOCKED))
        RETURNING w.*
    )
    SELECT array_agg(g ORDER BY g.since) INTO taken FROM gone g;
    IF taken IS NULL THEN
        RETURN NULL;  -- other producers hold every token: their NOTIFYs follow at their commits
    END IF;

    -- One block, so that anything the producer's role may not do (UPDATE jobs, read the flow
    -- tables) or a session that never drew an id only costs the hand-off, never the insert.
    BEGIN
        last_id := currval('jobs_id_seq');
        -- no row lock needed: nobody else sees this transaction's row before it commits
        SELECT j.id, j.queue, j.version, j.payload::text AS body INTO job
          FROM jobs j
         WHERE j.id = last_id AND j.status = 'queued' AND j.run_at <= now() AND j.created_at = now()
           AND j.lock_key IS NULL AND octet_length(j.payload::text) < 7000
           AND NOT EXISTS (SELECT 1 FROM paused_queues p WHERE p.queue = j.queue)
           AND NOT EXISTS (SELECT 1 FROM queue_limits l
                            WHERE l.queue = j.queue AND (l.concurrency IS NOT NULL OR l.rate IS NOT NULL));
        IF job.id IS NOT NULL THEN
            FOREACH token IN ARRAY taken LOOP
                IF token.queue = job.queue AND token.listen_key IS NOT NULL AND token.lease IS NOT NULL
                   AND coalesce(job.version, 1) <= coalesce(token.version, 1)
                   AND NOT pg_try_advisory_xact_lock(1936418927, token.listen_key) THEN
                    handed_to := token.worker_id;
                    lease := token.lease;
                    EXIT;
                END IF;
            END LOOP;
        END IF;
        IF handed_to IS NOT NULL THEN
            handed_at := clock_timestamp();  -- once: the lease is exactly its length from the start
            WITH h AS (
                UPDATE jobs j
                   SET status = 'running',
                       attempts = j.attempts + 1,
                       started_at = handed_at,
                       lease_until = handed_at + make_interval(secs => lease),
                       worker_id = handed_to
                 WHERE j.id = job.id
                RETURNING j.*
            )
            SELECT pg_notify('skiplock_handoff', json_build_object(
                       'worker', handed_to, 'id', h.id, 'queue', h.queue, 'attempts', h.attempts,
                       'max_attempts', h.max_attempts, 'version', h.version, 'tenant', h.tenant,
                       'priority', h.priority, 'run_at', h.run_at, 'created_at', h.created_at,
                       'started_at', h.started_at, 'unique_key', h.unique_key)::text
                   || E'\n' || job.body)
              INTO sent
              FROM h;
        END IF;
    EXCEPTION WHEN object_not_in_prerequisite_state OR insufficient_privilege THEN
        handed_to := NULL;  -- no id drawn in this session (the insert gave its own), or no right
    END;

    IF EXISTS (SELECT 1 FROM unnest(taken) t WHERE t.worker_id IS DISTINCT FROM handed_to) THEN
        PERFORM pg_notify('skiplock_jobs', '');
    END IF;
    RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS jobs_notify_insert ON jobs;
CREATE TRIGGER jobs_notify_insert
    AFTER INSERT ON jobs
    FOR EACH STATEMENT
    WHEN (pg_sequence_last_value('skiplock_waiting') IS NOT NULL)
    EXECUTE FUNCTION skiplock_notify_jobs();
