"""The dead job page's "Edit and retry": change the payload, then retry (worker/core/features/payload_edit.py).

The form carries the payload as pretty JSON and the digest of the payload it showed. The POST is an
admin's (webapp/auth.py answers 403 to a read-only login, 400 without the CSRF token). A refusal
(invalid JSON, a non-object for a job enqueued with an object, over the size limit, a job no longer
dead, a payload another operator changed meanwhile) shows the job page again with the message and
the operator's own text in the form: nothing changed, nothing typed is lost.
"""

from __future__ import annotations

from flask import Blueprint, abort, flash, g, redirect, request, url_for
from flask.typing import ResponseReturnValue

from skiplock.core.features import payload_edit
from skiplock.core.plumbing.config import load_settings
from skiplock.webapp import db, filters
from skiplock.webapp.pages.jobs import detail as jobs
from skiplock.webapp.shared.edit_form import EditForm
from skiplock.webapp.web import audit

bp = Blueprint("edit_retry", __name__, url_prefix="/jobs")

# A refusal's HTTP status: the operator's input was wrong (400), or the job moved under them (409).
BAD_INPUT, CONFLICT = 400, 409


# A static last segment: Werkzeug prefers this rule over the jobs blueprint's /<job_id>/<action>.
@bp.route("/<job_id>/edit-retry", methods=["POST"])
def edit_and_retry(job_id: str) -> ResponseReturnValue:
    """Apply the edit and retry, or show the job page again with why not."""
    jid = filters.required_job_id(job_id)
    text = request.form.get("payload", "")
    digest = request.form.get("digest", "")
    if not digest:  # a form made by hand, or cut short: the compare-and-set needs what the page showed
        abort(400, "The form lacks the digest of the payload it showed: reload the job's page and edit there.")
    try:
        with db.connection(primary=True) as conn:
            seen = payload_edit.seen(conn, jid)
            if seen is None:
                abort(404, f"No job {jid}: it was purged or deleted meanwhile.")
            new = payload_edit.parse(text, seen.payload, load_settings().max_payload_bytes)
            with conn.transaction():  # the edit, the retry and the audit row commit together
                done = payload_edit.edit_and_retry(conn, jid, new, digest, str(g.user))
                audit("edit and retry", 1, conn=conn, ids=[jid], edit=done.edit_id, changes=done.changes)
    except payload_edit.PayloadEditRefused as refused:
        code = CONFLICT if isinstance(refused, payload_edit.PayloadEditConflict) else BAD_INPUT
        return jobs.render_job(jid, EditForm(text, digest, str(refused)), code)
    flash(f"Job {jid} retried with the edited payload ({len(done.changes)} change(s)); "
          "the original payload is kept on this page.")
    return redirect(url_for("jobs.show", job_id=jid), 303)
