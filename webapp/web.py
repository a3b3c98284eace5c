"""What every console view shares: page-or-fragment rendering, headers, polling, audit log, errors."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from flask import (
    Flask,
    Response,
    abort,
    current_app,
    g,
    has_request_context,
    make_response,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from flask.sessions import SecureCookieSessionInterface
from flask.typing import ResponseReturnValue
from psycopg_pool import PoolTimeout
from werkzeug.exceptions import HTTPException
from werkzeug.middleware.proxy_fix import ProxyFix

from skiplock.core.features import audit as audit_trail
from skiplock.webapp.db import connection
from skiplock.webapp.queries import parked_queries
from skiplock.webapp.shared import names

audit_log = logging.getLogger("skiplock.console.audit")

# Choices for the live-refresh interval (seconds; 0 = off). The default suits a 2 a.m. glance.
REFRESH_CHOICES = (0, 2, 5, 10, 30)
DEFAULT_REFRESH = 5

# The browser may run our own scripts only; htmx runs with allowEval off so no inline code is needed.
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'")


def init_app(app: Flask) -> None:
    """Headers, template globals, session cookie rules and error pages for every response."""
    if app.config.get("BEHIND_PROXY"):
        # trust one proxy's X-Forwarded-For/-Proto/-Host: request.is_secure and remote_addr become the client's
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=1, x_proto=1, x_host=1)  # type: ignore[method-assign]
    app.session_interface = _SecureWhenHttps()
    # the signed cookie is refused once older than this, and every request re-signs it: an idle timeout
    app.permanent_session_lifetime = timedelta(minutes=int(app.config.get("SESSION_IDLE_MINUTES") or 60))
    app.after_request(_headers)
    app.context_processor(_template_globals)
    app.register_error_handler(HTTPException, _http_error)
    # the database went away mid-request: say so plainly (503), not a bare 500
    app.register_error_handler(psycopg.OperationalError, _database_down)
    app.register_error_handler(PoolTimeout, _database_down)
    # a table, column or function the migrations make is missing: the database is not (fully) migrated
    for missing in (psycopg.errors.UndefinedTable, psycopg.errors.UndefinedColumn, psycopg.errors.UndefinedFunction):
        app.register_error_handler(missing, _not_migrated)
    app.add_url_rule("/prefs", "prefs", prefs)
    app.jinja_env.filters["duration"] = duration
    app.jinja_env.filters["ago"] = ago
    app.jinja_env.filters["qname"] = names.qname


class _SecureWhenHttps(SecureCookieSessionInterface):
    """The session cookie gets Secure whenever the request came over HTTPS (directly or per the proxy)."""

    def get_cookie_secure(self, app: Flask) -> bool:
        return bool(app.config.get("SESSION_COOKIE_SECURE")) or (has_request_context() and request.is_secure)

    def should_set_cookie(self, app: Flask, session: Any) -> bool:
        # A page's background requests (htmx polls and loaders, which send HX-Request) never re-send an
        # unchanged cookie: one still in flight when the operator logs out would otherwise arrive after the
        # logout and put the old, logged-in cookie back (and break the next login's CSRF check). So an
        # open page's refreshes do not count as activity for the idle timeout either; the operator's
        # own clicks do.
        if request.method == "GET" and request.headers.get("HX-Request") and not session.modified:
            return False
        return super().should_set_cookie(app, session)

    def get_cookie_path(self, app: Flask) -> str:
        # Mounted by a Django or ASGI host, the prefix is known only per request (SCRIPT_NAME):
        # scope the console's cookie to it, as mount() does for a Flask host with SESSION_COOKIE_PATH.
        if app.config.get("SESSION_COOKIE_PATH") or not has_request_context() or not request.script_root:
            return super().get_cookie_path(app)
        return request.script_root


def duration(seconds: float | None) -> str:
    """A short human duration: 0.4ms, 120ms, 4.2s, 42s, 3m 05s, 2h 10m, 3d 4h; a dash for none."""
    if seconds is None:
        return "\u2013"  # en dash
    sign = "-" if seconds < 0 else ""
    s = int(abs(seconds))
    if abs(seconds) < 1:  # a handler's run time: milliseconds say more than "0.0s"
        ms = abs(seconds) * 1000
        return f"{sign}{ms:.1f}ms" if ms < 10 else f"{sign}{ms:.0f}ms"
    if s < 60:
        return f"{sign}{abs(seconds):.1f}s" if s < 10 else f"{sign}{s}s"
    if s < 3600:
        return f"{sign}{s // 60}m {s % 60:02d}s"
    if s < 86400:
        return f"{sign}{s // 3600}h {s % 3600 // 60:02d}m"
    return f"{sign}{s // 86400}d {s % 86400 // 3600}h"


def ago(value: datetime, now: datetime | None = None) -> str:
    """A time relative to now: "3m 05s ago", "in 2h 10m" (pages show the absolute time on hover)."""
    seconds = ((now or datetime.now(UTC)) - value).total_seconds()
    if abs(seconds) < 1:
        return "just now"
    return f"{duration(seconds)} ago" if seconds > 0 else f"in {duration(-seconds)}"


def is_htmx() -> bool:
    """True when htmx asked for a fragment (not a boosted or history-restore full page)."""
    return request.headers.get("HX-Request") == "true" and request.headers.get("HX-History-Restore-Request") != "true"


def page(template: str, fragment: str, **context: Any) -> Response:
    """The full page, or only its self-refreshing fragment when htmx asks (Vary: HX-Request)."""
    response = make_response(render_template(fragment if is_htmx() else template, **context))
    response.vary.add("HX-Request")
    return response


def confirmed() -> bool:
    """True when the form is the confirmation page's second post (confirm=yes)."""
    return request.form.get("confirm") == "yes"


def confirm_page(kind: str, title: str, explain: list[str], action: str, fields: list[tuple[str, Any]],
                 button: str, back: str, danger: bool = True, possible: bool = True) -> Response:
    """The page that says what an action will do before it is done (templates/confirm.html), and on
    which database (templates/_confirm_database.html)."""
    return make_response(render_template("confirm.html", kind=kind, title=title, explain=explain, action=action,
                                         fields=fields, button=button, back=back, danger=danger,
                                         possible=possible))


def database_label(conn: psycopg.Connection | None = None) -> str:
    """The database an action acts on, as the operator knows it: the console's name for it (one console
    over several databases), else PostgreSQL's own name. Every confirmation page shows it."""
    name = current_app.config.get("DATABASE_NAME")
    if name:
        return str(name)
    if conn is None:
        with connection(primary=True) as own:  # actions run on the primary: name that one
            row = own.execute(parked_queries.DATABASE).fetchone()
    else:
        row = conn.execute(parked_queries.DATABASE).fetchone()
    return str(row[0]) if row else "?"


def audit(action: str, count: int, conn: psycopg.Connection | None = None, **detail: Any) -> None:
    """Log an operator action (who, what, how many jobs, its parameters) and keep it in the Audit trail.

    Pass the connection the action ran on, inside `conn.transaction()`: the trail row then commits
    with the action or not at all. Without one, the row is written on its own."""
    if current_app.config.get("DATABASE_NAME"):  # one console over several databases: say which
        detail.setdefault("database", current_app.config["DATABASE_NAME"])
    extras = " ".join(f"{k}={v!r}" for k, v in sorted(detail.items()) if v not in (None, "", []))
    audit_log.info("operator %s (%s) %s: %d job(s) %s", g.get("user"), g.get("role"), action, count, extras)
    row = {k: v for k, v in detail.items() if v not in (None, "", [])}
    if conn is not None:
        audit_trail.record(conn, str(g.get("user")), g.get("role"), action, count, row)
        return
    with connection(primary=True) as own:
        audit_trail.record(own, str(g.get("user")), g.get("role"), action, count, row)


def refresh_seconds() -> int:
    """The live-refresh interval this browser chose."""
    value = session.get("refresh", DEFAULT_REFRESH)
    return value if value in REFRESH_CHOICES else DEFAULT_REFRESH


def prefs() -> ResponseReturnValue:
    """Set the refresh interval (a GET form, so it works without JS), then go back."""
    raw = request.args.get("refresh", "")
    if not raw.isdigit() or int(raw) not in REFRESH_CHOICES:
        abort(400, f"refresh must be one of {', '.join(map(str, REFRESH_CHOICES))}")
    session["refresh"] = int(raw)
    target = request.args.get("next", "")
    if not is_local_path(target):
        target = url_for("overview.index")
    return redirect(target, 303)


def current_path() -> str:
    """This request's path and query as the browser sees it, including the prefix a host app mounted
    the console under (request.full_path alone leaves SCRIPT_NAME out)."""
    return (request.script_root + request.full_path).rstrip("?")


def is_local_path(target: str) -> bool:
    """True for a path on this site: "/x", never "//host", "/\\host" (browsers read both as a host) or "http:"."""
    return target.startswith("/") and not target.startswith(("//", "/\\")) and "\\" not in target \
        and not any(ord(c) < 32 for c in target)


def _template_globals() -> dict[str, Any]:
    return {
        "refresh": refresh_seconds(),
        "here": current_path(),
        "refresh_choices": REFRESH_CHOICES,
        "auth_off": not current_app.config["AUTH"],
        # mounted in a host app: the host owns login and logout
        "mounted": bool(current_app.config.get("AUTH_HOOK")),
        "user": g.get("user"),
        # set when the page read from SKIPLOCK_CONSOLE_READ_URL (webapp/db.py): how stale it may be
        "replica_lag": g.get("replica_lag"),
        "role": g.get("role"),
        # called by the confirmation pages only (one query when the console has no name for its database)
        "database_label": database_label,
    }


def _headers(response: Response) -> Response:
    response.headers.setdefault("Content-Security-Policy", CSP)
    response.headers.setdefault("X-Frame-Options", "DENY")  # frame-ancestors for browsers without CSP 2
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("Referrer-Policy", "same-origin")
    if request.endpoint != "static":
        response.headers.setdefault("Cache-Control", "no-store")  # live data, and per-user pages
    return response


def _database_down(exc: Exception) -> tuple[str, int]:
    logging.getLogger("skiplock.console").warning("database unavailable: %s", str(exc).splitlines()[0] if str(exc)
                                                  else type(exc).__name__)
    return render_template("error.html", code=503, message="The database is not answering; this page will work "
                           "again when it is back. /healthz reports the same."), 503


def _not_migrated(exc: Exception) -> tuple[str, int]:
    logging.getLogger("skiplock.console").warning("the database is not migrated: %s",
                                                  str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    return render_template("error.html", code=503, message="The database is not migrated: run `skiplock migrate`. "
                           "This page will work once it has run; /healthz says \"not migrated\" until then."), 503


def _http_error(exc: HTTPException) -> Response | HTTPException:
    if exc.code is None or exc.code < 400:
        return exc
    response = make_response(render_template("error.html", code=exc.code, message=exc.description), exc.code)
    response.headers.update({k: v for k, v in exc.get_headers() if k.lower() != "content-type"})
    return response
