"""Queue page: one queue's jobs by status with keyset pagination and filters; pause and resume."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from flask import Blueprint, abort, flash, g, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue
from psycopg.rows import dict_row

from skiplock.core import state_changes, transitions
from skiplock.core.errors import ConfigError
from skiplock.core.features import limits
from skiplock.core.plumbing.config import Settings
from skiplock.core.status import JobStatus
from skiplock.monitor import why
from skiplock.webapp import db, filters
from skiplock.webapp.queries import page_queries
from skiplock.webapp.shared import failure_rate
from skiplock.webapp.shared.chart_ranges import RANGES
from skiplock.webapp.shared.counts import COUNT_CAP, capped
from skiplock.webapp.web import audit, confirm_page, confirmed, is_htmx, page

bp = Blueprint("queues", __name__, url_prefix="/queues")

PAGE_SIZE = 50
# A text search looks at this many jobs per page at most (see page_queries.WINDOW_END).
SEARCH_WINDOW = 10_000
# Status tabs: ready and scheduled are both status 'queued', split on run_at.
STATUSES = (transitions.READY, transitions.SCHEDULED, JobStatus.RUNNING.value, JobStatus.DEAD.value,
            JobStatus.FAILED.value, JobStatus.SUCCEEDED.value)
SORTS = ("priority", "run_at")  # claim order, or oldest run_at first (ready and scheduled only)

# The bulk and per-row actions each tab offers: the transition table's, from that situation.
TAB_ACTIONS = {tab: [(t.action, t.label) for t in transitions.allowed(tab)] for tab in STATUSES}


def _tab(status: str) -> str:
    return status if status in (transitions.READY, transitions.SCHEDULED, JobStatus.RUNNING) else "finished"


def _cursor_of(status: str, sort: str, row: dict[str, Any]) -> str:
    if status in (transitions.READY, transitions.SCHEDULED):
        return filters.make_cursor(row["run_at"], row["id"], row["priority"] if sort == "priority" else None)
    return filters.make_cursor(row["started_at"] if status == JobStatus.RUNNING else row["finished_at"], row["id"])


@dataclass
class Page:
    """One page of a tab: its rows and the cursors of the pages after and before it."""

    rows: list[dict[str, Any]]
    next_cursor: str | None
    prev_cursor: str | None
    window_hit: bool = False


def _list(conn: psycopg.Connection, status: str, sort: str, backwards: bool, params: dict[str, Any]) -> Page:
    """One page of jobs, forwards from the `after` cursor or backwards from the `before` one."""
    tab = _tab(status)
    if backwards or sort != "priority":
        sql = page_queries.PAGE[(tab, sort, backwards)]
        with conn.cursor(row_factory=dict_row) as cur:
            # backwards, one row more than a page tells whether a page lies before this one
            rows = cur.execute(sql, {**params, "limit": PAGE_SIZE + 1 if backwards else PAGE_SIZE}).fetchall()
        if backwards:
            more_before = len(rows) > PAGE_SIZE
            rows = rows[:PAGE_SIZE]
            rows.reverse()
            return Page(rows, _cursor_of(status, sort, rows[-1]) if rows else None,
                        _cursor_of(status, sort, rows[0]) if rows and more_before else None)
        return Page(rows, _cursor_of(status, sort, rows[-1]) if len(rows) == PAGE_SIZE else None,
                    _cursor_of(status, sort, rows[0]) if rows and params["c_id"] is not None else None)
    bound: tuple[Any, ...] | None = None
    if params["text"] is not None:
        bound = conn.execute(page_queries.WINDOW_END[tab], {**params, "scan": SEARCH_WINDOW}).fetchone()
    e_prio, e_time, e_id = bound if bound else (None, None, None)
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(page_queries.LIST[tab], {**params, "e_prio": e_prio, "e_time": e_time,
                                                    "e_id": e_id}).fetchall()
    # a text search pages forwards only (its window runs forwards); otherwise "previous" starts at the first row
    prev = _cursor_of(status, sort, rows[0]) if rows and params["c_id"] is not None and bound is None \
        and params["text"] is None else None
    if len(rows) == PAGE_SIZE:
        return Page(rows, _cursor_of(status, sort, rows[-1]), prev)
    if bound:  # the window ended before a full page of matches: continue after the window
        return Page(rows, filters.make_cursor(e_time, e_id, e_prio), prev, True)
    return Page(rows, None, prev)


def _tab_counts(conn: psycopg.Connection, queue: str) -> dict[str, int]:
    """Each status tab's count, capped like the overview's."""
    stats: Any = conn.execute(page_queries.QUEUE_STATS, {"queue": queue, "cap": COUNT_CAP}).fetchone()
    finished: Any = conn.execute(page_queries.FINISHED_COUNTS, {"queue": queue, "cap": COUNT_CAP}).fetchone()
    return {"ready": stats[0], "scheduled": stats[1], "running": stats[2], "dead": stats[3],
            "failed": finished[0], "succeeded": finished[1]}


@bp.route("/<path:name>")
def show(name: str) -> ResponseReturnValue:
    """One queue: why its jobs may not run, a tab per status with counts, and a page of that tab's jobs."""
    queue = filters.queue(name) or abort(404)
    status = filters.choice(filters.arg("status"), STATUSES, "ready", "status")
    text = filters.text(filters.arg("q"))
    sort = filters.choice(filters.arg("sort"), SORTS, "priority", "sort")
    if status not in ("ready", "scheduled") or text is not None:
        sort = "priority"  # only queued jobs have a second order, and a text search keeps claim order
    wanted_id = filters.job_id(filters.arg("id"))
    span = filters.choice(filters.arg("range"), tuple(RANGES), "1h", "range")  # the failure-rate chart's
    backwards = filters.arg("before") not in (None, "")
    prio, c_time, c_id = filters.cursor(filters.arg("before") if backwards else filters.arg("after"))
    if c_id is not None and status in ("ready", "scheduled") and sort == "priority" and prio is None:
        abort(400, "malformed page cursor")
    if backwards and text is not None:
        abort(400, "a text search pages forwards only")
    params = {"queue": queue, "status": status, "text": filters.like(text), "id": wanted_id, "c_prio": prio,
              "c_time": c_time, "c_id": c_id, "limit": PAGE_SIZE}
    with db.connection() as conn:
        result = _list(conn, status, sort, backwards, params)
        counts = _tab_counts(conn, queue)
        paused = conn.execute(page_queries.IS_PAUSED, {"queue": queue}).fetchone()
        reasons = why.for_queue(conn, queue, Settings().reaper_interval)
        flow = page_queries.queue_flow(conn, queue)  # limits, tenants, payload versions (templates/queues/_flow.html)
        failures = failure_rate.for_queue(conn, queue, span) if not is_htmx() else None  # not in the live part
    first_page = c_id is None or (backwards and result.prev_cursor is None)
    return page("queues/queue.html", "queues/_queue_jobs.html", queue=queue, status=status, statuses=STATUSES,
                rows=result.rows, q=text or "", wanted_id=wanted_id or "", next_cursor=result.next_cursor,
                prev_cursor=result.prev_cursor, window_hit=result.window_hit, search_window=SEARCH_WINDOW,
                paused=bool(paused and paused[0]), first_page=first_page, counts=counts, sort=sort,
                reasons=reasons, actions=TAB_ACTIONS[status], capped=capped, flow=flow, failure_rate=failures)


@bp.route("/<path:name>/jobs", methods=["POST"])
def act(name: str) -> ResponseReturnValue:
    """Cancel, run now, retry or purge one job or the selected ones, after a confirmation."""
    queue = filters.queue(name) or abort(404)
    status = filters.choice(filters.arg("status"), STATUSES, "ready", "status")
    what = filters.choice(filters.arg("action"), tuple(a for a, _label in TAB_ACTIONS[status]), "", "action")
    one = filters.job_id(filters.arg("one"))
    back = url_for("queues.show", name=queue, status=status)
    if one is None and not request.form.getlist("ids"):
        flash("Select at least one job first.", "error")
        return redirect(back, 303)
    chosen = [one] if one is not None else filters.ids(request.form.getlist("ids"))
    transition = transitions.BY_ACTION[what]
    # every action destroys (purge), stops (cancel, release) or starts work (retry, run now): it says so first
    if filters.arg("confirm") != "yes":
        return render_template("queues/queue_confirm.html", queue=queue, status=status, what=what,
                               label=transition.label, ids=chosen, count=len(chosen))
    with db.connection() as conn, conn.transaction():  # the change and its audit row commit together
        done = transition.apply(conn, chosen, str(g.user))
        audit(f"{what} {'one' if one is not None else 'selected'}", len(done), conn=conn, queue=queue,
              ids=chosen[:50])
    skipped = len(chosen) - len(done)
    note = f" {skipped} not changed: {transition.refused} (any more)." if skipped else ""
    flash(f"{len(done)} job(s) {transition.past}.{note}", "error" if skipped and not done else "message")
    return redirect(back, 303)


@bp.route("/<path:name>/pause", methods=["POST"])
def pause(name: str) -> ResponseReturnValue:
    """Stop every worker from claiming this queue."""
    queue = filters.queue(name) or abort(404)
    with db.connection() as conn:
        known = conn.execute(page_queries.QUEUE_KNOWN, {"queue": queue}).fetchone()
        if not confirmed():
            return _confirm_pause(conn, queue, bool(known and known[0]))
        if not (known and known[0]) and filters.arg("unknown_ok") != "yes":
            # a typo (/queues/imagse) must not create a phantom paused queue: refuse, unless the
            # confirmation page (which said the queue is unknown) asked for exactly that
            flash(f"Queue {queue} has no jobs, no worker serves it and no schedule feeds it, so it was not "
                  "paused (a typo?). To pause it before its first job, confirm the pause on its confirmation page.",
                  "error")
            return redirect(url_for("queues.show", name=queue), 303)
        with conn.transaction():  # the pause and its audit row commit together
            changed = state_changes.pause_queue(conn, queue, g.user)
            audit("pause queue", 0, conn=conn, queue=queue, changed=changed)
    flash(f"Queue {queue} paused: no worker claims its jobs until it is resumed." if changed
          else f"Queue {queue} was already paused.")
    return redirect(url_for("queues.show", name=queue), 303)


def _confirm_pause(conn: psycopg.Connection, queue: str, known: bool) -> ResponseReturnValue:
    """Say what pausing this queue does (with its counts) before doing it."""
    stats = _tab_counts(conn, queue)
    explain = [f"No worker claims a job of queue {queue} until it is resumed: its {capped(stats['ready'])} ready "
               f"and {capped(stats['scheduled'])} scheduled job(s) wait, and producers can still enqueue.",
               f"Its {stats['running']} running job(s) are not stopped: they finish normally."]
    fields: list[tuple[str, str]] = []
    if not known:
        explain.append(f"Queue {queue} has no jobs yet, no worker serves it and no schedule feeds it (a typo?). "
                       "Confirming pauses it ahead of its first job.")
        fields.append(("unknown_ok", "yes"))
    return confirm_page("pause", f"Pause queue {queue}?", explain, url_for("queues.pause", name=queue), fields,
                        f"Yes, pause {queue}", url_for("queues.show", name=queue))


@bp.route("/<path:name>/resume", methods=["POST"])
def resume(name: str) -> ResponseReturnValue:
    """Let workers claim this queue again, after a confirmation with the jobs that then start."""
    queue = filters.queue(name) or abort(404)
    if not confirmed():
        with db.connection() as conn:
            stats = _tab_counts(conn, queue)
        return confirm_page("resume", f"Resume queue {queue}?", [
            f"Workers claim its jobs again at once: its {capped(stats['ready'])} ready job(s) start as workers "
            f"are free, and its {capped(stats['scheduled'])} scheduled job(s) when they are due."],
            url_for("queues.resume", name=queue), [], f"Yes, resume {queue}", url_for("queues.show", name=queue),
            danger=False)
    with db.connection() as conn, conn.transaction():  # the resume and its audit row commit together
        changed = state_changes.resume_queue(conn, queue)
        audit("resume queue", 0, conn=conn, queue=queue, changed=changed)
    flash(f"Queue {queue} resumed." if changed else f"Queue {queue} was not paused.")
    return redirect(url_for("queues.show", name=queue), 303)


@bp.route("/<path:name>/limit", methods=["POST"])
def limit(name: str) -> ResponseReturnValue:
    """Set or clear the queue's global concurrency and rate limits (as `skiplock queues limit` does)."""
    queue = filters.queue(name) or abort(404)
    back = url_for("queues.show", name=queue)
    clear = filters.arg("clear") == "yes"
    raw_concurrency = (filters.arg("concurrency") or "").strip()
    raw_rate = (filters.arg("rate") or "").strip()
    try:
        concurrency = None if clear or not raw_concurrency else int(raw_concurrency)
        rate = None if clear or not raw_rate else limits.parse_rate(raw_rate)
        if concurrency is not None:
            limits.check_concurrency(concurrency)
    except (ValueError, ConfigError) as exc:  # a clear message, and nothing changed
        flash(f"Limits of {queue} not changed: {exc}", "error")
        return redirect(back, 303)
    with db.connection() as conn, conn.transaction():  # the change and its audit row commit together
        limits.set_limit(conn, queue, concurrency=concurrency, rate=rate, actor=str(g.user))
        audit("limit queue", 0, conn=conn, queue=queue, concurrency=concurrency, rate=rate)
    if concurrency is None and rate is None:
        flash(f"Queue {queue} has no global limit now.")
    else:
        parts = [f"concurrency {concurrency}" if concurrency else "", f"rate {rate:g}/s" if rate else ""]
        flash(f"Queue {queue} limited to {' and '.join(p for p in parts if p)} across all workers "
              "(workers pick it up within a second).")
    return redirect(back, 303)


@bp.route("/<path:name>/tenant-limit", methods=["POST"])
def tenant_limit(name: str) -> ResponseReturnValue:
    """Set or remove the queue's per-tenant limits (as `skiplock queues limit --per-tenant-...` does),
    keeping its global ones."""
    queue = filters.queue(name) or abort(404)
    back = url_for("queues.show", name=queue)
    clear = filters.arg("clear") == "yes"
    raw_concurrency = (filters.arg("tenant_concurrency") or "").strip()
    raw_rate = (filters.arg("tenant_rate") or "").strip()
    with db.connection() as conn, conn.transaction():  # the change and its audit row commit together
        current = next((r for r in limits.list_limits(conn) if r.queue == queue), None)
        try:
            concurrency, rate, burst = (None, None, None) if clear else _tenant_values(raw_concurrency, raw_rate,
                                                                                      current)
        except (ValueError, ConfigError) as exc:  # a clear message, and nothing changed
            flash(f"Per-tenant limits of {queue} not changed: {exc}", "error")
            return redirect(back, 303)
        limits.set_tenant_limit(conn, queue, concurrency=concurrency, rate=rate, burst=burst, actor=str(g.user))
        audit("limit queue per tenant", 0, conn=conn, queue=queue, concurrency=concurrency, rate=rate, burst=burst)
    kept = " Its global limits stay as they are." if current and current.global_limits else ""
    if concurrency is None and rate is None:
        flash(f"Queue {queue} has no per-tenant limit now.{kept}")
    else:
        parts = [f"concurrency {concurrency}" if concurrency else "",
                 f"rate {rate:g}/s (tolerance {burst:g})" if rate and burst else ""]
        flash(f"Each tenant of queue {queue} limited to {' and '.join(p for p in parts if p)}; "
              f"workers pick it up within a second.{kept}")
    return redirect(back, 303)


def _tenant_values(raw_concurrency: str, raw_rate: str,
                   current: limits.QueueLimit | None) -> tuple[int | None, float | None, float | None]:
    """(concurrency, rate per second, burst) from the per-tenant form, checked by the library's own rules."""
    if not raw_concurrency and not raw_rate:
        raise ConfigError("give a per-tenant concurrency, a rate or both (Remove per-tenant limits removes them)")
    concurrency = None
    if raw_concurrency:
        number: object
        try:
            number = int(raw_concurrency)
        except ValueError:
            number = raw_concurrency  # no whole number: the library's check refuses it in its own words
        concurrency = limits.check_concurrency(number)
    if current and current.tenant_rate and raw_rate == f"{current.tenant_rate:g}/s":
        # the rate as the form showed it: kept exactly, with its tolerance (which the form does not
        # show, and may have been set with the CLI's --per-tenant-burst)
        return concurrency, current.tenant_rate, current.tenant_burst
    rate, burst = limits.checked_rate(raw_rate or None, None)
    return concurrency, rate, burst
