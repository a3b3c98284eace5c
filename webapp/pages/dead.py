"""Dead letters: dead (or failed) jobs grouped by queue and first error line over a time window,
with retry and purge for one job, the selected jobs, or every job matching the filter.

Every action first shows a confirmation stating how many jobs it covers and on which database; "all matching" is then
pinned to jobs that had finished by the time the confirmation was shown.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from flask import Blueprint, abort, flash, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue
from psycopg.rows import dict_row

from skiplock.core import state_changes
from skiplock.core.status import JobStatus
from skiplock.webapp import db, filters
from skiplock.webapp.queries import page_queries
from skiplock.webapp.web import audit, is_local_path, page

bp = Blueprint("dead", __name__, url_prefix="/dead")

PAGE_SIZE = 50
GROUPS_LIMIT = 50
# The groups read at most this many of the window's newest dead jobs (see page_queries.DEAD_GROUPS).
GROUPS_SCAN = 20_000
STATUSES = (JobStatus.DEAD.value, JobStatus.FAILED.value)
ACTIONS = ("retry", "purge")
# A row's expandable traceback shows at most this much of last_error (the job page shows all of it).
ERROR_CHARS = 4000


@dataclass(frozen=True)
class DeadFilter:
    """The dead-letter page's filter, as the operator typed it."""

    status: str
    queue: str | None
    window: str
    error: str | None
    text: str | None

    def args(self) -> dict[str, Any]:
        """Query-string arguments that reproduce this filter (empty ones left out)."""
        raw = {"status": self.status, "queue": self.queue, "window": self.window, "error": self.error, "q": self.text}
        return {k: v for k, v in raw.items() if v}

    def core_filter(self, now: datetime, until: datetime | None = None) -> state_changes.FinishedFilter:
        """The queue core's filter for "all matching", measured from the database's `now`."""
        length = filters.WINDOWS[self.window]
        return state_changes.FinishedFilter(status=self.status, queue=self.queue,
                                            since=(now - length) if length else None,
                                            until=until, error=self.error, text=self.text)


def _read_filter() -> DeadFilter:
    window, _ = filters.window(filters.arg("window"))
    error = filters.arg("error")
    if error is not None and (len(error) > 300 or "\x00" in error):  # error_summary.MAX_HEADLINE
        abort(400, "error filter is too long")
    return DeadFilter(status=filters.choice(filters.arg("status"), STATUSES, JobStatus.DEAD.value, "status"),
                      queue=filters.queue(filters.arg("queue")), window=window,
                      error=error if error else None, text=filters.text(filters.arg("q")))


def _db_now(conn: Any) -> datetime:
    return conn.execute(page_queries.NOW).fetchone()[0]


@bp.route("/")
def index() -> ResponseReturnValue:
    """Groups by queue and error over the window, and the matching jobs (keyset pages)."""
    flt = _read_filter()
    _, c_time, c_id = filters.cursor(filters.arg("after"))
    with db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        now = _db_now(conn)
        matching = flt.core_filter(now)
        groups = cur.execute(page_queries.DEAD_GROUPS, {"status": flt.status, "since": matching.since,
                                                        "queue": flt.queue, "limit": GROUPS_LIMIT,
                                                        "scan": GROUPS_SCAN}).fetchall()
        rows = cur.execute(page_queries.FINISHED_MATCH_LIST, {**matching.params(), "c_time": c_time,
                                                              "c_id": c_id, "limit": PAGE_SIZE,
                                                              "error_chars": ERROR_CHARS}).fetchall()
    next_cursor = filters.make_cursor(rows[-1]["finished_at"], rows[-1]["id"]) if len(rows) == PAGE_SIZE else None
    partial = bool(groups) and groups[0]["scanned"] >= GROUPS_SCAN
    return page("dead/dead.html", "dead/_dead_groups.html", flt=flt, groups=groups, rows=rows, windows=filters.WINDOWS,
                partial=partial, groups_scan=GROUPS_SCAN,
                statuses=STATUSES, next_cursor=next_cursor, first_page=c_id is None)


@bp.route("/action", methods=["POST"])
def action() -> ResponseReturnValue:
    """Retry or purge one job, the selected ones or all matching, each after a confirmation with the count."""
    what = filters.choice(filters.arg("action"), ACTIONS, "", "action")
    flt = _read_filter()
    one = filters.job_id(filters.arg("one"))
    confirmed = filters.arg("confirm") == "yes"
    if one is not None:  # a row's own button: the same confirmation, for its one job
        if confirmed:
            return _apply_ids(what, [one], flt)
        return render_template("dead/dead_confirm.html", what=what, scope="selected", count=1, ids=[one], flt=flt,
                               as_of=None, one=one)
    scope = filters.choice(filters.arg("scope"), ("selected", "matching"), "", "scope")
    if scope == "selected":
        chosen = filters.ids(request.form.getlist("ids"))
        if confirmed:
            return _apply_ids(what, chosen, flt)
        return render_template("dead/dead_confirm.html", what=what, scope=scope, count=len(chosen), ids=chosen,
                               flt=flt, as_of=None)
    with db.connection() as conn:
        now = _db_now(conn)
        if confirmed:
            as_of = filters.timestamp(filters.arg("as_of")) or abort(400, "as_of is required to confirm")
            matching = flt.core_filter(now, until=as_of)
            # batches commit as they go (a million rows must not be one transaction): the trail row
            # follows the last batch, with the count actually changed
            count = (state_changes.retry_matching if what == "retry" else state_changes.purge_matching)(conn, matching)
            audit(f"{what} all matching", count, conn=conn, **flt.args())
            flash(f"{'Retried' if what == 'retry' else 'Purged'} {count:,} job(s) matching the filter.")
            return redirect(url_for("dead.index", **flt.args()), 303)
        count = state_changes.count_finished_matching(conn, flt.core_filter(now, until=now))
    return render_template("dead/dead_confirm.html", what=what, scope=scope, count=count, ids=[], flt=flt,
                           as_of=filters.micros(now.astimezone(UTC)))


def _apply_ids(what: str, chosen: list[int], flt: DeadFilter) -> ResponseReturnValue:
    with db.connection() as conn, conn.transaction():  # the change and its audit row commit together
        done = (state_changes.retry_finished if what == "retry" else state_changes.purge_finished)(conn, chosen)
        audit(f"{what} selected", len(done), conn=conn, ids=chosen[:50])
    verb = "Retried" if what == "retry" else "Purged"
    skipped = len(chosen) - len(done)
    flash(f"{verb} {len(done)} job(s)." + (f" {skipped} were no longer dead or failed." if skipped else ""))
    back = request.form.get("back")
    if back and is_local_path(back):
        return redirect(back, 303)
    return redirect(url_for("dead.index", **flt.args()), 303)
