"""Authentication and authorisation for every request, in one place.

One `before_request` guards the whole app, so a route added later (by any blueprint) is
protected without a decorator. Order matters and is fixed here: who are you (401), may your
role do this (403), does the form carry its CSRF token (400).
"""

from __future__ import annotations

import contextlib
import hmac
import logging
from urllib.parse import urlsplit

from flask import Blueprint, Flask, Response, current_app, g, redirect, render_template, request, session, url_for
from flask.typing import ResponseReturnValue
from flask_wtf.csrf import CSRFError, CSRFProtect
from werkzeug.security import check_password_hash

from skiplock.webapp import login_limit
from skiplock.webapp.settings import Account
from skiplock.webapp.web import current_path, is_local_path

log = logging.getLogger("skiplock.console.auth")

bp = Blueprint("auth", __name__)
csrf = CSRFProtect()

# Reachable without logging in. Everything else, including unknown URLs, needs a login first.
PUBLIC_ENDPOINTS = frozenset({"healthz", "static", "auth.login", "ops.metrics"})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# Non-GET endpoints a read-only user may still call (they change only their own session, or, for a running
# job's "Show stack", ask a worker for its stack: read-only for the job, and audited).
ROLE_FREE_POSTS = frozenset({"auth.login", "auth.logout", "job_stack.request_stack"})


def init_app(app: Flask) -> None:
    """Install the global guard, CSRF protection and the login blueprint."""
    # CSRF is checked by our guard (after auth and role), not by CSRFProtect's own hook, so that
    # a stranger gets 401 and a read-only user 403 before anyone is told about tokens.
    app.config.setdefault("WTF_CSRF_CHECK_DEFAULT", False)
    app.config.setdefault("WTF_CSRF_TIME_LIMIT", None)  # tokens live as long as the session
    csrf.init_app(app)
    app.before_request(guard)
    app.register_blueprint(bp)
    app.register_error_handler(CSRFError, _csrf_error)


def check_credentials(accounts: list[Account], user: str, password: str) -> Account | None:
    """The account these credentials log into, or None. Timing does not reveal which part was wrong."""
    found = None
    for account in accounts:
        user_ok = hmac.compare_digest(account.user.encode(), user.encode())
        if account.password_hash:
            pw_ok = check_password_hash(account.password_hash, password)
        else:
            pw_ok = hmac.compare_digest((account.password or "").encode(), password.encode())
        if user_ok and pw_ok:
            found = account
    return found


def _identify() -> Account | Response | None:
    accounts = current_app.config["ACCOUNTS"]
    # HTTP Basic for scripts and curl; the login form's session for browsers
    if request.authorization and request.authorization.type == "basic":
        return _basic(accounts, request.authorization.username or "", request.authorization.password or "")
    user = session.get("user")
    for account in accounts:
        if account.user == user and session.get("role") == account.role:
            return account
    return None


def _basic(accounts: list[Account], user: str, password: str) -> Account | Response | None:
    """HTTP Basic, throttled like the login form: the same counter per user name and client address,
    429 with Retry-After during the pair's delay (even with the right password), each delay audited."""
    wait, counted = login_limit.standing(user)
    if wait:
        log.warning("refused basic auth for user %r from %s: throttled for %ds", user, request.remote_addr, wait)
        return Response(f"Too many failed logins. Try again in {wait} seconds.\n", 429,
                        {"Retry-After": str(wait)}, mimetype="text/plain")
    account = check_credentials(accounts, user, password)
    if account is None:
        log.warning("failed basic auth for user %r from %s", user, request.remote_addr)
        login_limit.record_failure(user, via="basic")
    elif counted:
        login_limit.clear(user)
    return account


# What a host app's authorize hook may call its roles (see skiplock.webapp.mount).
HOOK_ROLES = {"admin": "admin", "readonly": "readonly", "read-only": "readonly"}


def _ask_host() -> tuple[str, str] | None:
    """Mounted in a host app: its authorize hook decides, run in the host's request context so that
    the host's session and login helpers answer. Returns (user, role) or None when refused."""
    hook = current_app.config["AUTH_HOOK"]
    host = current_app.config.get("HOST_APP")
    if request.method not in SAFE_METHODS:
        # parse our own form first: a hook that reads the host's request.form would otherwise
        # consume the shared input stream and leave our CSRF token unread
        request.form.get("csrf_token")
    with host.request_context(request.environ) if host is not None else contextlib.nullcontext():
        from flask import request as host_request

        answer = hook(host_request._get_current_object())  # type: ignore[attr-defined]
    role, user = (answer if isinstance(answer, tuple) else (answer, None)) if answer else (None, None)
    if role not in HOOK_ROLES:
        return None
    return (str(user) if user else f"host {HOOK_ROLES[role]}"), HOOK_ROLES[role]


def guard() -> Response | None:
    """The one before_request: 401 without a login, 403 for a read-only change, 400 without CSRF."""
    endpoint = request.endpoint or ""
    if not current_app.config["AUTH"]:
        g.user, g.role = "anonymous", "admin"
    elif current_app.config.get("AUTH_HOOK"):
        if endpoint == "ops.metrics" and _scraper_may_read_metrics():
            g.user, g.role = "metrics scraper", "readonly"
            return None
        g.user, g.role = _ask_host() or (None, None)
        if g.user is None and endpoint not in ("healthz", "static"):
            return Response("Forbidden: the application this console is mounted in refused access.\n", 403,
                            mimetype="text/plain")
    else:
        account = _identify()
        if isinstance(account, Response):
            return account  # throttled: 429 with Retry-After
        g.user, g.role = (account.user, account.role) if account else (None, None)
    if endpoint in PUBLIC_ENDPOINTS:
        if endpoint == "ops.metrics":
            return _metrics_token_check()
        if request.method not in SAFE_METHODS:
            csrf.protect()  # the login form needs its token too
        return None
    if g.user is None:
        return _unauthorized()
    if request.method not in SAFE_METHODS:
        if g.role != "admin" and endpoint not in ROLE_FREE_POSTS:
            log.warning("refused %s %s for read-only user %s", request.method, request.path, g.user)
            return Response("Forbidden: your login is read-only.\n", 403, mimetype="text/plain")
        csrf.protect()  # raises CSRFError (-> 400) when the token is missing or wrong
    return None


def _scraper_may_read_metrics() -> bool:
    """Mounted: a scraper has no login in the host app, so mount(metrics_public=True) or
    mount(metrics_token=...) let it past the authorize hook for /metrics alone. Without either
    (or with a wrong token), /metrics is asked of the hook like every other page."""
    if current_app.config.get("MOUNT_METRICS_PUBLIC"):
        return True
    token = current_app.config.get("MOUNT_METRICS_TOKEN")
    given = request.headers.get("Authorization", "")
    return bool(token) and hmac.compare_digest(given.encode(), f"Bearer {token}".encode())


def _metrics_token_check() -> Response | None:
    token = current_app.config.get("METRICS_TOKEN")
    if not token:
        return None
    given = request.headers.get("Authorization", "")
    if hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
        return None
    return Response("metrics need Authorization: Bearer <SKIPLOCK_METRICS_TOKEN>\n", 401,
                    {"WWW-Authenticate": 'Bearer realm="skiplock-metrics"'}, mimetype="text/plain")


def _unauthorized() -> Response:
    if request.headers.get("HX-Request"):
        # a poll whose session ended: send the whole page to the login form
        return Response("login required", 401, {"HX-Redirect": url_for("auth.login", next=_safe_next())})
    html = render_template("auth/login.html", next=_safe_next(), error=None)
    return Response(html, 401, {"WWW-Authenticate": 'FormBased realm="skiplock"'})


def _safe_next() -> str:
    target = request.args.get("next") or request.form.get("next") or current_path()
    parts = urlsplit(target)
    # only paths on this site: no scheme, no host, no protocol-relative //evil.example
    if parts.scheme or parts.netloc or not is_local_path(target):
        return url_for("overview.index")
    if parts.path in (url_for("auth.login"), url_for("auth.logout")):
        # logging in from the login page itself (or after logging out) must not land on the form again
        return url_for("overview.index")
    return target.rstrip("?") or url_for("overview.index")


def _csrf_error(exc: CSRFError) -> tuple[str, int]:
    log.warning("refused %s %s: %s", request.method, request.path, exc.description)
    return render_template("error.html", code=400, message=f"Bad request: {exc.description} Reload the page "
                           "and try again."), 400


@bp.route("/login", methods=["GET", "POST"])
def login() -> ResponseReturnValue:
    """The login form; a correct user and password start a session."""
    if current_app.config.get("AUTH_HOOK"):
        return redirect(url_for("overview.index"), 303)  # mounted: the host app does the logging in
    if request.method == "GET":
        return render_template("auth/login.html", next=_safe_next(), error=None)
    user = request.form.get("user", "")
    wait = login_limit.locked_for(user)
    if wait:
        log.warning("refused login for user %r from %s: throttled for %ds", user, request.remote_addr, wait)
        html = render_template("auth/login.html", next=_safe_next(),
                               error=f"Too many failed logins for this user from this address. Try again in {wait} "
                                     "seconds; the right password then logs you in.")
        return Response(html, 429, {"Retry-After": str(wait)})
    account = check_credentials(current_app.config["ACCOUNTS"], user, request.form.get("password", ""))
    if account is None:
        log.warning("failed login for user %r from %s", user, request.remote_addr)
        delay = login_limit.record_failure(user, via="form")
        error = "Wrong user or password." + (f" Wait {delay} seconds before the next try: each wrong one doubles "
                                             "the wait." if delay else "")
        return render_template("auth/login.html", next=_safe_next(), error=error), 401
    login_limit.clear(user)
    session.clear()  # a fresh session (and CSRF token) at every login: no fixation
    session.permanent = True  # so it expires after SESSION_IDLE_MINUTES without a request
    session["user"], session["role"] = account.user, account.role
    log.info("login: %s (%s) from %s", account.user, account.role, request.remote_addr)
    return redirect(_safe_next(), 303)


@bp.route("/logout", methods=["POST"])
def logout() -> ResponseReturnValue:
    """End the session."""
    session.clear()
    return redirect(url_for("auth.login"), 303)
