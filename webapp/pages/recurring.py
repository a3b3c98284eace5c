"""Recurring schedules: definitions with schedule, next and last fire time and enabled state,
with pause, resume and run now (all through skiplock.services.recurring_defs)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, abort, flash, redirect, url_for
from flask.typing import ResponseReturnValue
from psycopg.rows import dict_row

from skiplock.services import recurring_defs as recurring
from skiplock.webapp import db
from skiplock.webapp.queries import page_queries
from skiplock.webapp.web import audit, page

bp = Blueprint("recurring", __name__, url_prefix="/recurring")


@bp.route("/")
def index() -> ResponseReturnValue:
    """Every schedule (from recurring_schedules)."""
    with db.connection() as conn:
        schedules = sorted(recurring.list_schedules(conn), key=lambda s: str(s.get("name")))
        with conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(page_queries.RECURRING_RUNS, {"per": page_queries.RECENT_RUNS_PER_SCHEDULE}).fetchall()
    runs: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        runs.setdefault(row["name"], []).append(row)
    return page("recurring/recurring.html", "recurring/_recurring.html", schedules=schedules, runs=runs,
                last_died={name: last_outcome(r) == "dead" for name, r in runs.items()})


def last_outcome(runs: list[dict[str, Any]]) -> str | None:
    """The outcome of a schedule's newest run that has one (queued and running runs have none yet);
    a run whose job is gone finished without a dead letter."""
    for run in runs:  # newest first
        if run["status"] in ("queued", "running"):
            continue
        return run["status"] or "gone"
    return None


@bp.route("/<path:name>/<action>", methods=["POST"])
def act(name: str, action: str) -> ResponseReturnValue:
    """Pause, resume or run one schedule now."""
    calls = {"pause": recurring.pause_schedule, "resume": recurring.resume_schedule,
             "run": recurring.run_schedule_now}
    if action not in calls:
        abort(404, f"unknown action {action[:40]!r}")
    with db.connection() as conn, conn.transaction():  # the change and its audit row commit together
        result = calls[action](conn, name)
        if action == "run":
            audit("run schedule now", 1 if result is not None else 0, conn=conn, schedule=name, job_id=result)
        else:
            audit(f"{action} schedule", 0, conn=conn, schedule=name, changed=result)
    if action == "run":
        if result is None:
            flash(f"Schedule {name} did not enqueue a job (unknown schedule?).", "error")
        else:
            flash(f"Schedule {name} enqueued job {result}.")
    else:
        flash(f"Schedule {name} {action}d." if result else f"Schedule {name} was not changed.",
              "message" if result else "error")
    return redirect(url_for("recurring.index"), 303)
