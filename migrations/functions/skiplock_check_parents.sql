-- skiplock_check_parents: part of the workflows (issue 33; first in 026_workflows.sql, whose text stays as it was
-- for databases that ran it). The current definition: edit it here (migrations/README.md).
-- The design: docs/explanation/workflows-design.md.
--
-- The workflow a child joins (its first parent's, else that parent itself), after checking that every
-- parent is a job that exists or existed. A parent id past the id sequence can only be a mistake, or
-- the child itself or a later job: either could close a cycle. Sets the linked flag.
--
-- writes jobs: no
CREATE OR REPLACE FUNCTION skiplock_check_parents(p_parents bigint[]) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    last_issued bigint;
    unknown bigint[];
    root bigint;
BEGIN
    IF coalesce(cardinality(p_parents), 0) = 0 THEN
        RETURN NULL;
    END IF;
    EXECUTE format('SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM %s',
                   pg_get_serial_sequence('jobs', 'id')) INTO last_issued;
    SELECT array_agg(p ORDER BY p) INTO unknown
      FROM unnest(p_parents) AS p
     WHERE p IS NULL OR p <= 0 OR (p > last_issued AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = p));
    IF unknown IS NOT NULL THEN
        RAISE EXCEPTION 'unknown parent job id(s): %', array_to_string(unknown, ', ', 'NULL')
              USING ERRCODE = 'foreign_key_violation', HINT = 'skiplock_unknown_parent';
    END IF;
    SELECT coalesce(j.workflow_id, j.id) INTO root FROM jobs j WHERE j.id = p_parents[1];
    PERFORM setval('skiplock_linked', 1, true) WHERE pg_sequence_last_value('skiplock_linked') IS NULL;
    RETURN coalesce(root, p_parents[1]);
END $$;
