"""A host application, as a user of skiplock writes one: its own login, the console mounted inside.

Used by tests/console/test_mount.py (Flask test client) and the browser test of mounting.
"""

from __future__ import annotations

from flask import Flask, Request, redirect, request, session
from flask.typing import ResponseReturnValue

from skiplock.webapp import mount

PREFIX = "/admin/jobs"
# The host's own users: name -> is_staff. Staff may change jobs, others may only look.
USERS = {"alice": True, "bob": False}


def who_may_see_jobs(req: Request) -> tuple[str, str] | None:
    """The host's rule, run in the host's request context (so `session` is the host's)."""
    user = session.get("user")
    if user not in USERS:
        return None
    return ("admin" if USERS[user] else "readonly"), user


def build_host(database_url: str | None = None, *, databases: str | dict[str, str] | None = None) -> Flask:
    """A small Flask app with a session login at /login?user=..., and the console under PREFIX
    (over one database, or over several with `databases`)."""
    app = Flask("host_app")
    app.secret_key = "host-secret"

    @app.route("/")
    def home() -> str:
        return f"host home, user={session.get('user')}"

    @app.route("/login", methods=["GET", "POST"])
    def login() -> ResponseReturnValue:
        session["user"] = request.values.get("user", "")
        return redirect(PREFIX + "/", 303)

    mount(app, PREFIX, authorize=who_may_see_jobs, database_url=database_url, databases=databases)
    return app


def from_env() -> Flask:
    """For gunicorn: `gunicorn 'tests.support.host_app:from_env()'` with DATABASE_URL set."""
    import os

    return build_host(os.environ["DATABASE_URL"])
