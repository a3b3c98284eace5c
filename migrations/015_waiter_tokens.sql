-- 015: a waiter row is a one-shot wake-up token (issue 19). Safe to re-run.
-- With migration 014 a worker stayed registered until a claim filled a whole batch. A worker that
-- keeps up with its producers never fills one, so it stayed registered, and every producer paid
-- for the NOTIFY's commit lock again (16 pgbench producers with two workers keeping up: 0.21 of
-- the same insert with a silent trigger). Now the first producer that finds waiter rows deletes
-- them and sends one NOTIFY; the producers after it find none and commit without one, until a
-- worker has looked for work, found too little and registered again.
-- Rows locked by a producer that has not committed yet are skipped, not waited for: that producer
-- sends the NOTIFY at its commit, and a long business transaction never holds up another producer.
-- Under REPEATABLE READ or SERIALIZABLE, deleting a row that another producer deleted after this
-- transaction's snapshot would raise a serialization failure in the user's transaction: there the
-- trigger only notifies, as 014 did.
CREATE OR REPLACE FUNCTION skiplock_notify_jobs() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM queue_waiters) THEN
        IF current_setting('transaction_isolation') <> 'read committed' THEN
            PERFORM pg_notify('skiplock_jobs', '');
        ELSE
            DELETE FROM queue_waiters w
             WHERE w.ctid = ANY (ARRAY(SELECT q.ctid FROM queue_waiters q FOR UPDATE SKIP LOCKED));
            IF FOUND THEN
                PERFORM pg_notify('skiplock_jobs', '');
            END IF;
        END IF;
    END IF;
    RETURN NULL;
END $$;
