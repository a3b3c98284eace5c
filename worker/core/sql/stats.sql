-- job_stats: per-minute counts per queue and worker (the ack writes its own in jobs_ack.sql), and their retention.

-- name: reaped_stats
-- Reaped-lease counter for metrics: one row per reaper outcome per minute.
INSERT INTO job_stats (minute, queue, worker_id, reaped)
SELECT date_trunc('minute', now()), queue, 'reaper', count(*)
  FROM unnest(%(queues)s::text[]) AS queue GROUP BY queue
ON CONFLICT (minute, queue, worker_id) DO UPDATE SET reaped = job_stats.reaped + EXCLUDED.reaped

-- name: prune_stats
-- Up to %(limit)s per-minute rows older than the retention are deleted and their counts added to
-- job_stats_totals in the same statement: the metrics' counters (totals + kept rows) stay monotonic.
WITH gone AS (
    DELETE FROM job_stats s
     WHERE s.ctid = ANY (ARRAY(SELECT ctid FROM job_stats
                                WHERE minute < now() - make_interval(secs => %(older_than)s)
                                LIMIT %(limit)s))
    RETURNING queue, completed, retried, failed, dead, reaped
), added AS (
    INSERT INTO job_stats_totals AS t (queue, completed, retried, failed, dead, reaped)
    SELECT queue, sum(completed), sum(retried), sum(failed), sum(dead), sum(reaped) FROM gone GROUP BY queue
    ON CONFLICT (queue) DO UPDATE SET completed = t.completed + EXCLUDED.completed,
                                      retried = t.retried + EXCLUDED.retried, failed = t.failed + EXCLUDED.failed,
                                      dead = t.dead + EXCLUDED.dead, reaped = t.reaped + EXCLUDED.reaped
)
SELECT count(*) FROM gone
