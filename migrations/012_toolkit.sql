-- 012: the developer's toolkit. Safe to re-run; nullable columns only, so SQL producers and
-- existing rows are untouched.
-- How many times a job put itself back with `raise Snooze(...)` (NULL = never): a job that snoozes
-- forever uses no attempts, so this is what shows it in the console.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS snooze_count integer;
-- The OpenTelemetry context of the span that enqueued the job ({"traceparent": ...}; NULL without
-- OpenTelemetry or from SQL producers): the run's span links to it (worker/tracing.py).
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS trace_context jsonb;
-- A cancel request for a running job (worker/cancel.py): who asked and when. The worker reads it
-- at each heartbeat; a request older than the run's started_at does not cancel that run.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS cancel_requested_at timestamptz;
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS cancel_requested_by text;
-- The last 20 failed attempts' errors, newest last, each {attempt, worker, at, duration_ms, error}
-- (worker/attempts.py); last_error stays the latest error for SQL users.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS attempt_errors jsonb;
