-- 020: hand a new job straight to an idle worker (issue 19, idle pickup). Safe to re-run.
-- An idle pickup was a NOTIFY and then a claim: the claim's UPDATE and commit on a backend that had
-- slept cost ~1.1 ms of the ~1.4 ms from the producer's commit to the handler's start. Now, when the
-- producer's insert trigger takes an idle worker's waiter token (migration 015) and the job it just
-- inserted is one that worker could claim at once, the trigger claims it for that worker in the
-- producer's own transaction and the NOTIFY carries the job: the worker starts the handler with no
-- round trip. Everything else stays as 015: NOTIFY is a hint, polling is the truth.
--
-- Which job: the last one this session inserted (currval of jobs_id_seq), only if this transaction
-- inserted it (created_at = now(), the transaction's start) and a claim could take it now: queued,
-- due, no lock key, its queue neither paused nor limited, its payload version one the worker runs,
-- and short enough for a NOTIFY (payloads must stay under 8000 bytes). Otherwise: 015's NOTIFY.
-- Which worker: one whose token for that queue was taken now, whose listener is alive. Each
-- listener holds a session advisory lock on a random key (class 1936418927, 'skho') and writes
-- the key into its tokens; pg_try_advisory_xact_lock failing on that key means the listener's
-- session is still there. A key nobody holds means a dead worker: no hand-off.
-- A hand-off can still be lost (the listener's connection drops between this check and the
-- NOTIFY's delivery): the job then runs under that worker's id without the worker knowing. A
-- worker whose listener reconnects releases such jobs after a few seconds, its attempt not
-- counted (skiplock.core.handoff); failing that, the reaper returns it when the lease expires.
-- The two notifications of one transaction arrive in order: the hand-off first, then '' for the
-- other workers whose tokens were taken, which look for work as before.
-- In the claim's terms the hand-off is the lean claim of one job: attempts + 1, a lease from the
-- worker's token (its lease for that queue), started_at and the lease counted from the clock, not
-- from the transaction's start, since a producer's transaction may be long.
-- A producer role without UPDATE on jobs (or SELECT on the flow tables) only loses the hand-off.
ALTER TABLE queue_waiters ADD COLUMN IF NOT EXISTS lease float8;      -- the worker's lease for this queue
ALTER TABLE queue_waiters ADD COLUMN IF NOT EXISTS version int;       -- newest payload version it runs
ALTER TABLE queue_waiters ADD COLUMN IF NOT EXISTS listen_key int;    -- its listener's advisory lock key

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
