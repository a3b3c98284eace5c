"""Long-runners: running jobs by runtime with worker, attempts and lease left; release stuck ones."""

from __future__ import annotations

from flask import Blueprint, flash, g, redirect, request, url_for
from flask.typing import ResponseReturnValue
from psycopg.rows import dict_row

from skiplock.core import state_changes
from skiplock.core.plumbing.config import Settings
from skiplock.core.status import LIVE_WORKER_SECONDS, JobStatus
from skiplock.webapp import db, filters
from skiplock.webapp.queries import page_queries
from skiplock.webapp.shared import run_times
from skiplock.webapp.web import audit, confirm_page, confirmed, page

bp = Blueprint("running", __name__, url_prefix="/running")

LIMIT = 200


@bp.route("/")
def index() -> ResponseReturnValue:
    """Running jobs, longest first (capped at LIMIT rows)."""
    queue = filters.queue(filters.arg("queue"))
    worker = filters.text(filters.arg("worker"))  # the Workers page links each worker to its jobs
    with db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(page_queries.LONG_RUNNERS, {"queue": queue, "limit": LIMIT, "worker": worker,
                                                       "stale_after": LIVE_WORKER_SECONDS}).fetchall()
        # "long" against the task's own p95 of the last hour (an hour of minutes keeps this read small)
        p95 = run_times.p95_by_queue(conn) if rows else {}
    for row in rows:
        row["p95_s"] = p95.get(row["queue"])
        row["runtime_s"] = float(row["runtime_s"])  # extract() gives numeric; the ratio divides by a float
        row["long"] = run_times.is_long(row["runtime_s"], row["p95_s"])
    # an orphan's lease is no longer extended: the reaper's first pass after lease_until takes it back
    return page("running/running.html", "running/_running.html", rows=rows, queue=queue or "", limit=LIMIT,
                worker=worker or "", reaper_interval=Settings().reaper_interval, stale_after=LIVE_WORKER_SECONDS,
                long_factor=run_times.LONG_FACTOR, long_floor_s=run_times.LONG_FLOOR_S)


@bp.route("/release", methods=["POST"])
def release() -> ResponseReturnValue:
    """Put the selected running jobs back in their queue now (the reaper's transition)."""
    # a row's own button names just that job; "Release selected" sends the ticked boxes
    one = filters.job_id(request.form.get("one"))
    chosen = [one] if one is not None else filters.ids(request.form.getlist("ids"))
    if not confirmed():
        return _confirm_release(chosen, one)
    with db.connection() as conn, conn.transaction():  # the release and its audit row commit together
        done = state_changes.release_running(conn, chosen, g.user)
        audit("release running", len(done), conn=conn, ids=chosen[:50])
    dead = sum(1 for _, _, status in done if status == JobStatus.DEAD)
    flash(f"Released {len(done)} of {len(chosen)} job(s)" + (f"; {dead} were on their last attempt and are now dead"
          if dead else "") + ("." if len(done) == len(chosen) else " (the others had already finished or moved).")
          + (" Their handlers were not stopped: a result they still deliver is refused. Cancel stops a handler."
             if done else ""))
    return redirect(url_for("running.index"), 303)


def _confirm_release(chosen: list[int], one: int | None) -> ResponseReturnValue:
    """Say what a release does to these jobs before doing it."""
    with db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(page_queries.RUNNING_CHOSEN, {"ids": chosen}).fetchall()
    last = sum(1 for r in rows if r["last_attempt"])
    n = len(rows)
    title = f"Release job {rows[0]['id']}?" if n == 1 and one is not None else f"Release {n} running job(s)?"
    explain = [f"{n} of the {len(chosen)} chosen job(s) are running now; "
               + ("they go" if n != 1 else "it goes") + " back to the queue at once and run again on a free worker"
               + (f", except {last} on its last attempt, which become{'s' if last == 1 else ''} dead." if last
                  else "."),
               "Their handlers are NOT stopped: a handler still running finishes, and its result is refused. "
               "To stop a handler, use Cancel instead."]
    if n < len(chosen):
        explain.append(f"{len(chosen) - n} chosen job(s) are no longer running and will not be changed.")
    fields = [("one", one)] if one is not None else [("ids", i) for i in chosen]
    return confirm_page("release", title, explain, url_for("running.release"), fields,
                        f"Yes, release {n} job{'' if n == 1 else 's'}", url_for("running.index"), possible=n > 0)
