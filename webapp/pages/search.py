"""Search: find jobs of any state by id, queue, state, a payload field, unique key, lock key, tenant
or error text. Every filter is in the query string, so a search is a URL to share, and back and
forward in the browser step through earlier searches. Pages are keyset pages on id, newest first.
"""

from __future__ import annotations

from typing import Any

import psycopg
from flask import Blueprint, make_response, request, url_for
from flask.typing import ResponseReturnValue
from psycopg.rows import dict_row

from skiplock.core.sql import queries
from skiplock.webapp import db
from skiplock.webapp.queries import search_queries
from skiplock.webapp.shared import search_filter
from skiplock.webapp.shared.search_filter import SearchFilter
from skiplock.webapp.web import is_htmx, page

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
