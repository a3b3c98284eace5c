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

-- When the scheduler should next plan the definition: its pending slot plus its spread offset
-- (worker/services/schedule.py, plan_time), written with next_fire_at. NULL = nothing planned: due now.
ALTER TABLE recurring_schedules ADD COLUMN IF NOT EXISTS plan_at timestamptz;

-- The scheduler's pass reads only the definitions that are due (plan_at passed, or nothing planned),
-- a range of this index, so ten thousand schedules cost it what the due ones cost, not a read of all.
CREATE INDEX IF NOT EXISTS recurring_schedules_plan_idx
    ON recurring_schedules ((coalesce(plan_at, '-infinity'::timestamptz)))
    WHERE enabled AND active;

-- The soonest pending fire time, for the timer that wakes the claim loop at it.
CREATE INDEX IF NOT EXISTS recurring_schedules_next_fire_idx
    ON recurring_schedules (next_fire_at)
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
