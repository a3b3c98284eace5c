"""Queue page: one queue's jobs by status with keyset pagination and filters; pause and resume."""

from __future__ import annotations

from typing import Any

import psycopg
from flask import Blueprint, abort, flash, g, redirect, url_for
from flask.typing import ResponseReturnValue
from psycopg.rows import dict_row

from skiplock import core
from skiplock.webapp import db, filters, queries
from skiplock.webapp.web import audit, page

bp = Blueprint("queues", __name__, url_prefix="/queues")

PAGE_SIZE = 50
# A text search looks at this many jobs per page at most (see queries.WINDOW_END).
SEARCH_WINDOW = 10_000
# Status tabs: ready and scheduled are both status 'queued', split on run_at.
STATUSES = ("ready", "scheduled", "running", "dead", "failed", "succeeded")


def _tab(status: str) -> str:
    return status if status in ("ready", "scheduled", "running") else "finished"


def _cursor_of(status: str, row: dict[str, Any]) -> str:
    if status in ("ready", "scheduled"):
        return filters.make_cursor(row["run_at"], row["id"], row["priority"])
    return filters.make_cursor(row["started_at"] if status == "running" else row["finished_at"], row["id"])


def _list(conn: psycopg.Connection, status: str, params: dict[str, Any]) -> tuple[list[dict[str, Any]], str | None,
                                                                                   bool]:
    """One page of jobs, the cursor of the next page, and whether a search stopped at its window."""
    tab = _tab(status)
    bound: tuple[Any, ...] | None = None
    if params["text"] is not None:
        bound = conn.execute(queries.WINDOW_END[tab], {**params, "scan": SEARCH_WINDOW}).fetchone()
    e_prio, e_time, e_id = bound if bound else (None, None, None)
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(queries.LIST[tab], {**params, "e_prio": e_prio, "e_time": e_time, "e_id": e_id}).fetchall()
    if len(rows) == PAGE_SIZE:
        return rows, _cursor_of(status, rows[-1]), False
    if bound:  # the window ended before a full page of matches: continue after the window
        return rows, filters.make_cursor(e_time, e_id, e_prio), True
    return rows, None, False


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
    params = {"queue": queue, "status": status, "text": filters.like(text), "id": wanted_id, "c_prio": prio,
              "c_time": c_time, "c_id": c_id, "limit": PAGE_SIZE}
    with db.connection() as conn:
        rows, next_cursor, window_hit = _list(conn, status, params)
        paused = conn.execute(queries.IS_PAUSED, {"queue": queue}).fetchone()
        flow = queries.queue_flow(conn, queue)  # limits, tenants, payload versions (templates/_flow.html)
    return page("queue.html", "_queue_jobs.html", queue=queue, status=status, statuses=STATUSES, rows=rows, flow=flow,
                q=text or "", wanted_id=wanted_id or "", next_cursor=next_cursor, window_hit=window_hit,
                search_window=SEARCH_WINDOW, paused=bool(paused and paused[0]), first_page=c_id is None)


@bp.route("/<path:name>/pause", methods=["POST"])
def pause(name: str) -> ResponseReturnValue:
    """Stop every worker from claiming this queue."""
    queue = filters.queue(name) or abort(404)
    with db.connection() as conn:
        known = conn.execute(queries.QUEUE_KNOWN, {"queue": queue}).fetchone()
        if not (known and known[0]) and filters.arg("unknown_ok") != "yes":
            # a typo (/queues/imagse) must not create a phantom paused queue: refuse, and say how to
            # pause a queue ahead of its first job on purpose
            flash(f"Queue {queue} has no jobs, no worker serves it and no schedule feeds it, so it was not "
                  "paused (a typo?). To pause it before its first job, tick \"pause a new queue\" and pause again.",
                  "error")
            return redirect(url_for("queues.show", name=queue), 303)
        with conn.transaction():  # the pause and its audit row commit together
            changed = core.pause_queue(conn, queue, g.user)
            audit("pause queue", 0, conn=conn, queue=queue, changed=changed)
    flash(f"Queue {queue} paused: no worker claims its jobs until it is resumed." if changed
          else f"Queue {queue} was already paused.")
    return redirect(url_for("queues.show", name=queue), 303)


@bp.route("/<path:name>/resume", methods=["POST"])
def resume(name: str) -> ResponseReturnValue:
    """Let workers claim this queue again."""
    queue = filters.queue(name) or abort(404)
    with db.connection() as conn, conn.transaction():  # the resume and its audit row commit together
        changed = core.resume_queue(conn, queue)
        audit("resume queue", 0, conn=conn, queue=queue, changed=changed)
    flash(f"Queue {queue} resumed." if changed else f"Queue {queue} was not paused.")
    return redirect(url_for("queues.show", name=queue), 303)
