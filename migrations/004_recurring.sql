-- 004: recurring job definitions and the durable record of every enqueued slot. Safe to re-run.

-- One row per recurring definition, written by the workers' start-up sync from code; the
-- console and `skiplock schedules` read it and flip `enabled`.
CREATE TABLE IF NOT EXISTS recurring_schedules (
    name         text        PRIMARY KEY,
    queue        text        NOT NULL,
    kind         text        NOT NULL,                  -- 'cron' or 'interval'
    schedule     text        NOT NULL,                  -- '0 2 * * *' or '5m'
    timezone     text        NOT NULL DEFAULT 'UTC',    -- IANA name; cron fields are read in it
    payload      jsonb       NOT NULL DEFAULT 'null',
    enabled      boolean     NOT NULL DEFAULT true,     -- false while an operator has it paused
    active       boolean     NOT NULL DEFAULT true,     -- false once no longer defined in code
    catch_up     text        NOT NULL DEFAULT 'once',   -- after downtime: one catch-up run, or skip
    last_fire_at timestamptz,                           -- the latest slot whose time has come
    next_fire_at timestamptz,                           -- the pending slot (its job is queued); NULL = plan from now
    updated_at   timestamptz NOT NULL DEFAULT now(),

    CONSTRAINT recurring_kind CHECK (kind IN ('cron', 'interval')),
    CONSTRAINT recurring_catch_up CHECK (catch_up IN ('once', 'skip'))
);

-- "This slot was enqueued", durably: the primary key makes a second insert of the same
-- (name, fire_at) a no-op for any number of workers, even after the job itself is long gone
-- (the jobs_unique_inflight index forgets a key as soon as the job finishes).
CREATE TABLE IF NOT EXISTS recurring_slots (
    name        text        NOT NULL REFERENCES recurring_schedules (name) ON DELETE CASCADE,
    fire_at     timestamptz NOT NULL,
    job_id      bigint,                                 -- no FK: finished jobs are deleted
    enqueued_at timestamptz NOT NULL DEFAULT now(),
    manual      boolean     NOT NULL DEFAULT false,     -- a "run now" instance, outside the schedule
    PRIMARY KEY (name, fire_at)
);

-- The slot pruner deletes by age across all definitions.
CREATE INDEX IF NOT EXISTS recurring_slots_fire_at_idx ON recurring_slots (fire_at);
