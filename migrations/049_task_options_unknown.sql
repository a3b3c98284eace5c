-- 049: the @task options a job was enqueued without. Its producer had neither the task module nor the
-- queue's task_defaults row (027), as when a job is enqueued before any worker of its queue has
-- started: it wrote SKIPLOCK_MAX_ATTEMPTS, version 1 and no lock_key, whatever @task declared. Such a
-- job now says which options it lacks (bits: 1 max_attempts, 2 version, 4 lock_key), and a worker of
-- its queue writes them in from its task (worker/core/task_options.py). NULL, every other job: its
-- options were known or given, and nothing reads it. Safe to re-run.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS task_options_unknown smallint;

-- the workers' filling-in reads only the marked jobs, never the rest of the table
CREATE INDEX IF NOT EXISTS jobs_task_options_unknown_idx ON jobs (queue) WHERE task_options_unknown IS NOT NULL;
