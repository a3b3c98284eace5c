"""Mount the console inside the user's own Flask app, as Sidekiq Web mounts in Rails.

    from skiplock.webapp import mount

    def who_may_see_jobs(request):            # runs in the HOST's request context
        if not current_user.is_authenticated:
            return None                        # refused (403)
        return "admin" if current_user.is_staff else "readonly"

    mount(app, "/admin/jobs", authorize=who_may_see_jobs)

The console stays its own Flask app (its blueprints, CSRF, CSP, error pages and audit log work as
when standalone) and is served under the prefix by werkzeug's DispatcherMiddleware, so url_for,
static files and htmx polling all carry the prefix. Login is the host's: `authorize` gets the
request inside the host's request context, so `flask.session`, Flask-Login's `current_user` and the
like answer for the host, and it returns the role ("admin", "readonly"), or (role, user name) for
the audit log, or None to refuse.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from flask import Flask, Request
from psycopg_pool import ConnectionPool
from werkzeug.middleware.dispatcher import DispatcherMiddleware

from skiplock.core.errors import ConfigError

# What an authorize hook may answer: a role, (role, user name), or None to refuse.
AuthorizeHook = Callable[[Request], "str | tuple[str, str] | None"]


def mount(host: Flask, url_prefix: str = "/admin/jobs", *, authorize: AuthorizeHook,
          database_url: str | None = None, pool: ConnectionPool | None = None,
          config: Mapping[str, Any] | None = None) -> Flask:
    """Serve the console under `url_prefix` of `host`; returns the console's own app.

    The database is `pool` (the host's psycopg_pool.ConnectionPool), else `database_url`, else the
    host's SKIPLOCK_DATABASE_URL config, else DATABASE_URL from the environment.
    """
    from skiplock.webapp import create_app

    if not url_prefix.startswith("/") or url_prefix.endswith("/") or len(url_prefix) < 2:
        raise ConfigError(f"mount: url_prefix must look like '/admin/jobs', got {url_prefix!r}")
    if not callable(authorize):
        raise ConfigError("mount: authorize= must be a callable that takes the request and returns "
                          "'admin', 'readonly' or None")
    settings: dict[str, Any] = {
        "AUTH": True,
        "AUTH_HOOK": authorize,
        "HOST_APP": host,
        # The console keeps its own small session (CSRF token, refresh choice) in its own cookie,
        # scoped to the prefix, so it never overwrites the host's session cookie.
        "SESSION_COOKIE_NAME": "skiplock_console",
        "SESSION_COOKIE_PATH": url_prefix,
        "SECRET_KEY": host.secret_key or None,
    }
    if pool is not None:
        settings["HOST_POOL"] = pool
        settings["DATABASE_URL"] = database_url or pool.conninfo
    elif database_url or host.config.get("SKIPLOCK_DATABASE_URL"):
        settings["DATABASE_URL"] = database_url or host.config["SKIPLOCK_DATABASE_URL"]
    settings.update(config or {})
    console = create_app(settings)
    host.wsgi_app = DispatcherMiddleware(host.wsgi_app, {url_prefix: console})  # type: ignore[method-assign]
    host.extensions["skiplock_console"] = console
    return console
