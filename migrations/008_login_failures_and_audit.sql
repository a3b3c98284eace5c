-- 008: failed console logins, counted per user name and per client address. Safe to re-run.
-- In PostgreSQL rather than process memory so every gunicorn worker and host sees the same counts.
-- key is 'user:<name>' or 'addr:<ip>'; a key with locked_until in the future refuses logins.
CREATE TABLE IF NOT EXISTS login_failures (
    key          text PRIMARY KEY,
    failures     integer NOT NULL DEFAULT 0,
    first_at     timestamptz NOT NULL DEFAULT now(),
    locked_until timestamptz
);

-- The operator audit trail: every console action, who did it and to which jobs (ids, or the
-- filter and the count). Read by the console's Audit page; the log line stays as well.
CREATE TABLE IF NOT EXISTS audit_log (
    id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at      timestamptz NOT NULL DEFAULT now(),
    actor   text NOT NULL,
    role    text,
    action  text NOT NULL,
    count   integer NOT NULL,
    detail  jsonb NOT NULL DEFAULT '{}'
);
