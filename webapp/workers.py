"""Workers: live worker processes from the `workers` table; stale ones (no recent heartbeat) marked."""

from __future__ import annotations

from flask import Blueprint
from flask.typing import ResponseReturnValue
from psycopg.rows import dict_row

from skiplock.core.status import LIVE_WORKER_SECONDS
from skiplock.webapp import db, queries
from skiplock.webapp.web import page

bp = Blueprint("workers", __name__, url_prefix="/workers")

# A worker beats every few seconds; one unseen for this long has probably died (its jobs'
# leases will expire and the reaper takes them back).
STALE_AFTER_S = LIVE_WORKER_SECONDS  # the one definition of a live worker


@bp.route("/")
def index() -> ResponseReturnValue:
    """Every registered worker with its heartbeat age."""
    with db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(queries.WORKERS, {"stale_after": STALE_AFTER_S}).fetchall()
    return page("workers.html", "_workers.html", rows=rows, stale_after=STALE_AFTER_S)
