-- 027: each queue's @task options that a producer must write into the job, kept by the workers
-- (issue 35, defect 10). Safe to re-run.
-- A web process that enqueues by queue name without importing the worker's task module could not see
-- @task("reports", max_attempts=2): it wrote the default 20. Each worker now writes its tasks' options
-- here when it starts; a producer that lacks a queue's task reads them (worker/core/task_defaults.py),
-- one small query per queue per minute, never per job. The options a worker applies itself (lease,
-- concurrency, rate, upcasters, hooks, schedules) need no row.

CREATE TABLE IF NOT EXISTS task_defaults (
    queue             text PRIMARY KEY,
    max_attempts      int CHECK (max_attempts >= 1),              -- NULL: the producer's SKIPLOCK_MAX_ATTEMPTS
    version           int NOT NULL DEFAULT 1 CHECK (version >= 1), -- the payload version the handler takes
    lock_key          text,                                       -- a fixed @task(lock_key="...")
    lock_key_computed boolean NOT NULL DEFAULT false,             -- lock_key is a function of the payload
    updated_by        text,                                       -- the worker that wrote the row last
    updated_at        timestamptz NOT NULL DEFAULT now()
);
