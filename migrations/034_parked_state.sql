-- 034: the 'parked' job state, for durable jobs (docs/explanation/durable-jobs.md). Safe to re-run.
-- parked: a durable job sleeping until run_at, or waiting for a signal (run_at is then its timeout, or
--         9999-12-31, "never"). It holds no lease, no worker and no attempt. The wake pass (run_at reached), a
--         signal on its key, or an operator moves it to queued; an operator's cancel to failed.
-- A value added to an enum cannot be used in the transaction that adds it: 035 uses it.
ALTER TYPE job_status ADD VALUE IF NOT EXISTS 'parked' AFTER 'running';
