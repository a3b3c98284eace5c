"""The console for a host app that is not Flask: the host's glue decides who may look, per request.

Flask hosts use `skiplock.webapp.mount`, whose authorize hook runs in the host's request context.
Django, Starlette and FastAPI cannot lend the console a request context, so their glue (django.py,
asgi.py) runs the host's authorize rule on the host's own request and puts the answer in the WSGI
environ under IDENTITY_KEY before calling the console. A client cannot forge it: headers only reach
the environ as HTTP_* keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flask import Flask, Request
from psycopg_pool import ConnectionPool

# The environ key the glue writes the host's answer to: a role, (role, user name), or None.
IDENTITY_KEY = "skiplock.identity"


def identity_from_environ(request: Request) -> Any:
    """The console's authorize hook for hosted use: what the host's glue decided for this request."""
    if IDENTITY_KEY in request.environ:  # Django's glue writes the environ itself
        return request.environ[IDENTITY_KEY]
    # a2wsgi builds the environ from the ASGI scope and keeps that scope, where asgi.py put the answer
    return (request.environ.get("asgi.scope") or {}).get(IDENTITY_KEY)


def hosted_console(*, database_url: str | None = None, pool: ConnectionPool | None = None,
                   secret_key: str | None = None, config: Mapping[str, Any] | None = None) -> Flask:
    """The console app, trusting IDENTITY_KEY for login, role and the audit log's user name.

    CSRF, the CSP, the read-only role and the audit trail work as in the standalone console: only
    the question "who is this" is answered by the host.
    """
    from skiplock.webapp import create_app

    settings: dict[str, Any] = {
        "AUTH": True,
        "AUTH_HOOK": identity_from_environ,
        # its own small session (CSRF token, refresh choice) in a cookie of its own name, so it never
        # overwrites the host's session cookie; the path is the mount prefix (web._SecureWhenHttps)
        "SESSION_COOKIE_NAME": "skiplock_console",
    }
    if secret_key:
        settings["SECRET_KEY"] = secret_key
    if pool is not None:
        settings["HOST_POOL"] = pool
        settings["DATABASE_URL"] = database_url or pool.conninfo
    elif database_url:
        settings["DATABASE_URL"] = database_url
    settings.update(config or {})
    return create_app(settings)


def answer_is_valid(answer: Any) -> bool:
    """True for what an authorize rule may return: a role string, (role, user), or None."""
    if answer is None or isinstance(answer, str):
        return True
    return isinstance(answer, tuple) and len(answer) == 2 and isinstance(answer[0], str)
