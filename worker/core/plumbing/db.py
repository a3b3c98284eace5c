"""Connections: how every skiplock process reaches PostgreSQL."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import psycopg.conninfo
import psycopg.errors
from psycopg_pool import ConnectionPool
from psycopg_pool.base import AttemptWithBackoff

from skiplock.core.errors import ConfigError
from skiplock.core.plumbing.config import _number, validate_database_url
from skiplock.core.plumbing.deadline import DEFAULT_DEADLINE, WATCHDOG, db_deadline

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
    kwargs: dict[str, Any] = {"application_name": application_name, "connect_timeout": "5", **_KEEPALIVE}
    if not prepared_statements():
        # psycopg prepares a statement on a connection after its 5th run; behind a PgBouncer in
        # transaction mode (before 1.21's max_prepared_statements) the next transaction may land on
        # another server connection where that prepared statement does not exist
        kwargs["prepare_threshold"] = None
    return kwargs


def prepared_statements() -> bool:
    """SKIPLOCK_PREPARED_STATEMENTS (default on)."""
    from skiplock.core.plumbing.config import _bool

    return _bool("SKIPLOCK_PREPARED_STATEMENTS", os.environ.get("SKIPLOCK_PREPARED_STATEMENTS", "on"))


def session_settings() -> bool:
    """Whether pooled connections may carry session settings (SET jit, the claim's and the row
    writers' planner settings): only when they are real sessions.

    Behind a transaction-pooling PgBouncer a SET stays on the server connection and reaches other
    clients' transactions, prepared statements or not (PgBouncer >= 1.21 with max_prepared_statements
    keeps them on). A pooler is recognised by its two signs in the configuration: prepared statements
    off, or SKIPLOCK_DIRECT_URL set apart from DATABASE_URL (README "Scaling past one machine").
    """
    direct = os.environ.get("SKIPLOCK_DIRECT_URL", "").strip()
    pooled = bool(direct) and direct != os.environ.get("DATABASE_URL", "").strip()
    return prepared_statements() and not pooled


def connect(url: str, application_name: str, *, autocommit: bool = True) -> psycopg.Connection:
    """Open one connection (the listener's, the migrator's, a test's)."""
    validate_database_url(url)
    options = connect_kwargs(application_name)
    # prepare_threshold is psycopg's, not a libpq option: it cannot go into the conninfo string
    psycopg_only = {k: options.pop(k) for k in ("prepare_threshold",) if k in options}
    conninfo = psycopg.conninfo.make_conninfo(url, **options)
    return psycopg.connect(conninfo, autocommit=autocommit, **psycopg_only)


# The longest a pool waits between two attempts to reach a server that went away. psycopg_pool doubles its
# wait after every failed attempt (1, 2, 4, 8, 16 s ...), so after a 30 s outage its next attempt came up to
# 16 s after the server was back, and the workers claimed nothing meanwhile. An attempt against a server
# that is down costs one refused connection: trying twice a second is cheap, and a worker claims again
# within about half a second of the server accepting connections.
RECONNECT_MAX_DELAY = 0.5


class CappedAttempt(AttemptWithBackoff):
    """psycopg_pool's reconnection schedule, its growing wait capped at RECONNECT_MAX_DELAY."""

    INITIAL_DELAY = 0.1

    def update_delay(self, now: float) -> None:
        super().update_delay(now)
        self.delay = min(self.delay, RECONNECT_MAX_DELAY)


class DeadlinePool(ConnectionPool):
    """A ConnectionPool whose every borrow runs under the client-side deadline (skiplock.core.plumbing.deadline),
    and which tries to reach a lost server again at least every RECONNECT_MAX_DELAY seconds."""

    deadline: float = DEFAULT_DEADLINE

    def _add_connection(self, attempt: AttemptWithBackoff | None, growing: bool = False) -> None:
        # psycopg_pool starts each reconnection with its own AttemptWithBackoff and passes that object on to
        # every retry: starting it with a CappedAttempt caps the whole schedule
        super()._add_connection(attempt or CappedAttempt(timeout=self.reconnect_timeout), growing)

    @contextmanager
    def connection(self, timeout: float | None = None) -> Iterator[psycopg.Connection]:
        with super().connection(timeout) as conn, WATCHDOG.guard(conn, self.deadline):
            yield conn


def session_defaults(conn: psycopg.Connection) -> None:
    """The session settings of every pooled skiplock connection (make_pool runs it on each new one).

    JIT off. The claim's cost estimate grows with the ready rows (its LIMIT is a column of the
    `wanted` CTE, so the planner assumes a tenth of the backlog will be read): with a big backlog it
    crosses jit_above_cost, and PostgreSQL then compiled a hundred-odd functions for every claim,
    seconds for a claim that executes in milliseconds (EXPLAIN ANALYZE, tests/benchmarks/growth.py).
    Queue statements are short: compiling never pays off for them.
    """
    conn.execute("SET jit = off")


def _after_session_defaults(
        configure: Callable[[psycopg.Connection], None] | None) -> Callable[[psycopg.Connection], None]:
    """A pool's configure callback: session_defaults, then the caller's own settings."""
    def session(conn: psycopg.Connection) -> None:
        session_defaults(conn)
        if configure is not None:
            configure(conn)
    return session


def make_pool(url: str, application_name: str, *, size: int, open_wait: bool = False,
              configure: Callable[[psycopg.Connection], None] | None = None) -> ConnectionPool:
    """A psycopg pool of autocommit connections; broken ones are replaced on return.

    Autocommit: every queue statement is one short implicit transaction, so no connection ever
    sits "idle in transaction" holding back vacuum (seed 000's first foot-gun). Every borrow has a
    client-side deadline, so a connection that goes silent cannot hang the borrowing thread.
    `configure` (session settings) runs on each new connection after session_defaults, and neither
    runs behind a pooler (session_settings()).
    """
    validate_database_url(url)
    # Behind PgBouncer in transaction mode a session setting would leak to other clients'
    # transactions: there, turn JIT off for the worker's role instead (README).
    session = _after_session_defaults(configure) if session_settings() else None
    pool = DeadlinePool(
        url,
        min_size=1,
        max_size=max(size, 1),
        kwargs={"autocommit": True, **connect_kwargs(application_name)},
        name=application_name,
        open=False,
        timeout=10.0,
        reconnect_timeout=_reconnect_timeout(),
        configure=session,  # run once on each new connection
    )
    pool.deadline = db_deadline()
    pool.open(wait=open_wait, timeout=10.0)
    return pool


# A server that is down, starting, full or unreachable may come back: the worker waits for it.
# Anything else at first contact (bad port or sslmode, unknown database, bad password) is config.
_TRANSIENT_SQLSTATES = {"57P01", "57P02", "57P03", "53300", "08006", "08001"}
_TRANSIENT_TEXT = ("connection refused", "timeout expired", "no route to host", "network is unreachable",
                   "temporary failure in name resolution", "the database system is", "server closed the connection")


def check_database(url: str) -> None:
    """Connect once at start-up; a DATABASE_URL that parses but can never work becomes one
    ConfigError line, while a server that is merely not up yet is left to the claim loop's retries.

    libpq only validates option values (port, sslmode) and the server only checks the database
    name and password when connecting; without this check a worker with such a URL would log
    connection warnings forever instead of saying what is wrong.
    """
    try:
        with connect(url, "skiplock-startup-check") as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        detail = " ".join(str(exc).split()) or type(exc).__name__
        if exc.sqlstate in _TRANSIENT_SQLSTATES or (
                exc.sqlstate is None and any(t in detail.lower() for t in _TRANSIENT_TEXT)):
            log.warning("database not reachable yet (%s); the worker will keep retrying", detail)
            return
        raise ConfigError(f"cannot use DATABASE_URL: {detail}") from None


def _reconnect_timeout() -> float:
    """SKIPLOCK_RECONNECT_TIMEOUT: seconds a pool keeps trying to reconnect (validated like every setting)."""
    # a bare float() here turned a typo into a traceback instead of one clear line
    return _number("SKIPLOCK_RECONNECT_TIMEOUT", os.environ.get("SKIPLOCK_RECONNECT_TIMEOUT", "3600"),
                   float, 0, "seconds >= 0")


def is_connection_error(exc: BaseException) -> bool:
    """True when `exc` means "the database went away", which callers survive by retrying."""
    from psycopg_pool import PoolTimeout

    # AdminShutdown / CannotConnectNow are OperationalErrors too; listed for the reader. A read-only
    # server (a standby not yet promoted, default_transaction_read_only) is waited out the same way:
    # after a failover the writable primary comes back, and crashing would only make a restart loop.
    return isinstance(exc, psycopg.OperationalError | PoolTimeout | psycopg.errors.ReadOnlySqlTransaction)


def describe_db_error(exc: BaseException) -> str:
    """One line for the log: the driver's first line, plus what a read-only server means."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, psycopg.errors.ReadOnlySqlTransaction):
        return (f"{text}: the server is read-only (a standby, or default_transaction_read_only); waiting for "
                "a writable primary (use target_session_attrs=read-write in a multi-host DATABASE_URL)")
    return text
