-- 037: schedules made at runtime, and unique keys that outlive their job. Safe to re-run.

-- Where a recurring definition comes from: 'code' (recurring() / @task(every=, cron=), written by the
-- workers' start-up sync) or 'runtime' (skiplock.schedules.create, `skiplock schedules create`, the
-- console, skiplock_create_schedule() in SQL). The start-up sync never touches a runtime row, and
-- the console edits only runtime rows. Existing rows were all written by the sync: 'code'.
ALTER TABLE recurring_schedules ADD COLUMN IF NOT EXISTS origin text NOT NULL DEFAULT 'code';
-- The tenant every job of the schedule is enqueued for (NULL = no tenant).
ALTER TABLE recurring_schedules ADD COLUMN IF NOT EXISTS tenant text;

DO $$
BEGIN
    ALTER TABLE recurring_schedules ADD CONSTRAINT recurring_origin CHECK (origin IN ('code', 'runtime'));
EXCEPTION WHEN duplicate_object THEN NULL;
END $$;

-- The scheduler's pass reads only the definitions that are due (next_fire_at passed, or nothing
-- planned yet), so thousands of schedules cost one index range per pass, not a read of them all.
CREATE INDEX IF NOT EXISTS recurring_schedules_due_idx
    ON recurring_schedules (next_fire_at NULLS FIRST)
    WHERE enabled AND active;

-- enqueue(..., unique_key=k, unique_for=seconds): the key is held here until expires_at, whatever
-- becomes of its job (which may be finished and deleted long before). The primary key is what makes
-- racing producers agree on one job; the expiry index lets the pruner delete expired keys in
-- batches without reading the live ones.
CREATE TABLE IF NOT EXISTS unique_keys (
    key        text        PRIMARY KEY,
    job_id     bigint      NOT NULL,                  -- no FK: the job may be finished and deleted
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);

CREATE INDEX IF NOT EXISTS unique_keys_expires_at_idx ON unique_keys (expires_at);
