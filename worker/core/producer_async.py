"""Enqueue from asyncio code without blocking the event loop.

The same validation and the same statements as skiplock.core.producer; only the I/O is awaited. With
`conn=` the INSERT joins the caller's transaction (a psycopg AsyncConnection, an asyncpg Connection,
an SQLAlchemy AsyncConnection, AsyncSession or async_scoped_session: see skiplock.core.plumbing.adapters). Without
it, an async pool of autocommit connections is built from DATABASE_URL on first use, one per event
loop (a psycopg async pool belongs to the loop it was opened on).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from functools import partial
from typing import Any, overload

import psycopg.conninfo
from psycopg_pool import AsyncConnectionPool

from skiplock.core import linked_insert, task_defaults
from skiplock.core import unique_for as unique_for_keys
from skiplock.core.plumbing import adapters, tracing
from skiplock.core.plumbing.config import load_settings, validate_database_url
from skiplock.core.plumbing.db import connect_kwargs
from skiplock.core.producer import (
    _any_linked,
    _many_params,
    _many_specs,
    _one_job_statement,
    linked_specs,
    one_linked_job,
    queues_of,
    unique_for_window,
    unregistered_queues,
)
from skiplock.core.sql import queries

JOBS_ENQUEUE_SQL = queries("jobs_enqueue")

_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncConnectionPool] = weakref.WeakKeyDictionary()


async def default_async_pool() -> AsyncConnectionPool:
    """This event loop's producer pool, opened on first use."""
    loop = asyncio.get_running_loop()
    pool = _pools.get(loop)
    if pool is None:
        settings = load_settings()
        url = settings.require_database_url()
        validate_database_url(url)
        pool = AsyncConnectionPool(psycopg.conninfo.make_conninfo(url), min_size=1,
                                   max_size=max(settings.pool_size, 1), open=False, timeout=10.0,
                                   kwargs={"autocommit": True, **connect_kwargs("skiplock-producer-async")},
                                   name="skiplock-producer-async")
        _pools[loop] = pool  # before the await: a concurrent first call must not open a second pool
        await pool.open()
    return pool


async def close_default_async_pool() -> None:
    """Close this event loop's producer pool (call it before the loop ends, e.g. on app shutdown)."""
    pool = _pools.pop(asyncio.get_running_loop(), None)
    if pool is not None:
        await pool.close()


async def _execute(conn: Any, sql: str, params: Mapping[str, Any]) -> Sequence[Any]:
    if conn is not None:
        return await adapters.run_async(conn, sql, params)
    async with (await default_async_pool()).connection() as pooled:
        return await adapters.run_async(pooled, sql, params)


async def _refresh_task_defaults(conn: Any, queues: Iterable[Any]) -> None:
    """refresh_task_defaults (skiplock.core.producer) for asyncio: the @task options of queues this
    process has no handler for, read from the workers' task_defaults rows at most once a minute.

    Which queues need it (unregistered_queues) and what is kept (task_defaults.remember) are shared;
    the two lookups differ in their I/O only: awaited here on any async driver, a cursor there."""
    missing = unregistered_queues(queues)
    if not missing:
        return
    if conn is None:
        async with (await default_async_pool()).connection() as pooled:
            await _refresh_task_defaults(pooled, missing)
        return
    present = await adapters.run_async(conn, task_defaults.TABLE_EXISTS, {})
    rows = await adapters.run_async(conn, task_defaults.LOOKUP, {"queues": missing}) if present[0][0] else []
    task_defaults.remember(missing, rows)


# The signatures repeat enqueue's on purpose: a coroutine function cannot borrow a plain function's
# parameters, and each is what help(), the API reference and a type checker read. What the two calls do
# is shared: the validation (build_spec, via _one_job_statement and one_linked_job), the statements and
# the linked insert's rows; only the I/O (awaited here) is each one's own.
# Without a unique_key there is nothing to conflict with: the call always returns the new job's id.
@overload
async def enqueue_async(queue: str, payload: Any, *, conn: Any = ..., priority: int = ...,
                        run_at: datetime | None = ..., delay: float | timedelta | None = ...,
                        unique_key: None = ..., unique_for: None = ..., max_attempts: int | None = ...,
                        on_conflict: str = ...,
                        lock_key: str | None = ..., tenant: str | None = ..., version: int | None = ...,
                        weight: int = ..., depends_on: Iterable[int] | None = ...,
                        on_dependency_failure: str = ...) -> int: ...
@overload
async def enqueue_async(queue: str, payload: Any, *, conn: Any = ..., priority: int = ...,
                        run_at: datetime | None = ..., delay: float | timedelta | None = ...,
                        unique_key: str | None, unique_for: float | timedelta | None = ...,
                        max_attempts: int | None = ..., on_conflict: str = ...,
                        lock_key: str | None = ..., tenant: str | None = ...,
                        version: int | None = ..., weight: int = ..., depends_on: Iterable[int] | None = ...,
                        on_dependency_failure: str = ...) -> int | None: ...


async def enqueue_async(
    queue: str,
    payload: Any,
    *,
    conn: Any = None,
    priority: int = 0,
    run_at: datetime | None = None,
    delay: float | timedelta | None = None,
    unique_key: str | None = None,
    unique_for: float | timedelta | None = None,
    max_attempts: int | None = None,
    on_conflict: str = "ignore",
    lock_key: str | None = None,
    tenant: str | None = None,
    version: int | None = None,
    weight: int = 1,
    depends_on: Iterable[int] | None = None,
    on_dependency_failure: str = "dead",
) -> int | None:
    """`enqueue` for asyncio: the job's id, or None when unique_key matched a job in flight
    (unique_for, on_conflict, lock_key, tenant, version, weight, depends_on and on_dependency_failure as
    for `enqueue`)."""
    if conn is not None:
        await adapters.async_connection(conn)  # an unsupported object fails before anything else
    await _refresh_task_defaults(conn, [queue])
    window = unique_for_window(unique_for, unique_key, on_conflict, depends_on)
    options = {"priority": priority, "run_at": run_at, "delay": delay, "unique_key": unique_key,
               "max_attempts": max_attempts, "lock_key": lock_key, "tenant": tenant, "version": version,
               "weight": weight}
    if depends_on is not None or on_dependency_failure != "dead":
        specs, parents, policies = one_linked_job(queue, payload, on_conflict, depends_on, on_dependency_failure,
                                                  options)
        with tracing.enqueue_span(queue):
            return (await linked_insert.insert_linked_async(partial(_execute, conn), specs, parents, policies))[0]
    with tracing.enqueue_span(queue) as trace_context:  # OpenTelemetry, when configured
        sql, params = _one_job_statement(queue, payload, trace_context, on_conflict, **options)
        if window is not None:
            return await unique_for_keys.enqueue_async(partial(_execute, conn), params, window)
        rows = await _execute(conn, sql, params)
    return rows[0][0] if rows else None


async def enqueue_many_async(
    jobs: Iterable[Mapping[str, Any] | tuple[str, Any]],
    *,
    conn: Any = None,
    depends_on: Iterable[int] | None = None,
    on_dependency_failure: str = "dead",
) -> list[int]:
    """`enqueue_many` for asyncio (always the unnest INSERT: one statement, any size); `depends_on`
    and `on_dependency_failure` as for `enqueue_many`."""
    if conn is not None:
        await adapters.async_connection(conn)
    jobs = list(jobs)
    await _refresh_task_defaults(conn, queues_of(jobs))
    if depends_on is not None or on_dependency_failure != "dead" or _any_linked(jobs):
        specs_l, parents, policies = linked_specs(jobs, depends_on=depends_on,
                                                  on_dependency_failure=on_dependency_failure)
        if not specs_l:
            return []
        return await linked_insert.insert_linked_async(partial(_execute, conn), specs_l, parents, policies)
    specs = _many_specs(jobs)
    if not specs:
        return []
    rows = await _execute(conn, JOBS_ENQUEUE_SQL.enqueue_many, _many_params(specs))
    return [row[0] for row in rows]
