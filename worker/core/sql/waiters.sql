-- queue_waiters: an idle worker's one-shot wake-up tokens, one per queue it waits on. A producer's
-- insert trigger takes a token (and may hand that worker the job directly, worker/core/features/handoff.py)
-- and its NOTIFY follows at its commit.

-- name: waiter_register
-- Register this worker's tokens, only if none of this worker's rows is left: a row still there either waits to be taken
-- or is being taken by a producer, whose NOTIFY then follows at its commit. Inserting beside a row
-- that a producer has locked would wait for that producer's transaction, however long it runs.
-- Each row also carries what the insert trigger needs to hand this worker a job: its
-- lease and newest payload version for that queue, and its listener's key (NULL: no hand-offs).
INSERT INTO queue_waiters (worker_id, queue, lease, version, listen_key)
SELECT %(id)s, w.queue, w.lease, w.version, %(listen_key)s
  FROM unnest(%(queues)s::text[], %(leases)s::float8[], %(versions)s::int[]) AS w(queue, lease, version)
 WHERE NOT EXISTS (SELECT 1 FROM queue_waiters w WHERE w.worker_id = %(id)s)
ON CONFLICT DO NOTHING

-- name: waiting_flag_set
-- After the tokens have committed: set the flag in front of the insert trigger, so that
-- producers run the trigger's function again. Written only when clear: a write is a WAL record.
SELECT setval('skiplock_waiting', 1, true) WHERE pg_sequence_last_value('skiplock_waiting') IS NULL

-- name: waiter_rekey
-- A reconnected listener's new key, into this worker's tokens still out (a producer holding one
-- decides with the old key: a hand-off it makes may be lost, see worker/core/features/handoff.py).
UPDATE queue_waiters SET listen_key = %(listen_key)s WHERE ctid = ANY (ARRAY(
    SELECT ctid FROM queue_waiters WHERE worker_id = %(id)s FOR UPDATE SKIP LOCKED))

-- name: waiter_unregister
-- Delete this worker's tokens. Rows a producer has locked are left to it: it deletes them at its commit.
DELETE FROM queue_waiters WHERE ctid = ANY (ARRAY(
    SELECT ctid FROM queue_waiters WHERE worker_id = %(id)s FOR UPDATE SKIP LOCKED))

-- name: waiter_prune
-- Delete the tokens of workers that are gone (crashed: no live worker row) and that have waited a while, so a
-- worker whose own row is not written yet keeps its new waiter row.
DELETE FROM queue_waiters WHERE ctid = ANY (ARRAY(
    SELECT q.ctid FROM queue_waiters q
     WHERE q.since < now() - make_interval(secs => %(live)s)
       AND NOT EXISTS (SELECT 1 FROM workers w WHERE w.id = q.worker_id
                          AND w.last_seen > now() - make_interval(secs => %(live)s))
       FOR UPDATE OF q SKIP LOCKED))
