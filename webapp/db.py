"""The console's database access: one psycopg-pool ConnectionPool per app (per gunicorn worker)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from flask import Flask, current_app
from psycopg_pool import ConnectionPool

from skiplock.core.config import validate_database_url
from skiplock.core.db import connect_kwargs
from skiplock.core.deadline import WATCHDOG, db_deadline

EXTENSION = "skiplock_pool"
HOST_OWNED = "skiplock_pool_is_the_hosts"

# Session settings for the console's connections. JIT off: the console's statements are short, and
# a big table's row estimates would otherwise make Postgres spend a second compiling a 100 ms query.
# A statement timeout: no page may keep the database busy for long, whatever filter it was given.
SESSION_OPTIONS = "-c jit=off -c statement_timeout=15000"


def init_app(app: Flask) -> None:
    """Create the app's pool (connections open in the background; /healthz reports failures).

    Mounted in a host app that passed its own pool (HOST_POOL), borrow from that one instead."""
    if app.config.get("HOST_POOL") is not None:
        app.extensions[EXTENSION] = app.config["HOST_POOL"]
        app.extensions[HOST_OWNED] = True
        return
    url = validate_database_url(app.config["DATABASE_URL"])
    pool = ConnectionPool(
        url,
        min_size=1,
        max_size=max(int(app.config.get("POOL_SIZE", 4)), 1),
        # autocommit: every statement is its own short transaction, never "idle in transaction"
        kwargs={"autocommit": True, **connect_kwargs("skiplock-web"), "options": SESSION_OPTIONS},
        name="skiplock-web",
        # one cheap round trip per request buys no error page after a database restart: a
        # connection the server dropped is replaced before a view ever sees it
        check=_check_connection,
        open=False,
        timeout=10.0,
    )
    # no waiting: a console started before its database still starts, and says so on /healthz
    pool.open(wait=False)
    app.extensions[EXTENSION] = pool
    app.config.setdefault("DB_DEADLINE", db_deadline())


def _check_connection(conn: psycopg.Connection) -> None:
    """The pool's check on borrow, under the deadline: a silent connection must not hang it."""
    with WATCHDOG.guard(conn, db_deadline()):
        ConnectionPool.check_connection(conn)


def get_pool(app: Flask | None = None) -> ConnectionPool:
    """The pool of `app` (default: the current app)."""
    return (app or current_app).extensions[EXTENSION]


@contextmanager
def connection() -> Iterator[psycopg.Connection]:
    """Borrow an autocommit connection from the pool for one request's statements."""
    deadline = float(current_app.config.get("DB_DEADLINE", 0) or 0)
    with get_pool().connection(timeout=float(current_app.config.get("POOL_TIMEOUT", 5.0))) as conn, \
            WATCHDOG.guard(conn, deadline):
        if conn.autocommit:
            yield conn
            return
        # a host's pool may hand out transactional connections: the console's statements are each
        # their own short transaction, so switch to autocommit for this borrow and switch back
        conn.autocommit = True
        try:
            yield conn
        finally:
            conn.autocommit = False


def close_app(app: Flask) -> None:
    """Close the app's pool (tests, and processes that build throwaway apps)."""
    pool = app.extensions.pop(EXTENSION, None)
    if pool is not None and not app.extensions.pop(HOST_OWNED, False):
        pool.close()
