"""The process-wide producer pool: `enqueue` without `conn=` borrows an autocommit connection from it.

Built from DATABASE_URL on first use and closed at exit (or by `close_default_pool`, which tests and
short scripts call). skiplock.core.producer re-exports both functions.
"""

from __future__ import annotations

import atexit
import threading

from psycopg_pool import ConnectionPool

from skiplock.core.plumbing.config import load_settings
from skiplock.core.plumbing.db import check_database, make_pool

_default_pool: ConnectionPool | None = None
_default_pool_lock = threading.Lock()


def default_pool() -> ConnectionPool:
    """The process-wide producer pool, built from DATABASE_URL on first use."""
    global _default_pool
    with _default_pool_lock:
        if _default_pool is None:
            settings = load_settings()
            url = settings.require_database_url()
            # one connection first: a URL that can never work (no such database, a wrong password) is one
            # ConfigError with the server's reason now, not a PoolTimeout without a cause 10 s later; a
            # server not up yet is left to the pool's retries, as before
            check_database(url)
            _default_pool = make_pool(url, "skiplock-producer", size=settings.pool_size)
            atexit.register(close_default_pool)
        return _default_pool


def close_default_pool() -> None:
    """Close the producer pool (tests and short scripts call this; atexit does it otherwise)."""
    global _default_pool
    with _default_pool_lock:
        if _default_pool is not None:
            _default_pool.close()
            _default_pool = None
