"""Workflows: the DAG of a root job and its dependents (server-rendered SVG), counts per state, and
the two actions on the whole of it, "retry the dead ones" and "cancel the rest".

Each action first shows a confirmation with the exact counts it covers at that moment, then calls
worker/core/workflows/workflow_ops.py inside one transaction with its audit row.
"""

from __future__ import annotations

from typing import Any

import psycopg
from flask import Blueprint, abort, flash, g, redirect, render_template, url_for
from flask.typing import ResponseReturnValue
from psycopg.rows import dict_row

from skiplock.core.sql import queries
from skiplock.core.workflows import workflow_ops
from skiplock.core.workflows.results import FINAL_STATES
from skiplock.webapp import db, filters
from skiplock.webapp.queries import workflow_queries as wq
from skiplock.webapp.shared import dag, workflow_structure
from skiplock.webapp.web import audit, page

WORKFLOWS_SQL = queries("workflows")

bp = Blueprint("workflows", __name__, url_prefix="/workflows")

# A workflow bigger than this is drawn and counted from MAX_NODES of its jobs.
MAX_NODES = 200_000
RECENT_LIMIT = 50
OPEN_CAP = 10_000  # the list's "unfinished" count stops here
ACTIONS = {"retry-dead": "retry the dead ones", "cancel-rest": "cancel the rest"}


@bp.route("/")
def index() -> ResponseReturnValue:
    """Recent workflows that still have jobs in the table, newest root first."""
    with db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(wq.RECENT_WORKFLOWS, {"limit": RECENT_LIMIT, "cap": OPEN_CAP}).fetchall()
    return render_template("workflows/workflows.html", rows=rows, limit=RECENT_LIMIT, cap=OPEN_CAP)


def _root(job_id: str) -> int:
    parsed = filters.job_id(job_id)
    if parsed is None:
        abort(400, "workflow id is required")
    return parsed


def _known(conn: psycopg.Connection, job_id: int) -> dict[str, Any]:
    """What is known of a job: its workflow_id (a member, not a root) or nothing at all (404)."""
    with conn.cursor(row_factory=dict_row) as cur:
        of = cur.execute(wq.WORKFLOW_OF, {"id": job_id}).fetchone()
        gone = cur.execute(wq.GONE_JOB, {"id": job_id}).fetchone()
    assert of is not None and gone is not None  # both read from a one-row FROM
    if not (gone["row_kept"] or gone["has_result"] or gone["linked"]):
        abort(404, f"No job {job_id}: it never existed, or its row, result and links are gone.")
    return of


@bp.route("/<job_id>")
def show(job_id: str) -> ResponseReturnValue:
    """The workflow whose root is `job_id`; a member's id redirects to its root."""
    root = _root(job_id)
    with db.connection() as conn:
        of = _known(conn, root)
        if of["workflow_id"] is not None and of["workflow_id"] != root:
            return redirect(url_for("workflows.show", job_id=of["workflow_id"]), 303)
        grouped = _read_dag(conn, root)
    drawing = dag.layout(grouped.boxes, grouped.edges)
    return page("workflows/workflow.html", "workflows/_workflow.html", root=root, drawing=drawing,
                counts=dag.state_counts(grouped.per_state), total=grouped.total, hidden=grouped.hidden,
                capped=grouped.total >= MAX_NODES, max_nodes=MAX_NODES, box_w=dag.BOX_W, box_h=dag.BOX_H,
                layer_limit=dag.LAYER_LIMIT, max_layers=dag.MAX_LAYERS)


def _read_dag(conn: psycopg.Connection, root: int) -> dag.Grouped:
    """The workflow's jobs and edges: its states read now, its shape (jobs, edges, depths) kept for a
    few seconds between views (workflow_structure says why and how)."""
    return workflow_structure.grouped(conn, root, MAX_NODES, lambda nodes: _read_shape(conn, root, nodes))


def _read_shape(conn: psycopg.Connection, root: int, nodes: dict[int, tuple[str, str | None]]
                ) -> tuple[dict[int, tuple[str, str | None]], list[int], list[int]]:
    """Every job of the workflow (id -> (state, queue)) and its edges, given `nodes`, those with a row:
    the edges into them, then the jobs whose rows are gone by a walk from the finished ones
    (workflow_queries explains why that finds all). Read as arrays in binary: a 10,000-job workflow
    costs the page a few rows, not 30,000."""
    params = {"root": root, "cap": MAX_NODES}
    with conn.cursor(binary=True) as cur:
        parents, children = cur.execute(wq.WORKFLOW_MEMBER_EDGES, params).fetchone() or ([], [])
        seeds = {root} | {p for p in set(parents) if p not in nodes}
        finished = [job_id for job_id, (state, _) in nodes.items() if state in FINAL_STATES]
        gone = cur.execute(wq.WORKFLOW_GONE, {"seeds": sorted(seeds), "finished": finished, "cap": MAX_NODES,
                                              "root": root})
        gone_ids, gone_states, gone_parents, gone_children, child_queues = gone.fetchone() or ([], [], [], [], [])
        # a gone job's queue: what an edge into it recorded; the few with none (the root) are looked up
        recorded = {child: queue for child, queue in zip(gone_children, child_queues, strict=True) if queue}
        missing = [job_id for job_id in gone_ids if job_id not in recorded]
        if missing:
            recorded.update(cur.execute(wq.JOB_QUEUES, {"ids": missing}).fetchall())
    everything = dict(nodes)
    everything.update((job_id, (state, recorded.get(job_id)))
                      for job_id, state in zip(gone_ids, gone_states, strict=True))
    return everything, [*parents, *gone_parents], [*children, *gone_children]


def _plan(conn: psycopg.Connection, root: int) -> dict[str, int]:
    """What each action would touch now, counted with the core's own selections."""
    def count(sql: str) -> int:
        row = conn.execute(f"SELECT count(*) FROM ({sql}) s", {"workflow": root}).fetchone()
        return int(row[0]) if row else 0

    return {"unstarted": count(WORKFLOWS_SQL.workflow_unstarted), "running": count(WORKFLOWS_SQL.workflow_running),
            "dead": count(WORKFLOWS_SQL.workflow_dead_root_causes),
            "ended_by_dependency": count(wq.WORKFLOW_ENDED_BY_DEPENDENCY)}


@bp.route("/<job_id>/<action>", methods=["POST"])
def act(job_id: str, action: str) -> ResponseReturnValue:
    """Retry the dead ones / cancel the rest: a confirmation with the counts, then the action."""
    root = _root(job_id)
    if action not in ACTIONS:
        abort(404, f"unknown action {action[:40]!r}")
    confirmed = filters.arg("confirm") == "yes"
    with db.connection() as conn:
        if not confirmed:
            _known(conn, root)
            return render_template("workflows/workflow_confirm.html", root=root, action=action, label=ACTIONS[action],
                                   plan=_plan(conn, root))
        with conn.transaction():  # the change and its audit row commit together
            if action == "cancel-rest":
                done = workflow_ops.cancel_rest(conn, root, str(g.user))
                audit("cancel the rest of a workflow", done.cancelled + done.cancel_requested, conn=conn,
                      workflow=root, cancelled=done.cancelled, cancel_requested=done.cancel_requested)
                message = (f"Workflow {root}: cancelled {done.cancelled:,} job(s) that had not started"
                           + (f", asked {done.cancel_requested:,} running job(s) to stop" if done.cancel_requested
                              else "") + ".")
            else:
                retried = workflow_ops.retry_dead(conn, root)
                audit("retry the dead ones of a workflow", retried, conn=conn, workflow=root)
                message = (f"Workflow {root}: retried {retried:,} job(s) that failed on their own; the dependents "
                           "that ended because of them wait for them again.")
    flash(message)
    return redirect(url_for("workflows.show", job_id=root), 303)
