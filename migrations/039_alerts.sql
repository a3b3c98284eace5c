-- 039: pushed alerts (worker/services/alerts.py). Safe to re-run.
-- alert_conditions: what is wrong now, one row per rule and subject (e.g. 'dead_rise:emails'), from the
--                   pass that first saw it until the pass that finds it gone (then deleted, and a resolved
--                   message is sent). A row is what holds repeats back while the condition persists.
-- alerts_sent:      every message sent (firing, resolved, test), whether it was delivered, and why not;
--                   the console's Health page lists the last ones. The pruner keeps them for the audit retention.
CREATE TABLE IF NOT EXISTS alert_conditions (
    key        text        PRIMARY KEY,
    rule       text        NOT NULL,
    subject    text        NOT NULL,
    summary    text        NOT NULL,
    link       text        NOT NULL,
    since      timestamptz NOT NULL DEFAULT now(),
    last_seen  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS alerts_sent (
    id         bigserial   PRIMARY KEY,
    sent_at    timestamptz NOT NULL DEFAULT now(),
    kind       text        NOT NULL CHECK (kind IN ('firing', 'resolved', 'test')),
    key        text        NOT NULL,
    title      text        NOT NULL,
    body       text        NOT NULL,
    delivered  boolean     NOT NULL,
    error      text
);
CREATE INDEX IF NOT EXISTS alerts_sent_at_idx ON alerts_sent (sent_at);
