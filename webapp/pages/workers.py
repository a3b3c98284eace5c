"""Workers: live worker processes from the `workers` table; stale ones (no recent heartbeat) marked.
Per worker: a link to the jobs it runs, and Quiet / Stop (worker/core/features/worker_control.py), confirmed first."""

from __future__ import annotations

from flask import Blueprint, abort, flash, g, redirect, url_for
from flask.typing import ResponseReturnValue
from psycopg.rows import dict_row

from skiplock.core.features.worker_control import WorkerCommand, command
from skiplock.core.status import LIVE_WORKER_SECONDS
from skiplock.webapp import db
from skiplock.webapp.queries import page_queries
from skiplock.webapp.web import audit, confirm_page, confirmed, page

bp = Blueprint("workers", __name__, url_prefix="/workers")

# A worker beats every few seconds; one unseen for this long has probably died (its jobs'
# leases will expire and the reaper takes them back).
STALE_AFTER_S = LIVE_WORKER_SECONDS  # the one definition of a live worker

# What each command does, as the confirmation page says it.
EXPLAIN = {
    WorkerCommand.QUIET: "It claims no more jobs; the {n} job(s) it runs now finish normally. It keeps running (and "
                         "heartbeating) until it is stopped; other workers take its queues' jobs.",
    WorkerCommand.STOP: "It stops claiming, gives its running job(s) ({n} now) the shutdown grace period to finish, "
                        "puts back what is still running after it, and exits 0, as on SIGTERM. A process manager "
                        "may start a new one.",
}


@bp.route("/")
def index() -> ResponseReturnValue:
    """Every registered worker with its heartbeat age."""
    with db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(page_queries.WORKERS, {"stale_after": STALE_AFTER_S}).fetchall()
    return page("workers/workers.html", "workers/_workers.html", rows=rows, stale_after=STALE_AFTER_S)


@bp.route("/<path:worker_id>/<what>", methods=["POST"])
def act(worker_id: str, what: str) -> ResponseReturnValue:
    """Quiet or stop one worker process, after a confirmation that says what happens."""
    try:
        cmd = WorkerCommand(what)
    except ValueError:
        abort(404, f"unknown worker command {what[:40]!r}")
    if len(worker_id) > 300:
        abort(400, "worker id too long")
    with db.connection() as conn:
        if not confirmed():
            with conn.cursor(row_factory=dict_row) as cur:
                row = next((r for r in cur.execute(page_queries.WORKERS, {"stale_after": STALE_AFTER_S}).fetchall()
                            if r["id"] == worker_id), None)
            if row is None:
                abort(404, f"No worker {worker_id}: it exited, or its row was pruned.")
            return confirm_page(str(cmd), f"{cmd.capitalize()} worker {worker_id}?",
                                [f"Worker {worker_id} (host {row['host']}, pid {row['pid']}) serves "
                                 f"{', '.join(row['queues'])}. " + EXPLAIN[cmd].format(n=row["in_flight"]),
                                 "It reads the command at its next registry heartbeat, within a few seconds."],
                                url_for("workers.act", worker_id=worker_id, what=str(cmd)), [],
                                f"Yes, {cmd} {worker_id}", url_for("workers.index"))
        with conn.transaction():  # the command and its audit row commit together
            done = command(conn, worker_id, cmd, f"console:{g.get('user')}", STALE_AFTER_S)
            audit(f"{cmd} worker", 0, conn=conn, worker=worker_id, changed=done)
    flash(f"Worker {worker_id} is asked to {cmd}; it obeys at its next heartbeat." if done else
          f"Worker {worker_id} was not asked: it is not heartbeating, or a stop is already under way.",
          "message" if done else "error")
    return redirect(url_for("workers.index"), 303)
