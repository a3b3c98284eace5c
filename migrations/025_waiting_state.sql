-- 025: the 'waiting' job state, for workflows (issue 33). Safe to re-run.
-- waiting: enqueued with parents (depends_on) that are not all final yet; never claimed. The last
--          parent's finalising statement moves it to queued (or, when a parent failed, to dead or
--          failed) through skiplock_settle() (migration 026). It is outside jobs_ready_idx, so the
--          claim never reads it.
-- A value added to an enum cannot be used in the transaction that adds it: 026 uses it.
ALTER TYPE job_status ADD VALUE IF NOT EXISTS 'waiting' BEFORE 'queued';
