-- 029: an operator's command to one worker process (issue 36: worker controls). Safe to re-run.
-- The console writes 'quiet' (finish running jobs, claim no more) or 'stop' (the graceful shutdown
-- SIGTERM starts) with who asked and when (worker/core/worker_control.py); the worker reads it back
-- with its registry heartbeat (every few seconds) and obeys. A restarted process has a new id, so a
-- command never outlives the process it was meant for.
ALTER TABLE workers ADD COLUMN IF NOT EXISTS command text;
ALTER TABLE workers ADD COLUMN IF NOT EXISTS command_by text;
ALTER TABLE workers ADD COLUMN IF NOT EXISTS command_at timestamptz;
DO $$ BEGIN
    ALTER TABLE workers ADD CONSTRAINT workers_command_known CHECK (command IN ('quiet', 'stop'));
EXCEPTION WHEN duplicate_object THEN NULL;
END $$;
