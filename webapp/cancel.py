"""The job page's Cancel for a running job (worker/core/cancel.py): admin only, like every console POST
(webapp/auth.py answers 403 to a read-only login before this runs), and written to the audit log."""

from __future__ import annotations

from flask import Blueprint, abort, flash, g, redirect, url_for
from flask.typing import ResponseReturnValue

from skiplock.core.cancel import request_cancel
from skiplock.webapp import db, filters
from skiplock.webapp.web import audit

bp = Blueprint("cancel", __name__, url_prefix="/jobs")


# A static last segment: Werkzeug prefers this rule over the jobs blueprint's /<job_id>/<action>.
@bp.route("/<job_id>/cancel-running", methods=["POST"])
def cancel_running(job_id: str) -> ResponseReturnValue:
    jid = filters.job_id(job_id)
    if jid is None:
        abort(400, "job id is required")
    with db.connection() as conn, conn.transaction():  # the request and its audit row commit together
        result = request_cancel(conn, jid, f"console:{g.get('user') or 'anonymous'}")
        audit("cancel running job", 1 if result.changed else 0, conn=conn, ids=[jid])
    flash(result.message[:1].upper() + result.message[1:] + ".", "message" if result.changed else "error")
    return redirect(url_for("jobs.show", job_id=jid), 303)
