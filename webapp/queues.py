"""Queue page: one queue's jobs by status with keyset pagination and filters; pause and resume."""

from __future__ import annotations

from typing import Any

import psycopg
from flask import Blueprint, abort, flash, g, redirect, url_for
from flask.typing import ResponseReturnValue
from psycopg.rows import dict_row

from webapp import db, filters, queries
from webapp.web import audit, page
from worker import core

bp = Blueprint("queues", __name__, url_prefix="/queues")

PAGE_SIZE = 50
# Status tabs: ready and scheduled are both status 'queued', split on run_at.
STATUSES = ("ready", "scheduled", "running", "dead", "failed", "succeeded")


def _list(conn: psycopg.Connection, name: str, status: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    if status == "ready":
        sql = queries.LIST_READY
    elif status == "scheduled":
        sql = queries.LIST_SCHEDULED
    elif status == "running":
        sql = queries.LIST_RUNNING
    else:
        sql = queries.LIST_FINISHED
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(sql, {**params, "queue": name, "status": status}).fetchall()


def _next_cursor(status: str, rows: list[dict]) -> str | None:
    if len(rows) < PAGE_SIZE:
        return None
    last = rows[-1]
    if status in ("ready", "scheduled"):
        return filters.make_cursor(last["run_at"], last["id"], last["priority"])
    if status == "running":
        return filters.make_cursor(last["started_at"], last["id"])
    return filters.make_cursor(last["finished_at"], last["id"])


@bp.route("/<path:name>")
def show(name: str) -> ResponseReturnValue:
    """One queue's jobs of one status, newest page first, filtered by text and id."""
    queue = filters.queue(name) or abort(404)
    status = filters.choice(filters.arg("status"), STATUSES, "ready", "status")
    text = filters.text(filters.arg("q"))
    wanted_id = filters.job_id(filters.arg("id"))
    prio, c_time, c_id = filters.cursor(filters.arg("after"))
    if c_id is not None and status in ("ready", "scheduled") and prio is None:
        abort(400, "malformed page cursor")
    params = {"text": filters.like(text), "id": wanted_id, "c_prio": prio, "c_time": c_time, "c_id": c_id,
              "limit": PAGE_SIZE}
    with db.connection() as conn:
        rows = _list(conn, queue, status, params)
        paused = conn.execute(queries.IS_PAUSED, {"queue": queue}).fetchone()
    return page("queue.html", "_queue_jobs.html", queue=queue, status=status, statuses=STATUSES, rows=rows,
                q=text or "", wanted_id=wanted_id or "", next_cursor=_next_cursor(status, rows),
                paused=bool(paused and paused[0]), first_page=c_id is None)


@bp.route("/<path:name>/pause", methods=["POST"])
def pause(name: str) -> ResponseReturnValue:
    """Stop every worker from claiming this queue."""
    queue = filters.queue(name) or abort(404)
    with db.connection() as conn:
        changed = core.pause_queue(conn, queue, g.user)
    audit("pause queue", 0, queue=queue, changed=changed)
    flash(f"Queue {queue} paused: no worker claims its jobs until it is resumed." if changed
          else f"Queue {queue} was already paused.")
    return redirect(url_for("queues.show", name=queue), 303)


@bp.route("/<path:name>/resume", methods=["POST"])
def resume(name: str) -> ResponseReturnValue:
    """Let workers claim this queue again."""
    queue = filters.queue(name) or abort(404)
    with db.connection() as conn:
        changed = core.resume_queue(conn, queue)
    audit("resume queue", 0, queue=queue, changed=changed)
    flash(f"Queue {queue} resumed." if changed else f"Queue {queue} was not paused.")
    return redirect(url_for("queues.show", name=queue), 303)
