-- The claim's lock-key test (first inline in the claim, since 009). The current definition: edit it here
-- (migrations/README.md).
--
-- Whether a job with lock key `p_key` may start now: no running job has the key, and no other claim in
-- flight holds it (a transaction-scoped advisory lock, taken here and held to the end of the claim's
-- transaction, so two concurrent claims skip each other). The unique index jobs_lock_key_running is the
-- guarantee behind it; this only keeps the claim from picking a job the index would refuse.
-- A function rather than written out in the claim's two walks: the claim must stay short enough for
-- psycopg to cache its parse (worker/core/sql/__init__.py). VOLATILE (it takes a lock), so its probe
-- takes a fresh snapshot and also sees running jobs committed since the claim's statement began.
-- Called only for keyed rows: the claim tests `lock_key IS NULL` first.
--
-- writes jobs: no
CREATE OR REPLACE FUNCTION skiplock_key_free(p_key text) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RETURN NOT EXISTS (SELECT 1 FROM jobs r WHERE r.lock_key = p_key AND r.status = 'running' AND r.lock_key IS NOT NULL)
           -- 1936419947 ('sklk'): the advisory lock namespace of lock keys
           AND pg_try_advisory_xact_lock(1936419947, hashtext(p_key));
END
$$;
