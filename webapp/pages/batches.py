"""A batch: its progress (done of total, dead, cancelled), its callbacks' jobs and their states, and
the members that have not succeeded (read through jobs_batch_idx; the counts are the batch row's
counters, never a count of its members)."""

from __future__ import annotations

from flask import Blueprint, abort
from flask.typing import ResponseReturnValue
from psycopg.rows import dict_row

from skiplock.webapp import db, filters
from skiplock.webapp.queries import workflow_queries as wq
from skiplock.webapp.web import page

bp = Blueprint("batches", __name__, url_prefix="/batches")

MEMBERS_SHOWN = 50  # per list (unfinished, ended badly)


@bp.route("/<batch_id>")
def show(batch_id: str) -> ResponseReturnValue:
    bid = filters.job_id(batch_id, "batch id")
    if bid is None:
        abort(400, "batch id is required")
    with db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        batch = cur.execute(wq.BATCH, {"batch": bid}).fetchone()
        if batch is None:
            abort(404, f"No batch {bid}.")
        callback_ids = [i for i in (batch["complete_job_id"], batch["success_job_id"]) if i is not None]
        callbacks = {r["id"]: r for r in cur.execute(wq.JOB_STATES, {"ids": callback_ids}).fetchall()}
        unfinished = cur.execute(wq.BATCH_MEMBERS, {"batch": bid, "states": ["running", "queued", "waiting"],
                                                    "limit": MEMBERS_SHOWN}).fetchall()
        ended_badly = cur.execute(wq.BATCH_MEMBERS, {"batch": bid, "states": ["dead", "failed"],
                                                     "limit": MEMBERS_SHOWN}).fetchall()
    done = batch["total"] - batch["pending"]
    return page("batches/batch.html", "batches/_batch.html", batch=batch, done=done, callbacks=callbacks,
                unfinished=unfinished, ended_badly=ended_badly, shown=MEMBERS_SHOWN)
