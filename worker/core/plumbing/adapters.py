"""Run skiplock's statements inside whatever transaction the caller holds.

A producer (enqueue with `conn=`) or a handler (`job.complete(conn)`) passes the connection its
business write went through. Each kind is reduced here to the DB-API connection under it, in the
caller's current transaction, so every driver runs the very same SQL text from skiplock.core.sql:
- psycopg 3 and psycopg2 take `%(name)s` parameters as written;
- an SQLAlchemy Session/Connection gives its driver connection (psycopg 3 or psycopg2), after
  SQLAlchemy has begun its transaction, so the caller's commit or rollback covers our statement;
- Django's connection gives its psycopg 3 / psycopg2 connection (inside `atomic()` it is in
  Django's transaction; outside, it autocommits like Django's own queries);
- Flask-SQLAlchemy's `db.session` and other `scoped_session`s (and `async_scoped_session`) are
  registries of sessions: calling one gives this thread's (or task's) Session, which is used as above;
- asyncpg (bare, from a pool, or under an SQLAlchemy AsyncSession) takes `$1` parameters: the
  statement is rewritten once per text, with the same values in positional order.

SQLAlchemy, Django and psycopg2 are optional: their classes are looked up in sys.modules only, so
skiplock never imports them. An object of a library that was never imported cannot be one of its
objects, so an absent library is simply "not this kind".
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

import psycopg
from psycopg.rows import tuple_row

ACCEPTED_SYNC = ("a psycopg 3 Connection, a psycopg2 connection, an SQLAlchemy Connection, Session or "
                 "scoped_session such as Flask-SQLAlchemy's db.session (psycopg or psycopg2 driver), or a "
                 "Django PostgreSQL connection (django.db.connection or connections[alias])")
ACCEPTED_ASYNC = ("a psycopg AsyncConnection, an asyncpg Connection (or a pool's connection), or an SQLAlchemy "
                  "AsyncConnection, AsyncSession or async_scoped_session (asyncpg or psycopg driver)")


def _instance_of(obj: object, module: str, name: str) -> bool:
    """isinstance(obj, module.name) without importing `module`."""
    mod = sys.modules.get(module)
    cls = getattr(mod, name, None) if mod is not None else None
    return cls is not None and isinstance(obj, cls)


def _unsupported(obj: object, accepted: str, why: str = "") -> TypeError:
    kind = f"{type(obj).__module__}.{type(obj).__qualname__}"
    return TypeError(f"conn= must be {accepted}; got {kind}{': ' + why if why else ''}")


# ---- sync -------------------------------------------------------------------------------------

def sync_connection(obj: object) -> Any:
    """The DB-API connection (psycopg 3 or psycopg2) of `obj`'s current transaction, or TypeError."""
    if isinstance(obj, psycopg.Connection):  # the common case first, no other lookup
        return obj
    if _instance_of(obj, "psycopg2.extensions", "connection"):
        return obj
    if _instance_of(obj, "sqlalchemy.orm", "scoped_session"):
        # Flask-SQLAlchemy's db.session: calling the registry gives the Session the request's
        # writes went through, so our statement joins their transaction
        obj = obj()  # type: ignore[operator]
    if _instance_of(obj, "sqlalchemy.orm", "Session"):
        return _sqlalchemy_sync(obj.connection(), obj)  # type: ignore[attr-defined]
    if _instance_of(obj, "sqlalchemy.engine", "Connection"):
        return _sqlalchemy_sync(obj, obj)
    if _instance_of(obj, "django.utils.connection", "ConnectionProxy"):
        # django.db.connection forwards attributes to connections[alias] but is not an instance of it
        obj = obj._connections[obj._alias]  # type: ignore[attr-defined]
    if _instance_of(obj, "django.db.backends.base.base", "BaseDatabaseWrapper"):
        if obj.vendor != "postgresql":  # type: ignore[attr-defined]
            raise _unsupported(obj, ACCEPTED_SYNC, f"a Django {obj.vendor} connection")  # type: ignore[attr-defined]
        obj.ensure_connection()  # type: ignore[attr-defined]
        return obj.connection  # type: ignore[attr-defined]
    raise _unsupported(obj, ACCEPTED_SYNC)


def _sqlalchemy_sync(conn: Any, given: object) -> Any:
    if not conn.in_transaction():
        # what SQLAlchemy's autobegin does on its own first execute: without it the caller's
        # conn.commit() would have no transaction to commit and our INSERT would be rolled back
        conn.begin()
    driver = conn.connection.driver_connection
    if not (isinstance(driver, psycopg.Connection) or _instance_of(driver, "psycopg2.extensions", "connection")):
        raise _unsupported(given, ACCEPTED_SYNC, f"its driver is {type(driver).__module__}")
    return driver


def tuple_cursor(conn: Any) -> Any:
    """A cursor of `conn` (psycopg 3 or psycopg2) whose rows are tuples, whatever row factory or
    cursor class the caller set on the connection (dict rows would break `rows[0][0]`)."""
    if isinstance(conn, psycopg.Connection):
        return conn.cursor(row_factory=tuple_row)
    return conn.cursor(cursor_factory=sys.modules["psycopg2.extensions"].cursor)


def run_sync(obj: object, sql: str, params: Mapping[str, Any]) -> list[Any]:
    """Execute one statement on `obj` (see sync_connection) and return its rows."""
    with tuple_cursor(sync_connection(obj)) as cur:
        cur.execute(sql, params)
        return cur.fetchall() if cur.description is not None else []


# ---- async ------------------------------------------------------------------------------------

async def async_connection(obj: object) -> Any:
    """psycopg AsyncConnection or asyncpg Connection of `obj`'s current transaction, or TypeError."""
    if isinstance(obj, psycopg.AsyncConnection):
        return obj
    if _instance_of(obj, "asyncpg", "Connection") or _instance_of(obj, "asyncpg.pool", "PoolConnectionProxy"):
        # the caller's own asyncpg connection: inside its `async with conn.transaction():` our
        # statement is part of that transaction; outside one it autocommits, like asyncpg itself
        return obj
    if _instance_of(obj, "sqlalchemy.ext.asyncio", "async_scoped_session"):
        obj = obj()  # type: ignore[operator]  # this task's AsyncSession, as for scoped_session above
    if _instance_of(obj, "sqlalchemy.ext.asyncio", "AsyncSession"):
        return await _sqlalchemy_async(await obj.connection(), obj)  # type: ignore[attr-defined]
    if _instance_of(obj, "sqlalchemy.ext.asyncio", "AsyncConnection"):
        return await _sqlalchemy_async(obj, obj)
    raise _unsupported(obj, ACCEPTED_ASYNC)


async def _sqlalchemy_async(conn: Any, given: object) -> Any:
    if not conn.in_transaction():
        await conn.begin()  # as in _sqlalchemy_sync
    raw = await conn.get_raw_connection()
    driver = raw.driver_connection
    if isinstance(driver, psycopg.AsyncConnection):
        return driver
    if _instance_of(driver, "asyncpg", "Connection"):
        if not driver.is_in_transaction():
            # SQLAlchemy's asyncpg adapter opens its transaction lazily, on its first statement:
            # one trivial statement through SQLAlchemy opens it, so ours joins it
            await conn.exec_driver_sql("SELECT 1")
        return driver
    raise _unsupported(given, ACCEPTED_ASYNC, f"its driver is {type(driver).__module__}")


_NAMED = re.compile(r"%\((\w+)\)s")


@lru_cache(maxsize=64)
def _dollar_form(sql: str) -> tuple[str, tuple[str, ...]]:
    """`%(name)s` -> `$n` for asyncpg; a name used twice keeps one number. Returns (sql, names)."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    return _NAMED.sub(number, sql), tuple(names)


async def run_async(obj: object, sql: str, params: Mapping[str, Any]) -> Sequence[Any]:
    """Execute one statement on `obj` (see async_connection) and return its rows."""
    conn = await async_connection(obj)
    if isinstance(conn, psycopg.AsyncConnection):
        async with conn.cursor(row_factory=tuple_row) as cur:
            await cur.execute(sql, params)
            return await cur.fetchall() if cur.description is not None else []
    dollar_sql, names = _dollar_form(sql)
    return await conn.fetch(dollar_sql, *(params[name] for name in names))
