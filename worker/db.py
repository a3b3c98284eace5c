"""Connections: how every skiplock process reaches PostgreSQL."""

from __future__ import annotations

import logging
import os

import psycopg
import psycopg.conninfo
from psycopg_pool import ConnectionPool

from worker.config import validate_database_url

log = logging.getLogger("skiplock.db")

# TCP keepalives make a silently vanished server (cable pulled, failover) show up as an error
# within ~30 s instead of a connection that waits forever.
_KEEPALIVE = {
    "keepalives": "1",
    "keepalives_idle": "10",
    "keepalives_interval": "5",
    "keepalives_count": "3",
}


def connect_kwargs(application_name: str) -> dict[str, str]:
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
        reconnect_timeout=float(os.environ.get("SKIPLOCK_RECONNECT_TIMEOUT", "3600")),
    )
    pool.open(wait=open_wait, timeout=10.0)
    return pool


def is_connection_error(exc: BaseException) -> bool:
    """True when `exc` means "the database went away", which callers survive by retrying."""
    from psycopg_pool import PoolTimeout

    # AdminShutdown / CannotConnectNow are OperationalErrors too; listed for the reader
    return isinstance(exc, psycopg.OperationalError | PoolTimeout)
