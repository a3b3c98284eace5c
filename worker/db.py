"""Connections: how every skiplock process reaches PostgreSQL."""

from __future__ import annotations

import logging
import os
from typing import Any

import psycopg
import psycopg.conninfo
from psycopg_pool import ConnectionPool

from worker.config import _number, validate_database_url
from worker.errors import ConfigError

log = logging.getLogger("skiplock.db")

# TCP keepalives make a silently vanished server (cable pulled, failover) show up as an error
# within ~30 s instead of a connection that waits forever.
_KEEPALIVE = {
    "keepalives": "1",
    "keepalives_idle": "10",
    "keepalives_interval": "5",
    "keepalives_count": "3",
}


def connect_kwargs(application_name: str) -> dict[str, Any]:
    """Connection options every skiplock connection uses; the name shows in pg_stat_activity."""
    return {"application_name": application_name, "connect_timeout": "5", **_KEEPALIVE}


def connect(url: str, application_name: str, *, autocommit: bool = True) -> psycopg.Connection:
    """Open one connection (the listener's, the migrator's, a test's)."""
    validate_database_url(url)
    conninfo = psycopg.conninfo.make_conninfo(url, **connect_kwargs(application_name))
    return psycopg.connect(conninfo, autocommit=autocommit)


def make_pool(url: str, application_name: str, *, size: int, open_wait: bool = False) -> ConnectionPool:
    """A psycopg pool of autocommit connections; broken ones are replaced on return.

    Autocommit: every queue statement is one short implicit transaction, so no connection ever
    sits "idle in transaction" holding back vacuum (seed 000's first foot-gun).
    """
    validate_database_url(url)
    pool = ConnectionPool(
        url,
        min_size=1,
        max_size=max(size, 1),
        kwargs={"autocommit": True, **connect_kwargs(application_name)},
        name=application_name,
        open=False,
        timeout=10.0,
        reconnect_timeout=_reconnect_timeout(),
    )
    pool.open(wait=open_wait, timeout=10.0)
    return pool


def check_database(url: str, *, require_schema: bool = True) -> None:
    """Connect once at start-up; a garbled or unreachable DATABASE_URL, or a database without the
    skiplock schema, becomes one ConfigError line.

    libpq only validates option values (port, sslmode, host) when connecting, so a URL that parses
    can still be unusable; without this check the worker would log connection warnings forever, or
    crash with a traceback on the first query. Outages after start-up are survived (pool reconnects).
    """
    try:
        with connect(url, "skiplock-startup-check") as conn:
            has_jobs = conn.execute("SELECT to_regclass('jobs') IS NOT NULL").fetchone()
    except psycopg.Error as exc:
        detail = " ".join(str(exc).split()) or type(exc).__name__
        raise ConfigError(f"cannot connect with DATABASE_URL: {detail}") from None
    if require_schema and not (has_jobs and has_jobs[0]):
        raise ConfigError("the database in DATABASE_URL has no skiplock schema (no jobs table): "
                          "run `skiplock migrate` or start the worker with --migrate")


def _reconnect_timeout() -> float:
    """SKIPLOCK_RECONNECT_TIMEOUT: seconds a pool keeps trying to reconnect (validated like every setting)."""
    # a bare float() here turned a typo into a traceback instead of one clear line
    return _number("SKIPLOCK_RECONNECT_TIMEOUT", os.environ.get("SKIPLOCK_RECONNECT_TIMEOUT", "3600"),
                   float, 0, "seconds >= 0")


def is_connection_error(exc: BaseException) -> bool:
    """True when `exc` means "the database went away", which callers survive by retrying."""
    from psycopg_pool import PoolTimeout

    # AdminShutdown / CannotConnectNow are OperationalErrors too; listed for the reader
    return isinstance(exc, psycopg.OperationalError | PoolTimeout)
