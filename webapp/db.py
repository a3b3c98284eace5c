"""The console's database access: one psycopg-pool ConnectionPool per app (per gunicorn worker)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from flask import Flask, current_app
from psycopg_pool import ConnectionPool

from worker.db import make_pool

EXTENSION = "skiplock_pool"


def init_app(app: Flask) -> None:
    """Create the app's pool (connections open in the background; /healthz reports failures)."""
    # open_wait=False: a console started before its database still starts, and says so on /healthz
    app.extensions[EXTENSION] = make_pool(app.config["DATABASE_URL"], "skiplock-web",
                                          size=int(app.config.get("POOL_SIZE", 4)), open_wait=False)


def get_pool(app: Flask | None = None) -> ConnectionPool:
    """The pool of `app` (default: the current app)."""
    return (app or current_app).extensions[EXTENSION]


@contextmanager
def connection() -> Iterator[psycopg.Connection]:
    """Borrow an autocommit connection from the pool for one request's statements."""
    with get_pool().connection(timeout=float(current_app.config.get("POOL_TIMEOUT", 5.0))) as conn:
        yield conn


def close_app(app: Flask) -> None:
    """Close the app's pool (tests, and processes that build throwaway apps)."""
    pool = app.extensions.pop(EXTENSION, None)
    if pool is not None:
        pool.close()
