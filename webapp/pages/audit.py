"""The Audit page: operator actions from audit_log, newest first, paged by id (keyset, no OFFSET)."""

from __future__ import annotations

from flask import Blueprint, render_template
from flask.typing import ResponseReturnValue
from psycopg.rows import dict_row

from skiplock.webapp import db, filters
from skiplock.webapp.shared import audit_detail

bp = Blueprint("audit", __name__, url_prefix="/audit")

PAGE_SIZE = 100


@bp.route("/")
def index() -> ResponseReturnValue:
    """One page of the trail; `before` is the last id of the previous page."""
    before = filters.job_id(filters.arg("before"), "before")
    with db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute("SELECT id, at, actor, role, action, count, detail FROM audit_log "
                           "WHERE %(before)s::bigint IS NULL OR id < %(before)s "
                           "ORDER BY id DESC LIMIT %(limit)s",
                           {"before": before, "limit": PAGE_SIZE + 1}).fetchall()
    more = len(rows) > PAGE_SIZE
    rows = rows[:PAGE_SIZE]
    for row in rows:
        row["fields"] = audit_detail.fields(row["detail"])
    return render_template("audit/audit.html", rows=rows, next_before=rows[-1]["id"] if more else None)
