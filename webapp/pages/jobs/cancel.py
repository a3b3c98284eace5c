"""The job page's Cancel for a running job (worker/core/features/cancel.py): admin only, like every console POST
(webapp/auth.py answers 403 to a read-only login before this runs), and written to the audit log."""

from __future__ import annotations

from flask import Blueprint, flash, g, redirect, url_for
from flask.typing import ResponseReturnValue
from psycopg.rows import dict_row

from skiplock.core.features.cancel import request_cancel
from skiplock.core.plumbing.config import Settings
from skiplock.webapp import db, filters
from skiplock.webapp.queries import page_queries
from skiplock.webapp.web import audit, confirm_page, confirmed

bp = Blueprint("cancel", __name__, url_prefix="/jobs")


# A static last segment: Werkzeug prefers this rule over the jobs blueprint's /<job_id>/<action>.
@bp.route("/<job_id>/cancel-running", methods=["POST"])
def cancel_running(job_id: str) -> ResponseReturnValue:
    jid = filters.required_job_id(job_id)
    if not confirmed():
        return _confirm(jid)
    with db.connection() as conn, conn.transaction():  # the request and its audit row commit together
        result = request_cancel(conn, jid, f"console:{g.get('user') or 'anonymous'}")
        audit("cancel running job", 1 if result.changed else 0, conn=conn, ids=[jid])
    flash(result.message[:1].upper() + result.message[1:] + ".", "message" if result.changed else "error")
    return redirect(url_for("jobs.show", job_id=jid), 303)


def _confirm(jid: int) -> ResponseReturnValue:
    """Say what cancelling this running job does before asking the worker to stop it."""
    with db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(page_queries.RUNNING_CHOSEN, {"ids": [jid]}).fetchall()
    back = url_for("jobs.show", job_id=jid)
    if not rows:
        return confirm_page("cancel", f"Job {jid} is not running", [
            "It finished or moved meanwhile: there is nothing to cancel. Its page shows where it is now."],
            url_for("cancel.cancel_running", job_id=jid), [], "Cancel", back, possible=False)
    job = rows[0]
    beat = Settings().effective_heartbeat
    explain = [f"Job {jid} of queue {job['queue']} is running on worker {job['worker_id']}. Its worker reads the "
               f"request at its next heartbeat (every {beat:g} s) and tells the handler (job.cancel_requested).",
               "Whatever the handler then does, the job ends failed, \"cancelled by\" you, and is not retried. A "
               "handler that never looks at job.cancel_requested runs to its end first."]
    if job["cancel_pending"]:
        explain.insert(0, "A cancel was already requested for this run; asking again changes nothing.")
    return confirm_page("cancel", f"Cancel running job {jid}?", explain,
                        url_for("cancel.cancel_running", job_id=jid), [], f"Yes, cancel job {jid}", back)
