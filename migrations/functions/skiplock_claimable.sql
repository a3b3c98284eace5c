-- skiplock_claimable: "claimable now", per job row, written once. The claim's walk of jobs_ready_idx
-- (worker/core/sql/jobs_claim.sql), the insert trigger's hand-off (skiplock_notify_jobs) and "why isn't it
-- running" (worker/monitor/why.py) all ask it. The rest of what a claim decides is per queue (paused,
-- limits) or per key (a lock key's running job and its advisory lock), and stays where those live.
--
-- Written so that the planner inlines it (tests/integration/test_claim_plan.py checks the claim's plan
-- names no call of it): LANGUAGE sql, one SELECT of one expression with no FROM and no subquery,
-- STABLE (now() is stable, so IMMUTABLE would not be inlined), not STRICT (AND is not strict, so a
-- STRICT function is not inlined). Inlined, its `p_status = 'queued'` is the claim's own qual again, and
-- proves jobs_ready_idx's predicate: the plan is the same index walk. Not inlined (STRICT, IMMUTABLE,
-- or with the lock-key probe inside: a subquery), it is an opaque call the planner cannot match to the
-- partial index: a sequential scan and a sort of jobs, and an SQL function call per row.
--
-- writes jobs: no
CREATE OR REPLACE FUNCTION skiplock_claimable(p_status job_status, p_run_at timestamptz, p_version int,
                                              p_known_version int) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT p_status = 'queued' AND p_run_at <= now() AND p_version <= p_known_version
$$;
