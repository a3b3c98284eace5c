-- Pushed alerts: what the rules read, and the state that holds repeats back (migration 039).

-- name: dead_rise
-- Queues with at least %(count)s jobs that died within the last %(window)s seconds (jobs_dead_recent_idx).
SELECT queue, count(*) AS dead, min(finished_at) AS since
  FROM jobs
 WHERE status = 'dead' AND finished_at > now() - make_interval(secs => %(window)s)
 GROUP BY queue
HAVING count(*) >= %(count)s
 ORDER BY queue

-- name: reaped_recently
-- Queues whose running jobs had their lease expire (a worker died mid-run) within the last %(window)s seconds.
SELECT queue, sum(reaped)::bigint AS reaped, min(minute) AS since
  FROM job_stats
 WHERE minute > now() - make_interval(secs => %(window)s) AND reaped > 0
 GROUP BY queue
 ORDER BY queue

-- name: open_conditions
-- Every condition an earlier pass found, with when it was first seen.
SELECT key, rule, subject, summary, link, since FROM alert_conditions

-- name: open_condition
-- A condition seen for the first time: the row that holds its repeats back.
INSERT INTO alert_conditions (key, rule, subject, summary, link)
VALUES (%(key)s, %(rule)s, %(subject)s, %(summary)s, %(link)s)
ON CONFLICT (key) DO NOTHING
RETURNING since

-- name: condition_still_seen
-- A condition that persists: only its summary and last_seen change; no message is sent.
UPDATE alert_conditions SET summary = %(summary)s, last_seen = now() WHERE key = %(key)s

-- name: close_condition
-- A condition no longer found: its row goes, and the caller sends the resolved message.
DELETE FROM alert_conditions WHERE key = %(key)s RETURNING since

-- name: record_sent
-- One message sent (or attempted): the Health page's list of the last alerts.
INSERT INTO alerts_sent (kind, key, title, body, delivered, error)
VALUES (%(kind)s, %(key)s, %(title)s, %(body)s, %(delivered)s, %(error)s)

-- name: last_sent
-- The most recent messages, newest first, for the console's Health page.
SELECT sent_at, kind, key, title, body, delivered, error FROM alerts_sent ORDER BY sent_at DESC, id DESC LIMIT %(limit)s

-- name: prune_sent
-- Messages older than the audit retention.
DELETE FROM alerts_sent WHERE sent_at < now() - make_interval(secs => %(retention)s)

-- name: take_alert_turn
-- Whether this process runs this pass: one worker at a time holds the lock, for its transaction.
SELECT pg_try_advisory_xact_lock(hashtext('skiplock:alerts'))
