-- The insert trigger on jobs: wakes waiting workers, and hands a transaction's one job to one of them.
-- The current definition (migrations/README.md: edit it here, never in a numbered migration). Its
-- history: 002 (NOTIFY per insert), 014 (only while workers wait), 015 (waiter tokens), 020 (the
-- hand-off), 022 (the skiplock_waiting flag in the trigger's WHEN), 024 (one job wakes one worker), whose reason follows.
-- Since 015 the first producer after some workers went idle took every worker's token: it handed its
-- job to one of them (020) and sent the others a NOTIFY. Each of those woke, claimed (nothing: the job
-- was handed over), registered again and claimed once more: two empty claims and a registration per
-- idle worker for every single-job enqueue, with 2 idle workers 3.9 claims and 2 registrations per
-- job (pg_stat_statements, tests/benchmarks/bursts.py), and with N idle workers N-1 of them for nothing.
-- Now, when the transaction has inserted one job so far (no job of its own just below this one's
-- id), the trigger hands it to the longest-waiting worker of its queue whose
-- listener is connected, takes only that worker's tokens, and notifies no one else: the others stay
-- registered, and the next producer finds their tokens. A transaction with more jobs, a job that
-- cannot be handed over (due later, a lock key, a limited or paused queue, a big payload, a newer
-- payload version) or no such worker takes every token and notifies, as before.
-- A worker only ever learns that its tokens were taken from a NOTIFY addressed to it (the hand-off,
-- or the '' of the path below), so a worker left registered is registered: its rows are still there.
--
-- writes jobs: yes, because the insert trigger hands a transaction's one job to a waiting worker (running)

CREATE OR REPLACE FUNCTION skiplock_notify_jobs() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    taken queue_waiters[];
    last_id bigint;
    job record;
    handed_to text;
    lease float8;
    sent text;  -- pg_notify's void, unused
    handed_at timestamptz;
    one_job boolean := false;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM queue_waiters) THEN
        -- the flag is stale: clear it, then look again in a new snapshot (see migration 022)
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

    -- The worker to hand the newest job to: the longest-waiting one of its queue whose listener is
    -- connected (holds its key's advisory lock). Tokens other producers hold are skipped, never
    -- waited for. One block, so that anything the producer's role may not do (read the flow
    -- tables) or a session that never drew an id only costs the hand-off, never the insert.
    BEGIN
        last_id := currval('jobs_id_seq');
        -- no row lock needed: nobody else sees this transaction's row before it commits
        SELECT j.id, j.queue, j.status, j.run_at, j.version, j.payload::text AS body INTO job
          FROM jobs j
         WHERE j.id = last_id AND j.created_at = now()
           AND j.lock_key IS NULL AND octet_length(j.payload::text) < 7000
           AND NOT EXISTS (SELECT 1 FROM paused_queues p WHERE p.queue = j.queue)
           -- a limited queue (global or per-tenant limits) is claimed only under its queue_limits row lock
           AND NOT EXISTS (SELECT 1 FROM queue_limits l WHERE l.queue = j.queue AND l.limited);
        IF job.id IS NOT NULL THEN
            -- This transaction's only job so far, unless one of the ids just below is ours too: one
            -- statement's ids, and this transaction's earlier ones, are drawn in order. (Not
            -- pg_stat_get_xact_tuples_inserted: on PostgreSQL 15 it also counts earlier transactions
            -- of the session not yet flushed to the statistics.) Another session's ids in between
            -- make several jobs look like one: then one worker is woken, and its claim loop, woken
            -- when the handed job starts, claims the rest.
            one_job := NOT EXISTS (SELECT 1 FROM jobs j
                                    WHERE j.id >= last_id - 8 AND j.id < last_id AND j.xmin = pg_current_xact_id()::xid);
            -- one row locked, the chosen one: a cursor over the tokens would lock the rows it
            -- prefetched, and other producers would find no token to take
            SELECT q.worker_id, q.lease INTO handed_to, lease
              FROM queue_waiters q
             WHERE q.queue = job.queue AND q.listen_key IS NOT NULL AND q.lease IS NOT NULL
               -- "claimable now" for this waiter: the claim's own definition (skiplock_claimable.sql)
               AND skiplock_claimable(job.status, job.run_at, job.version, coalesce(q.version, 1))
               AND NOT pg_try_advisory_xact_lock(1936418927, q.listen_key)
             ORDER BY q.since
             LIMIT 1
               FOR UPDATE SKIP LOCKED;
        END IF;
    EXCEPTION WHEN object_not_in_prerequisite_state OR insufficient_privilege THEN
        handed_to := NULL;  -- no id drawn in this session (the insert gave its own), or no right
        one_job := false;
    END;

    -- The tokens taken: only the chosen worker's when this transaction's one job goes to it (all of
    -- its rows: a worker registers as a whole, only when it has none), else every one.
    WITH gone AS (
        DELETE FROM queue_waiters w
         WHERE w.ctid = ANY (ARRAY(SELECT q.ctid FROM queue_waiters q
                                    WHERE NOT (one_job AND handed_to IS NOT NULL) OR q.worker_id = handed_to
                                      FOR UPDATE SKIP LOCKED))
        RETURNING w.*
    )
    SELECT array_agg(g ORDER BY g.since) INTO taken FROM gone g;
    IF taken IS NULL THEN
        RETURN NULL;  -- other producers hold every token: their NOTIFYs follow at their commits
    END IF;

    IF handed_to IS NOT NULL THEN
        BEGIN
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
        EXCEPTION WHEN insufficient_privilege THEN
            handed_to := NULL;  -- the role may insert jobs but not update them: the NOTIFY below wakes it
        END;
    END IF;

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
