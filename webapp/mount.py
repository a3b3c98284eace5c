"""Mount the console inside the user's own Flask app, as Sidekiq Web mounts in Rails.

    import os

    from flask_login import current_user
    from skiplock.webapp import mount

    ADMINS = {"alice@example.com"}             # your rule: a role column, a group, a list...

    def who_may_see_jobs(request):             # runs in the HOST's request context
        if not current_user.is_authenticated:
            return None                        # refused (403)
        role = "admin" if current_user.email in ADMINS else "readonly"
        return role, current_user.email       # the name goes into the console's audit log

    mount(app, "/admin/jobs", authorize=who_may_see_jobs, metrics_token=os.environ["METRICS_TOKEN"])

(Flask-Login's users have no `is_staff`: that is Django's. Decide the role from your own user model.)

The console stays its own Flask app (its blueprints, CSRF, CSP, error pages and audit log work as
when standalone) and is served under the prefix by werkzeug's DispatcherMiddleware, so url_for,
static files and htmx polling all carry the prefix. Login is the host's: `authorize` gets the
request inside the host's request context, so `flask.session`, Flask-Login's `current_user` and the
like answer for the host, and it returns the role ("admin", "readonly"), or (role, user name) for
the audit log, or None to refuse.

/metrics is behind `authorize` too, which a Prometheus scraper (no login in the host) cannot pass:
`metrics_token=` lets a request with `Authorization: Bearer <token>` read it, `metrics_public=True`
serves it to anyone (as the standalone console does without SKIPLOCK_METRICS_TOKEN).

`databases=` (the syntax of SKIPLOCK_DATABASES, or a {name: url} mapping) mounts one console per
database instead, as the standalone console over several databases does (skiplock.webapp.pages.databases).
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
          databases: str | Mapping[str, str] | None = None,
          config: Mapping[str, Any] | None = None, metrics_token: str | None = None,
          metrics_public: bool = False) -> Flask:
    """Serve the console under `url_prefix` of `host`; returns the console's own app.

    The database is `pool` (the host's psycopg_pool.ConnectionPool), else `database_url`, else the
    host's SKIPLOCK_DATABASE_URL config, else DATABASE_URL from the environment.
    `databases`: several databases instead, as SKIPLOCK_DATABASES gives them ("orders=postgresql://...,
    billing=..." or a {name: url} mapping): a console per database under `url_prefix`/db/<name>/, a row
    per database at `url_prefix`/databases/, the first database's console at `url_prefix`/.
    `metrics_token`: /metrics also answers a scraper sending `Authorization: Bearer <token>`;
    `metrics_public`: /metrics answers anyone. Without either it is asked of `authorize`.
    """
    from skiplock.webapp.app import create_app

    if not url_prefix.startswith("/") or url_prefix.endswith("/") or len(url_prefix) < 2:
        raise ConfigError(f"mount: url_prefix must look like '/admin/jobs', got {url_prefix!r}")
    if not callable(authorize):
        raise ConfigError("mount: authorize= must be a callable that takes the request and returns "
                          "'admin', 'readonly' or None")
    if metrics_token is not None and (not isinstance(metrics_token, str) or len(metrics_token) < 16):
        raise ConfigError("mount: metrics_token must be a secret string of at least 16 characters")
    if metrics_token and metrics_public:
        raise ConfigError("mount: give metrics_token= (scrapers send it) or metrics_public=True, not both")
    settings: dict[str, Any] = {
        "MOUNT_METRICS_TOKEN": metrics_token,
        "MOUNT_METRICS_PUBLIC": bool(metrics_public),
        "AUTH": True,
        "AUTH_HOOK": authorize,
        "HOST_APP": host,
        # The console keeps its own small session (CSRF token, refresh choice) in its own cookie,
        # scoped to the prefix, so it never overwrites the host's session cookie.
        "SESSION_COOKIE_NAME": "skiplock_console",
        "SESSION_COOKIE_PATH": url_prefix,
        "SECRET_KEY": host.secret_key or None,
    }
    if databases is not None:
        if pool is not None or database_url:
            raise ConfigError("mount: give databases= (several databases) or database_url=/pool= (one), not both")
        named = mounted_databases(databases)
        console = _several(named, url_prefix, {**settings, **(config or {})})
    else:
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


def mounted_databases(databases: str | Mapping[str, str]) -> dict[str, str]:
    """`databases=` read and checked as SKIPLOCK_DATABASES is: a "name=url,..." string or a mapping."""
    from skiplock.core.plumbing.databases import check_databases, parse_databases

    if isinstance(databases, str):
        return parse_databases(databases, source="mount: databases=")
    if isinstance(databases, Mapping):
        return check_databases(databases.items(), source="mount: databases=")
    raise ConfigError("mount: databases= must be 'name=url,name=url' or a {name: url} mapping, "
                      f"got {type(databases).__name__}")


def _several(databases: dict[str, str], url_prefix: str, settings: dict[str, Any]) -> Flask:
    """The consoles of several databases, as `skiplock web` with SKIPLOCK_DATABASES serves them
    (skiplock.webapp.pages.databases), under one prefix: the first database's console at the prefix, with
    the /databases/ overview, and each database's own console (pool, deadline) under /db/<name>."""
    from skiplock.webapp.app import create_app
    from skiplock.webapp.pages import databases as several

    names = list(databases)
    shared = {**settings, "DATABASES": names}
    front = create_app({**shared, "DATABASE_URL": databases[names[0]], "DATABASE_NAME": names[0]})
    front.register_blueprint(several.bp)
    front.context_processor(several.context)
    consoles: dict[str, Flask] = {}
    for name, url in databases.items():
        path = f"/db/{name}"
        # Its own cookie name: the front console's cookie (path `url_prefix`) is sent under /db/ too,
        # and two cookies of one name would leave which CSRF token a form is checked against to chance.
        console = create_app({**shared, "DATABASE_URL": url, "DATABASE_NAME": name,
                              "SESSION_COOKIE_NAME": "skiplock_console_db",
                              "SESSION_COOKIE_PATH": url_prefix + path})
        console.context_processor(several.context)
        consoles[name] = console
    front.wsgi_app = DispatcherMiddleware(  # type: ignore[method-assign]
        front.wsgi_app, {f"/db/{name}": console for name, console in consoles.items()})
    front.extensions[several.CONSOLES] = consoles
    return front
