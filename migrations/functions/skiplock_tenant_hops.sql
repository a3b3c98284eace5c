-- The claim's tenant walk (issue 15; first in 009). The current definition: edit it here (migrations/README.md).
-- The tenants of queue `q` that one claim looks at: a loose index scan of jobs_tenant_ready_idx
-- (one probe per tenant) starting after `after` and wrapping round to the first tenant, at most
-- `cap` of them. A function rather than a recursive CTE in the claim: PL/pgSQL keeps these small
-- plans for the session, while the CTE doubled the claim's planning time (~1.4 of ~2.5 ms here),
-- paid by every claim until its prepared statement switches to a generic plan.
--
-- writes jobs: no
CREATE OR REPLACE FUNCTION skiplock_tenant_hops(q text, after text, cap int) RETURNS SETOF text
LANGUAGE plpgsql STABLE AS $$
DECLARE
    t text;
    wrapped boolean := false;
    n int := 0;
BEGIN
    SELECT min(j.tenant) INTO t FROM jobs j
     WHERE j.queue = q AND j.status = 'queued' AND j.tenant IS NOT NULL AND (after IS NULL OR j.tenant > after);
    WHILE n < cap LOOP
        IF t IS NULL AND NOT wrapped AND after IS NOT NULL THEN
            -- past the last tenant: wrap round to the first, up to where this walk started
            wrapped := true;
            SELECT min(j.tenant) INTO t FROM jobs j
             WHERE j.queue = q AND j.status = 'queued' AND j.tenant IS NOT NULL AND j.tenant <= after;
        END IF;
        EXIT WHEN t IS NULL;
        RETURN NEXT t;
        n := n + 1;
        SELECT min(j.tenant) INTO t FROM jobs j
         WHERE j.queue = q AND j.status = 'queued' AND j.tenant IS NOT NULL AND j.tenant > t
           AND (NOT wrapped OR j.tenant <= after);
    END LOOP;
END $$;
