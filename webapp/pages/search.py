"""Search: find jobs of any state by id, queue, state, a payload field, unique key, lock key, tenant
or error text. Every filter is in the query string, so a search is a URL to share, and back and
forward in the browser step through earlier searches. Pages are keyset pages on id, newest first.

Retry, cancel and purge act on everything the search finds, not only the page shown (/search/bulk): a
dry run counts the matching jobs the action applies to, up to BULK_CAP, and the confirmation states that
count and the database. The confirmation pins the set: it carries the filter and the newest matching id
it counted, and the action collects the matches again through the same statements, no newer than that
id, and changes them through the transitions' guarded statements. A job that moved meanwhile is left
alone, and the result says how many were acted on out of how many counted.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import psycopg
from flask import Blueprint, abort, flash, g, make_response, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue
from psycopg.rows import dict_row

from skiplock.core import transitions
from skiplock.core.sql import queries
from skiplock.core.status import JobStatus
from skiplock.webapp import db, filters
from skiplock.webapp.queries import search_queries
from skiplock.webapp.shared import search_filter
from skiplock.webapp.shared.database_name import database_name
from skiplock.webapp.shared.search_filter import SearchFilter
from skiplock.webapp.web import audit, confirmed, is_htmx, page

bp = Blueprint("search", __name__, url_prefix="/search")

PAGE_SIZE = 50


@bp.route("/")
def index() -> ResponseReturnValue:
    """The form, and one page of matching jobs when any filter is given."""
    flt, problems = search_filter.read(request.args)
    rows: list[dict[str, Any]] = []
    if not problems and not flt.is_empty():
        with db.connection() as conn:
            rows = find(conn, flt, PAGE_SIZE)
    next_after = rows[-1]["id"] if len(rows) == PAGE_SIZE else None
    response = page("search/search.html", "search/_search_results.html", flt=flt, problems=problems, rows=rows,
                    next_after=next_after, states=search_filter.STATES, searched=not flt.is_empty())
    # A bad filter is the client's error (400). htmx swaps no 4xx response, so its fragment keeps 200
    # and carries the same message in place of the results.
    if problems and not is_htmx():
        response = make_response(response, 400)
    if is_htmx():
        # the address bar shows the search without the form's empty fields (htmx pushes this URL)
        response.headers["HX-Push-Url"] = _canonical_url()
    return response


# The query-string names a search URL keeps, in the order the form has them.
_ARGS = ("id", "queue", "state", "path", "value", "unique_key", "lock_key", "tenant", "error", "log", "after")


def _canonical_url() -> str:
    """This search's URL with the empty fields left out; values kept as typed, even a bad one, so
    back and forward show the operator what they searched for."""
    given: dict[str, Any] = {name: request.args[name] for name in _ARGS if request.args.get(name, "").strip()}
    return url_for("search.index", **given)


HISTORY_SQL = queries("jobs_history_search")
# jobs_history holds none of these: a search by one of them finds nothing there
_NOT_IN_HISTORY = ("lock_key", "tenant", "signal_key", "log")


def find(conn: psycopg.Connection, flt: SearchFilter, limit: int) -> list[dict[str, Any]]:
    """Up to `limit` matching jobs after the cursor, newest first: those in jobs, and, when they leave room
    on the page, those moved to jobs_history (marked `archived`), merged by id."""
    rows = _find_live(conn, flt, limit)
    if len(rows) == limit or any(getattr(flt, name) is not None for name in _NOT_IN_HISTORY):
        return rows
    params = search_queries.params(flt, limit)
    with conn.cursor(row_factory=dict_row) as cur:
        sql = HISTORY_SQL.history_by_id if flt.id is not None else HISTORY_SQL.history_recent
        archived = cur.execute(sql, params).fetchall()
    return sorted(rows + archived, key=lambda r: -int(r["id"]))[:limit]


def _find_live(conn: psycopg.Connection, flt: SearchFilter, limit: int) -> list[dict[str, Any]]:
    """Up to `limit` matching jobs of the jobs table after the cursor, newest first (search_queries says how)."""
    params = search_queries.params(flt, limit)
    # the console's connections never prepare statements (webapp/db.py connection(): a generic plan
    # cannot use the partial indexes search relies on)
    with conn.cursor(row_factory=dict_row) as cur:
        if flt.id is not None:
            rows = cur.execute(search_queries.by_id(flt), params).fetchall()
            return [r for r in rows if flt.after is None or r["id"] < flt.after]
        rows = cur.execute(search_queries.recent(flt), params).fetchall()
        if len(rows) == limit:
            return rows
        end = cur.execute(search_queries.WINDOW_END, params).fetchone()
        if end is None:  # the window held every job before the cursor
            return rows
        older = cur.execute(search_queries.indexed(flt),
                            {**params, "before": end["id"], "limit": limit - len(rows)}).fetchall()
    return rows + older


BULK_ACTIONS = ("retry", "cancel", "purge")
# The most jobs one bulk action changes: the ids are collected, then changed in one transaction with the
# audit row. A search matching more is refused with the count, to be narrowed (or, for dead letters,
# acted on from the Dead letters page, which changes "all matching" in batches).
BULK_CAP = 10_000


@bp.route("/bulk", methods=["POST"])
def bulk() -> ResponseReturnValue:
    """Retry, cancel or purge every job the search finds: the dry-run count first, then the action."""
    action = filters.choice(request.form.get("action"), BULK_ACTIONS, "", "action")
    transition = transitions.BY_ACTION[action]
    flt, problems = search_filter.read(request.form)
    if problems or flt.is_empty():
        abort(400, "A bulk action needs the search's filter: " + (" ".join(problems) or "none was given."))
    flt = replace(flt, after=None)
    back = url_for("search.index", **flt.args())
    with db.connection(primary=True) as conn:  # what is counted and changed is the primary's
        if not confirmed():
            rows = find(conn, flt, BULK_CAP + 1)
            applies = [r["id"] for r in rows[:BULK_CAP] if _applies(transition, r["status"])]
            return render_template("search/bulk_confirm.html", action=action, transition=transition, flt=flt,
                                   matched=len(rows), applies=len(applies), over=len(rows) > BULK_CAP, cap=BULK_CAP,
                                   upto=max(applies, default=0), database=database_name(conn), back=back)
        upto = filters.job_id(request.form.get("upto"), "upto") or abort(400, "upto is required to confirm")
        counted = filters.job_id(request.form.get("counted"), "counted") or 0  # a count: a whole number, like an id
        # the search's own keyset cursor pins the set: no job newer than the newest one counted
        rows = find(conn, replace(flt, after=upto + 1), BULK_CAP + 1)
        if len(rows) > BULK_CAP:
            abort(409, f"More than {BULK_CAP:,} jobs match now: narrow the search; nothing was changed.")
        chosen = [r["id"] for r in rows if _applies(transition, r["status"])]
        with conn.transaction():  # the change and its audit row commit together
            done = transition.apply(conn, chosen, f"console:{g.get('user') or 'anonymous'}") if chosen else []
            audit(f"{action} search results", len(done), conn=conn, search=flt.args(), counted=counted,
                  ids=sorted(done)[:50])
    left = counted - len(done)
    flash(f"{transition.label} acted on {len(done):,} of the {counted:,} job(s) counted"
          + (f"; {left:,} had moved or no longer matched, and were left alone." if left > 0 else "."),
          "message" if done or not counted else "error")
    return redirect(back, 303)


def _applies(transition: transitions.Transition, status: str) -> bool:
    """Whether the action takes a job in `status` (a queued job is ready or scheduled: either counts)."""
    if status == JobStatus.QUEUED:
        return bool({transitions.READY, transitions.SCHEDULED} & transition.sources)
    return status in transition.sources
