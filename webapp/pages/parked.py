"""Parked: durable jobs that sleep or wait for a signal, counted per queue and per signal key, with the
oldest of each. A parked job holds no worker, connection or lease; the wake pass, a signal or an
operator (the job page's "wake now" and "send signal") brings it back."""

from __future__ import annotations

from flask import Blueprint
from flask.typing import ResponseReturnValue
from psycopg.rows import dict_row

from skiplock.webapp import db, filters
from skiplock.webapp.queries import parked_queries
from skiplock.webapp.web import page

bp = Blueprint("parked", __name__, url_prefix="/parked")

MAX_QUEUES = 200
MAX_KEYS = 100


@bp.route("/")
def index() -> ResponseReturnValue:
    """Per queue and per key (the longest-waiting keys first, or one key with ?key=)."""
    key = filters.text(filters.arg("key"))
    with db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        queues = cur.execute(parked_queries.PARKED_BY_QUEUE, {"limit": MAX_QUEUES}).fetchall()
        keys = cur.execute(parked_queries.PARKED_BY_KEY, {"key": key, "limit": MAX_KEYS}).fetchall()
        key_count = len(keys) if key or len(keys) < MAX_KEYS else int(
            cur.execute(parked_queries.KEY_COUNT).fetchone()["count"])  # type: ignore[index]
    totals = {"parked": sum(q["parked"] for q in queues), "sleeping": sum(q["sleeping"] for q in queues),
              "waiting": sum(q["waiting"] for q in queues)}
    return page("parked/parked.html", "parked/_parked.html", queues=queues, keys=keys, key=key or "",
                key_count=key_count, max_keys=MAX_KEYS, totals=totals)
