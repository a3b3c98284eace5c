-- 032: a dead job's payload edited before its retry (issue 36: "edit before retry"). Safe to re-run.
-- One row per edit, written in the transaction that changes jobs.payload and retries the job
-- (worker/core/payload_edit.py): the original payload stays here, beside the new one, with who and
-- when, and the attempt count the job had died at. No foreign key to jobs: a cascade would add a
-- trigger to every job delete (the ack of a success in the default history mode), and the edit is
-- evidence that should outlive its job. The pruner drops rows past SKIPLOCK_AUDIT_RETENTION, as it
-- does the audit trail they belong to.
CREATE TABLE IF NOT EXISTS job_edits (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id      bigint      NOT NULL,
    at          timestamptz NOT NULL DEFAULT now(),
    actor       text        NOT NULL,
    attempts    integer     NOT NULL,  -- the runs of the job before the edit (it died after this many)
    old_payload jsonb       NOT NULL,
    new_payload jsonb       NOT NULL
);
CREATE INDEX IF NOT EXISTS job_edits_job_idx ON job_edits (job_id, id);
CREATE INDEX IF NOT EXISTS job_edits_at_idx ON job_edits (at);
