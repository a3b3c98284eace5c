-- A queue's running jobs, found by queue (issue 15: the global limits' count, in every claim).
--
-- skiplock_limit_allowances (migration 018) counts a queue's running jobs.
-- jobs_lease_idx (lease_until, WHERE status = 'running') made it visit every running job of every queue, and the heap tuple of each: measured with auto_explain in
-- a 2-worker drain beside a busy limited queue, 400 rows removed by the filter and 3.7-8 ms per count,
-- on every claim (a 20,000-job drain then used 30-40% more CPU per job than beside no limited queue).
-- jobs_running_idx leads with the queue, so the count reads only the limited queue's own entries.
-- It replaces jobs_lease_idx rather than adding to it: a claim is not a HOT update (status is in
-- the partial indexes' predicates), so each index costs an insertion per claimed job; this one
-- costs the same as the old. The reaper's "leases expired, oldest first" still reads only running
-- jobs, now across queues with a sort of the few hundred that are running.
CREATE INDEX IF NOT EXISTS jobs_running_idx ON jobs (queue, lease_until) WHERE status = 'running';
DROP INDEX IF EXISTS jobs_lease_idx;
