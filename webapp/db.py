"""The console's database access: one psycopg-pool ConnectionPool per app (per gunicorn worker)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from flask import Flask, current_app, g, has_request_context, request
from psycopg_pool import ConnectionPool

from skiplock.core.plumbing.config import validate_database_url
from skiplock.core.plumbing.db import connect_kwargs
from skiplock.core.plumbing.deadline import WATCHDOG, db_deadline

EXTENSION = "skiplock_pool"
READ_EXTENSION = "skiplock_read_pool"  # SKIPLOCK_CONSOLE_READ_URL's pool, when one is configured
# How far behind the primary the standby has replayed (NULL on a server that is not a standby).
REPLICA_LAG = "SELECT pg_is_in_recovery(), extract(epoch FROM now() - pg_last_xact_replay_timestamp())::float8"
HOST_OWNED = "skiplock_pool_is_the_hosts"

# Session settings for the console's connections. JIT off: the console's statements are short, and
# a big table's row estimates would otherwise make Postgres spend longer compiling a query than running it.
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
    app.extensions[EXTENSION] = _pool(app, url, "skiplock-web")
    if app.config.get("READ_URL"):
        # GET pages read from the standby; every action, audit row and login counter uses the primary
        app.extensions[READ_EXTENSION] = _pool(app, validate_database_url(app.config["READ_URL"]), "skiplock-web-read")
    app.config.setdefault("DB_DEADLINE", db_deadline())


def _pool(app: Flask, url: str, name: str) -> ConnectionPool:
    pool = ConnectionPool(
        url,
        min_size=1,
        max_size=max(int(app.config.get("POOL_SIZE", 4)), 1),
        # autocommit: every statement is its own short transaction, never "idle in transaction"
        kwargs={"autocommit": True, **connect_kwargs(name), "options": SESSION_OPTIONS},
        name=name,
        # one cheap round trip per request buys no error page after a database restart: a
        # connection the server dropped is replaced before a view ever sees it
        check=_check_connection,
        open=False,
        timeout=10.0,
    )
    # no waiting: a console started before its database still starts, and says so on /healthz
    pool.open(wait=False)
    return pool


def _check_connection(conn: psycopg.Connection) -> None:
    """The pool's check on borrow, under the deadline: a silent connection must not hang it."""
    with WATCHDOG.guard(conn, db_deadline()):
        ConnectionPool.check_connection(conn)


def get_pool(app: Flask | None = None) -> ConnectionPool:
    """The pool of `app` (default: the current app)."""
    return (app or current_app).extensions[EXTENSION]


def _read_pool(primary: bool) -> ConnectionPool | None:
    """The standby's pool for this borrow: only for a GET or HEAD request that did not ask for the primary."""
    if primary or not has_request_context() or request.method not in ("GET", "HEAD"):
        return None
    pool: ConnectionPool | None = current_app.extensions.get(READ_EXTENSION)
    return pool


@contextmanager
def connection(primary: bool = False) -> Iterator[psycopg.Connection]:
    """Borrow an autocommit connection for one request's statements: from the standby
    (SKIPLOCK_CONSOLE_READ_URL) for a read-only page, else from the primary. `primary=True` for
    anything that writes, or that must see the latest writes (login counters, Health)."""
    deadline = float(current_app.config.get("DB_DEADLINE", 0) or 0)
    read = _read_pool(primary)
    with (read or get_pool()).connection(timeout=float(current_app.config.get("POOL_TIMEOUT", 5.0))) as conn, \
            WATCHDOG.guard(conn, deadline):
        if read is not None and "replica_lag" not in g:
            # said once per page: how old what it shows may be (templates/layout.html)
            standby, lag = conn.execute(REPLICA_LAG).fetchone() or (False, None)
            g.replica_lag = {"standby": bool(standby), "seconds": lag}
        # Never prepared, for this borrow: psycopg prepares a statement run 5 times, and PostgreSQL may
        # then plan it once for any values. Such a generic plan cannot use a partial index whose predicate
        # names a state ("status = $1" proves nothing): a search for a queue with no failed jobs walked
        # every job of the table (docs/benchmarks/console-search.md). The console's statements are
        # not on a hot path; planning each costs far less than one such plan.
        threshold, autocommit = conn.prepare_threshold, conn.autocommit
        conn.prepare_threshold = None
        # a host's pool may hand out transactional connections: the console's statements are each
        # their own short transaction, so switch to autocommit for this borrow
        if not autocommit:
            conn.autocommit = True
        try:
            yield conn
        finally:  # the host's connection goes back as it came
            conn.prepare_threshold = threshold
            if not autocommit:
                conn.autocommit = False


def close_app(app: Flask) -> None:
    """Close the app's pool (tests, and processes that build throwaway apps); over several databases
    (SKIPLOCK_DATABASES, or the mount's databases=), every database's console's pool too."""
    for console in app.extensions.pop("skiplock_consoles", {}).values():  # skiplock.webapp.pages.databases.CONSOLES
        close_app(console)
    read = app.extensions.pop(READ_EXTENSION, None)
    if read is not None:
        read.close()
    pool = app.extensions.pop(EXTENSION, None)
    if pool is not None and not app.extensions.pop(HOST_OWNED, False):
        pool.close()
