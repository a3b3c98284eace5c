"""A running job's "Show stack": the request (POST, audited; read-only logins may ask too, since it changes
no job) and the panel that shows the stack once the worker that runs the job has taken it (GET, polled by
htmx about every second until then). worker/core/features/job_stacks.py holds the SQL."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, flash, g, redirect, render_template, url_for
from flask.typing import ResponseReturnValue

from skiplock.core.features import job_stacks
from skiplock.webapp import db, filters
from skiplock.webapp.web import audit, is_htmx

bp = Blueprint("job_stack", __name__, url_prefix="/jobs")



# Static last segments: Werkzeug prefers these rules over the jobs blueprint's /<job_id>/<action>.
@bp.route("/<job_id>/stack", methods=["POST"])
def request_stack(job_id: str) -> ResponseReturnValue:
    """Ask the worker running the job for its stack; the panel then polls for the answer."""
    jid = filters.required_job_id(job_id)
    refused = None
    with db.connection(primary=True) as conn, conn.transaction():  # the request and its audit row commit together
        try:
            job_stacks.ask(conn, jid, str(g.get("user")))
            audit("show stack", 1, conn=conn, ids=[jid])
        except job_stacks.NotRunning as exc:
            refused = str(exc)
    if is_htmx():
        return panel(job_id, refused)
    if refused:
        flash(refused, "error")
    return redirect(url_for("jobs.show", job_id=jid) + "#stack", 303)


@bp.route("/<job_id>/stack")
def panel(job_id: str, refused: str | None = None) -> ResponseReturnValue:
    """The stack panel: the request's state, and the stack with the time it was taken."""
    jid = filters.required_job_id(job_id)
    with db.connection() as conn:
        stack = job_stacks.of_job(conn, jid)
    status = stack["job_status"] if stack else None  # a job that ended meanwhile: the panel stops asking
    return render_template("jobs/_stack.html", job={"id": jid, "status": status}, stack=stack, refused=refused)


def read(conn: Any, job: dict[str, Any]) -> dict[str, Any] | None:
    """For the job page: the latest stack request of a running job (None for any other job: no query)."""
    return job_stacks.of_job(conn, job["id"]) if job["status"] == "running" else None
