"""Long-runners: running jobs by runtime with worker, attempts and lease left; release stuck ones."""

from __future__ import annotations

from flask import Blueprint, flash, g, redirect, request, url_for
from flask.typing import ResponseReturnValue
from psycopg.rows import dict_row

from skiplock.core import core
from skiplock.core.status import JobStatus
from skiplock.webapp import db, filters, queries
from skiplock.webapp.web import audit, page

bp = Blueprint("running", __name__, url_prefix="/running")

LIMIT = 200


@bp.route("/")
def index() -> ResponseReturnValue:
    """Running jobs, longest first (capped at LIMIT rows)."""
    queue = filters.queue(filters.arg("queue"))
    with db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(queries.LONG_RUNNERS, {"queue": queue, "limit": LIMIT}).fetchall()
    return page("running.html", "_running.html", rows=rows, queue=queue or "", limit=LIMIT)


@bp.route("/release", methods=["POST"])
def release() -> ResponseReturnValue:
    """Put the selected running jobs back in their queue now (the reaper's transition)."""
    # a row's own button names just that job; "Release selected" sends the ticked boxes
    one = filters.job_id(request.form.get("one"))
    chosen = [one] if one is not None else filters.ids(request.form.getlist("ids"))
    with db.connection() as conn, conn.transaction():  # the release and its audit row commit together
        done = core.release_running(conn, chosen, g.user)
        audit("release running", len(done), conn=conn, ids=chosen[:50])
    dead = sum(1 for _, _, status in done if status == JobStatus.DEAD)
    flash(f"Released {len(done)} of {len(chosen)} job(s)" + (f"; {dead} were on their last attempt and are now dead"
          if dead else "") + ("." if len(done) == len(chosen) else " (the others had already finished or moved).")
          + (" Their handlers were not stopped: a result they still deliver is refused. Cancel stops a handler."
             if done else ""))
    return redirect(url_for("running.index"), 303)
