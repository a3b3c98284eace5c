"""The console's read-only SQL for workflows (migration 026): a job's links, a workflow's nodes, a batch.

Nothing here changes a job: the pages' actions go through worker/core/workflows/workflow_ops.py. A job's row
may be gone (history mode `delete` deletes it at its success), so each query also looks at what
outlives the row: its stored result (job_results) and the state its edges recorded (job_deps).
"""

from __future__ import annotations

from skiplock.core.error_summary import HEADLINE_SQL

# The state of job `x.id` whether or not its row is left: the row's, else its stored result's (or
# a purge's tombstone), else what an edge recorded when it finished as a parent, else succeeded
# (history mode delete removes a row only at a success).
_STATE = """coalesce(j.status::text, r.state::text,
         (SELECT s.parent_state::text FROM job_deps s WHERE s.parent = x.id AND s.parent_state IS NOT NULL LIMIT 1),
         'succeeded')"""

# The queue (the task) of job `x.id` whether or not its row is left: the row's, else what an edge into it
# or out of it recorded when it was made (migration 048; NULL for edges made before it).
_QUEUE = """coalesce(j.queue,
         (SELECT s.child_queue FROM job_deps s WHERE s.child = x.id AND s.child_queue IS NOT NULL LIMIT 1),
         (SELECT s.parent_queue FROM job_deps s WHERE s.parent = x.id AND s.parent_queue IS NOT NULL LIMIT 1))"""

# A job's parents (or dependents): the first %(limit)s by id, each with its state and queue.
# Two statements, not one with a direction parameter: each walks its own index of job_deps (child, or
# parent), where an `e.child = ... OR e.parent = ...` chosen at run time would be planned for neither.
# Written once for both directions: `this` is the job's side of the edge, `other` the side listed.
_JOB_EDGES = """
SELECT x.id, coalesce(j.queue, e.{other}_queue) AS queue, {state} AS state, e.parent_state::text AS edge_state,
       j.id IS NOT NULL AS row_kept
  FROM job_deps e
  CROSS JOIN LATERAL (SELECT e.{other} AS id) x
  LEFT JOIN jobs j ON j.id = x.id
  LEFT JOIN job_results r ON r.job_id = x.id
 WHERE e.{this} = %(id)s
 ORDER BY e.{other}
 LIMIT %(limit)s
"""
JOB_PARENTS = _JOB_EDGES.format(this="child", other="parent", state=_STATE)
JOB_DEPENDENTS = _JOB_EDGES.format(this="parent", other="child", state=_STATE)
# How many parents and dependents a job has (index ranges on job_deps' two indexes).
JOB_LINK_COUNTS = """
SELECT (SELECT count(*) FROM job_deps WHERE child = %(id)s) AS parents,
       (SELECT count(*) FROM job_deps WHERE parent = %(id)s) AS dependents,
       (SELECT b.id FROM job_batches b WHERE b.complete_job_id = %(id)s OR b.success_job_id = %(id)s
         LIMIT 1) AS callback_of
"""

# A job's stored result (pretty JSON, cut at %(chars)s characters unless the page asks for all).
JOB_RESULT = """
SELECT r.state::text AS state, r.error, r.finished_at, r.result IS NOT NULL AS has_result,
       left(jsonb_pretty(r.result), %(chars)s) AS text, length(jsonb_pretty(r.result)) AS length
  FROM job_results r WHERE r.job_id = %(id)s
"""

# A job whose row is gone: what is still known of it (its stored result, or its edges), so that
# the links to it from a workflow lead somewhere.
GONE_JOB = f"""
SELECT x.id, {_STATE} AS state,
       (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM jobs_id_seq) >= x.id AS issued,
       r.job_id IS NOT NULL AS has_result, j.id IS NOT NULL AS row_kept,
       EXISTS (SELECT 1 FROM job_deps e WHERE e.parent = x.id OR e.child = x.id) AS linked
  FROM (SELECT %(id)s::bigint AS id) x
  LEFT JOIN jobs j ON j.id = x.id
  LEFT JOIN job_results r ON r.job_id = x.id
"""

# Where a job's workflow starts: its workflow_id (NULL for a root) and whether it has dependents;
# and its batch.
WORKFLOW_OF = """
SELECT j.workflow_id, j.batch_id, EXISTS (SELECT 1 FROM job_deps e WHERE e.parent = %(id)s) AS has_dependents
  FROM (SELECT %(id)s::bigint AS id) x LEFT JOIN jobs j ON j.id = x.id
"""

# The workflow's jobs that ended only because a dependency failed: "retry the dead ones" brings
# them back with their failed parents (skiplock_reopen), so its confirmation counts them. Their ids,
# like the core's selections beside it: the page counts the rows of each.
WORKFLOW_ENDED_BY_DEPENDENCY = """
SELECT id FROM jobs WHERE (workflow_id = %(workflow)s OR id = %(workflow)s)
   AND status IN ('dead', 'failed') AND error_group = 'dependency failed'
"""

# A workflow's jobs and edges, read in a time that grows with its size, not with the jobs table,
# and as arrays (a 10,000-job workflow is one row, not 10,000): its jobs with a row, through
# jobs_workflow_idx (the root, and every job whose workflow_id names it), and the edges into them,
# through job_deps_child_idx.
# (With jobs' file node: a TRUNCATE gives it a new one, so a kept shape (workflow_structure) of the
# jobs before it, whose ids may be handed out again, is never taken for the jobs after it.)
WORKFLOW_MEMBERS = """
SELECT coalesce(array_agg(id), '{}'), coalesce(array_agg(state), '{}'), coalesce(array_agg(queue), '{}'),
       pg_relation_filenode('jobs'::regclass)
  FROM (SELECT id, status::text AS state, queue FROM jobs
         WHERE workflow_id = %(root)s OR id = %(root)s LIMIT %(cap)s) m
"""
WORKFLOW_MEMBER_EDGES = """
SELECT coalesce(array_agg(e.parent), '{}'), coalesce(array_agg(e.child), '{}')
  FROM jobs j JOIN job_deps e ON e.child = j.id
 WHERE j.workflow_id = %(root)s
"""
# Its jobs whose rows are gone (succeeded under history mode delete, or purged). Only a finished
# job can have a finished child, so the walk starts from the finished jobs found so far: the root
# and the parents without a row of WORKFLOW_MEMBER_EDGES (%(seeds)s), and the children without a
# row of the finished jobs with one (%(finished)s); it follows job_deps to children without a row.
# Each comes with its final state (its stored result, else the state its out-edges recorded, else
# succeeded: delete removes a row only at a success), and the edges into them with the queue each recorded
# for its child (migration 048): every job the walk reaches has one. The few without (the root) are
# looked up after, by JOB_QUEUES.
WORKFLOW_GONE = f"""
WITH RECURSIVE gone(id) AS (
    SELECT x FROM unnest(%(seeds)s::bigint[]) AS x WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = x)
    UNION
    SELECT e.child FROM job_deps e
     WHERE e.parent = ANY(%(finished)s::bigint[])
       AND e.child NOT IN (SELECT m.id FROM jobs m WHERE m.workflow_id = %(root)s)  -- one hash, not a probe each
       AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = e.child)
    UNION
    SELECT e.child FROM gone g JOIN job_deps e ON e.parent = g.id
     WHERE e.child NOT IN (SELECT m.id FROM jobs m WHERE m.workflow_id = %(root)s)
       AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = e.child)
), g AS MATERIALIZED (
    SELECT id FROM gone LIMIT %(cap)s
)
SELECT coalesce(n.ids, '{{}}'), coalesce(n.states, '{{}}'),
       coalesce(e.parents, '{{}}'), coalesce(e.children, '{{}}'), coalesce(e.child_queues, '{{}}')
  FROM (SELECT array_agg(x.id) AS ids, array_agg({_STATE}) AS states
          FROM g x LEFT JOIN jobs j ON j.id = x.id LEFT JOIN job_results r ON r.job_id = x.id) n,
       (SELECT array_agg(p.parent) AS parents, array_agg(p.child) AS children, array_agg(p.child_queue) AS child_queues
          FROM g JOIN job_deps p ON p.child = g.id) e
"""

# Workflows with jobs still in the table, newest root first: a loose index scan of
# jobs_workflow_idx (one probe per workflow, not per job), each with its unfinished count capped.
RECENT_WORKFLOWS = """
WITH RECURSIVE roots(id) AS (
    (SELECT workflow_id FROM jobs WHERE workflow_id IS NOT NULL ORDER BY workflow_id DESC LIMIT 1)
    UNION ALL
    SELECT (SELECT j.workflow_id FROM jobs j WHERE j.workflow_id IS NOT NULL AND j.workflow_id < roots.id
             ORDER BY j.workflow_id DESC LIMIT 1)
      FROM roots WHERE roots.id IS NOT NULL
)
SELECT roots.id, r.queue, coalesce(r.status::text, res.state::text, 'succeeded') AS root_state, r.created_at,
       (SELECT count(*) FROM (SELECT 1 FROM jobs m WHERE m.workflow_id = roots.id
                                 AND m.status IN ('waiting', 'queued', 'running') LIMIT %(cap)s + 1) s) AS open
  FROM (SELECT id FROM roots WHERE id IS NOT NULL LIMIT %(limit)s) roots
  LEFT JOIN jobs r ON r.id = roots.id
  LEFT JOIN job_results res ON res.job_id = roots.id
 ORDER BY roots.id DESC
"""

# A batch with its callbacks' queues and jobs (their states, even once their rows are gone).
BATCH = """
SELECT b.id, b.total, b.pending, b.succeeded, b.dead, b.cancelled, b.sealed, b.called_back_at, b.created_at,
       b.on_complete ->> 'queue' AS complete_queue, b.on_success ->> 'queue' AS success_queue,
       b.complete_job_id, b.success_job_id
  FROM job_batches b WHERE b.id = %(batch)s
"""
JOB_STATES = f"""
SELECT x.id, j.queue, {_STATE} AS state
  FROM unnest(%(ids)s::bigint[]) AS x(id)
  LEFT JOIN jobs j ON j.id = x.id
  LEFT JOIN job_results r ON r.job_id = x.id
"""
# The queues of jobs, whether or not their rows are left (_QUEUE).
JOB_QUEUES = f"""
SELECT x.id, {_QUEUE} AS queue
  FROM unnest(%(ids)s::bigint[]) AS x(id)
  LEFT JOIN jobs j ON j.id = x.id
"""
# The final states of jobs whose rows are gone (or of any job: its row's state if it has one).
JOB_FINAL_STATES = f"""
SELECT x.id, {_STATE} AS state, {_QUEUE} AS queue
  FROM unnest(%(ids)s::bigint[]) AS x(id)
  LEFT JOIN jobs j ON j.id = x.id
  LEFT JOIN job_results r ON r.job_id = x.id
"""
# A batch's members in the given states, the first %(limit)s (an index range on jobs_batch_idx), each with its
# attempts and last error: a queued member that has failed before is waiting to retry, not untouched.
BATCH_MEMBERS = f"""
SELECT id, queue, status::text AS state, progress, attempts, max_attempts, run_at, run_at > now() AS scheduled,
       {HEADLINE_SQL} AS error_line
  FROM jobs WHERE batch_id = %(batch)s AND status = ANY(%(states)s::job_status[])
 ORDER BY status, id
 LIMIT %(limit)s
"""
