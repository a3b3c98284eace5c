-- The console's failed-login throttle: one row of login_failures per (account, address) pair (migration 008's
-- table; its key is 'pair:<user>|<address>'). failures counts the pair's failed logins; locked_until is when
-- the pair may try again (the growing delay); first_at is when the count started.

-- name: standing
-- Seconds until this pair may try again (NULL when it may now), and whether it has failures counted.
SELECT extract(epoch FROM max(locked_until) FILTER (WHERE locked_until > now()) - now()) AS wait,
       count(*) > 0 AS counted
  FROM login_failures
 WHERE key = %(key)s

-- name: count_failure
-- One more failed login for the pair, atomic under concurrent workers; a pair quiet for `window` seconds since its
-- last failure (or its last delay) starts again at 1. Past `limit` failures the pair waits 1, 2, 4 ... seconds
-- after each, at most `cap`. Returns the count and the delay set (NULL while under the limit).
INSERT INTO login_failures AS f (key, failures) VALUES (%(key)s, 1)
ON CONFLICT (key) DO UPDATE SET
    failures = CASE WHEN coalesce(f.locked_until, f.first_at) < now() - make_interval(secs => %(window)s)
                    THEN 1 ELSE f.failures + 1 END,
    first_at = CASE WHEN coalesce(f.locked_until, f.first_at) < now() - make_interval(secs => %(window)s)
                    THEN now() ELSE f.first_at END,
    locked_until = CASE WHEN coalesce(f.locked_until, f.first_at) < now() - make_interval(secs => %(window)s)
                        THEN NULL ELSE f.locked_until END
RETURNING failures

-- name: delay
-- Make the pair wait `seconds` from now (its growing delay after a failure past the limit).
UPDATE login_failures SET locked_until = now() + make_interval(secs => %(seconds)s) WHERE key = %(key)s

-- name: clear
-- A good login forgets the pair's failures.
DELETE FROM login_failures WHERE key = %(key)s

-- name: recent_throttles
-- The newest login throttles of the last `hours` hours from the audit trail, for the Health page. It reads the
-- newest `scan` audit rows only (audit_log is indexed by id alone), which a day of throttles never outgrows.
SELECT at, actor, detail->>'address' AS address, detail->>'via' AS via, (detail->>'failures')::int AS failures,
       (detail->>'seconds')::int AS seconds
  FROM (SELECT at, actor, action, detail FROM audit_log ORDER BY id DESC LIMIT %(scan)s) AS newest
 WHERE action = 'login throttled' AND at > now() - make_interval(hours => %(hours)s)
 ORDER BY at DESC
 LIMIT %(limit)s
