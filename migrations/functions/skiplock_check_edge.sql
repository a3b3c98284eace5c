-- skiplock_check_edge: part of the workflows (issue 33; first in 026_workflows.sql, whose text stays as it was
-- for databases that ran it). The current definition: edit it here (migrations/README.md).
-- The design: docs/explanation/workflows-design.md.
--
-- At the child's COMMIT, each new edge looks at its parent once more, under FOR SHARE. A parent that
-- is final (or gone) now is settled here; one that is not cannot finish before this commit (its ack
-- waits for the lock), and its settle, whose queries take fresh snapshots, then sees this edge.
--
-- writes jobs: yes, through skiplock_settle: a parent already final at the child's commit releases or ends it
CREATE OR REPLACE FUNCTION skiplock_check_edge() RETURNS trigger
LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
    st text;
    head text;
BEGIN
    -- (an edge settled already, earlier in this transaction, is left alone by skiplock_settle itself:
    -- it closes only edges still open)
    SELECT j.status::text, j.error_headline INTO st, head FROM jobs j WHERE j.id = NEW.parent FOR SHARE;
    IF NOT FOUND THEN
        -- gone: a stored result or a purge's tombstone says how it ended; else history mode delete
        -- deleted it at its success (or it moved to jobs_history, also a success)
        SELECT r.state::text, r.error INTO st, head FROM job_results r WHERE r.job_id = NEW.parent;
        st := coalesce(st, 'succeeded');
    END IF;
    IF st IN ('succeeded', 'dead', 'failed') THEN
        PERFORM skiplock_settle(ARRAY[NEW.parent], ARRAY[st], ARRAY[NULL::bigint], ARRAY[head]);
    END IF;
    RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS job_deps_check ON job_deps;
CREATE CONSTRAINT TRIGGER job_deps_check AFTER INSERT ON job_deps
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION skiplock_check_edge();
