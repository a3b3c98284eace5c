-- 048: each edge of a workflow keeps the queue (the task) of its two jobs, written when the edge is
-- (worker/core/sql/workflows.sql enqueue_linked, migrations/functions/skiplock_enqueue_after.sql), so the
-- console names every job of a workflow after its row is gone (history mode delete removes a job's row
-- at its success). The child's queue is the new job's own; the parent's is read from its row, which a
-- parent that has not ended still has. Nullable and without a default: adding them rewrites nothing, and
-- edges made before this migration name no queue (the console says "task not recorded" for those).
ALTER TABLE job_deps ADD COLUMN IF NOT EXISTS parent_queue text;
ALTER TABLE job_deps ADD COLUMN IF NOT EXISTS child_queue text;
