"""Schedules made at runtime: `skiplock.schedules.create/update/pause/resume/delete/get/list/backfill`.

They live in the one recurring_schedules table beside the definitions from code (origin 'runtime'
there, 'code' for those), and the one scheduler every worker runs plans both, exactly once per slot
(worker/services/recurring_store.py says how). Code owns its definitions: update and delete refuse
them, and the workers' start-up sync never touches a runtime row.

    from skiplock import schedules
    schedules.create("report:acme", "reports", {"customer": "acme"}, cron="0 7 * * *",
                     timezone="Europe/Berlin", tenant="acme")

Every function takes `conn=` (a psycopg 3 connection: the change joins its transaction); without it a
pooled connection is used. Bad input (an invalid cron, an unknown time zone, a taken name) raises
ConfigError before anything is written.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from skiplock.core.errors import ConfigError
from skiplock.core.producer import default_pool
from skiplock.core.sql import queries
from skiplock.services import recurring_store
from skiplock.services.recurring_defs import define
from skiplock.services.schedule import build_schedule

Q = queries("recurring_schedules")
# Slots one backfill may enqueue: a wider range is more likely a typo than a plan (split it to mean it).
MAX_BACKFILL = 10_000
_KEEP: Any = object()  # update(): "leave this setting as it is"


@dataclass(frozen=True)
class Schedule:
    """One schedule as stored: its settings, its state and its fire times."""

    name: str
    queue: str
    kind: str  # 'cron' or 'interval'
    schedule: str  # the crontab text, or the interval text like '5m'
    timezone: str
    payload: Any
    tenant: str | None
    origin: str  # 'runtime' (made by this API, the CLI, SQL or the console) or 'code'
    enabled: bool  # False while paused
    active: bool  # False once a code definition is no longer in code
    catch_up: str
    last_fire_at: datetime | None
    next_fire_at: datetime | None
    updated_at: datetime


@contextmanager
def _connection(conn: psycopg.Connection | None) -> Iterator[psycopg.Connection]:
    if conn is not None:
        yield conn
        return
    with default_pool().connection() as pooled:
        yield pooled


def _validated(name: str, queue: str, payload: Any, cron: str | None, every: Any, timezone: str | None,
               catch_up: str, tenant: str | None) -> dict[str, Any]:
    d = define(name, queue=queue, cron=cron, every=every, payload=payload, timezone=timezone or "UTC",
               catch_up=catch_up)
    if tenant is not None and (not isinstance(tenant, str) or not tenant.strip() or len(tenant) > 512):
        raise ConfigError(f"schedule {name!r}: tenant must be a non-empty name of at most 512 characters")
    return {"name": d.name, "queue": d.queue, "kind": d.kind, "schedule": d.schedule, "timezone": d.timezone,
            "payload": Jsonb(d.payload), "catch_up": d.catch_up, "tenant": tenant}


def _locked_runtime(conn: psycopg.Connection, name: str, action: str) -> dict[str, Any]:
    """`name`'s row, locked; ConfigError when there is none or code owns it."""
    if "\x00" in name:  # no text column holds NUL: no such schedule
        raise ConfigError(f"no schedule named {name!r}")
    with conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute(Q.lock_schedule, {"name": name}).fetchone()
    if row is None:
        raise ConfigError(f"no schedule named {name!r}")
    if row["origin"] != "runtime":
        raise ConfigError(f"schedule {name!r} is defined in code: {action} it there, not at runtime")
    return row


def create(name: str, queue: str, payload: Any = None, *, cron: str | None = None,
           every: str | int | float | timedelta | None = None, timezone: str | None = None,
           tenant: str | None = None, catch_up: str = "once", conn: psycopg.Connection | None = None) -> Schedule:
    """Make a schedule that enqueues `payload` on `queue` at every slot of `cron` or `every`.

    Its first slot is enqueued at once, in the same transaction. `tenant` is set on every job it
    enqueues. A name already taken (by a runtime or a code schedule) is a ConfigError.
    """
    params = _validated(name, queue, payload, cron, every, timezone, catch_up, tenant)
    with _connection(conn) as c, c.transaction():
        if c.execute(Q.create_schedule, params).fetchone() is None:
            raise ConfigError(f"a schedule named {name!r} already exists")
        recurring_store.advance(c, name, datetime.now(UTC))
        return _get(c, name)


def update(name: str, *, queue: str = _KEEP, payload: Any = _KEEP, cron: str | None = None,
           every: str | int | float | timedelta | None = None, timezone: str | None = None,
           tenant: str | None = _KEEP, catch_up: str | None = None,
           conn: psycopg.Connection | None = None) -> Schedule:
    """Change a runtime schedule's settings (those not given stay); it is planned again from now.

    Its pending slot's job, not started yet, is withdrawn, so the change applies from the next slot.
    Give cron= or every= to change when it fires (the other is dropped).
    """
    with _connection(conn) as c, c.transaction():
        row = _locked_runtime(c, name, "change")
        if cron is None and every is None:
            cron, every = (row["schedule"], None) if row["kind"] == "cron" else (None, row["schedule"])
        params = _validated(name, row["queue"] if queue is _KEEP else queue,
                            row["payload"] if payload is _KEEP else payload, cron, every,
                            timezone or row["timezone"], catch_up or row["catch_up"],
                            row["tenant"] if tenant is _KEEP else tenant)
        c.execute(Q.update_schedule, params)
        recurring_store.withdraw_pending(c, name, f"a change of schedule {name}")
        recurring_store.advance(c, name, datetime.now(UTC))  # None while paused: resume plans it
        return _get(c, name)


def pause(name: str, *, conn: psycopg.Connection | None = None) -> bool:
    """Stop new instances of `name` (its pending one is withdrawn); True if it was enabled."""
    with _connection(conn) as c:
        _require(c, name)
        return recurring_store.pause(c, name)


def resume(name: str, *, conn: psycopg.Connection | None = None) -> bool:
    """Continue `name` from its next slot after now (paused slots are not caught up); True if it was paused."""
    with _connection(conn) as c:
        _require(c, name)
        return recurring_store.resume(c, name)


def delete(name: str, *, conn: psycopg.Connection | None = None) -> bool:
    """Delete a runtime schedule and withdraw its pending job; False if there was no such schedule."""
    with _connection(conn) as c, c.transaction():
        try:
            _locked_runtime(c, name, "delete")
        except ConfigError:
            if _find(c, name) is None:
                return False
            raise
        recurring_store.withdraw_pending(c, name, f"deletion of schedule {name}")
        return c.execute(Q.delete_schedule, {"name": name}).fetchone() is not None


def get(name: str, *, conn: psycopg.Connection | None = None) -> Schedule | None:
    """The schedule named `name` (runtime or code), or None."""
    with _connection(conn) as c:
        return _find(c, name)


def list(*, queue: str | None = None, origin: str | None = None, after: str = "", limit: int = 1000,
         conn: psycopg.Connection | None = None) -> builtins.list[Schedule]:
    """Schedules by name: of one queue and/or origin ('runtime', 'code') if given, `limit` after `after`."""
    if origin not in (None, "runtime", "code"):
        raise ConfigError(f"origin must be 'runtime' or 'code', got {origin!r}")
    if "\x00" in after or "\x00" in (queue or ""):  # no text column holds NUL: nothing matches
        return []
    with _connection(conn) as c, c.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(Q.list_schedules_page, {"queue": queue, "origin": origin, "after": after,
                                                   "limit": limit}).fetchall()
    return [Schedule(**r) for r in rows]


def backfill(name: str, start: datetime, end: datetime, *,
             conn: psycopg.Connection | None = None) -> builtins.list[int]:
    """Enqueue every slot of `name` in [start, end] (and before now) that was never enqueued; their job ids.

    A slot already enqueued (by the scheduler, or an earlier backfill) is not enqueued again, so a
    backfill can be repeated safely. The jobs are due at once.
    """
    if start.tzinfo is None or end.tzinfo is None:
        raise ConfigError("backfill needs timezone-aware start and end datetimes")
    if end < start:
        raise ConfigError(f"backfill end {end.isoformat()} is before its start {start.isoformat()}")
    with _connection(conn) as c, c.transaction():
        with c.cursor(row_factory=dict_row) as cur:
            row = None if "\x00" in name else cur.execute(Q.lock_schedule, {"name": name}).fetchone()
        if row is None:
            raise ConfigError(f"no schedule named {name!r}")
        now = c.execute("SELECT now()").fetchone()[0]  # type: ignore[index]
        slots = _slots_between(build_schedule(row["kind"], row["schedule"], row["timezone"]), start, min(end, now))
        return recurring_store.backfill_slots(c, row, slots)


def _slots_between(schedule: Any, start: datetime, end: datetime) -> builtins.list[datetime]:
    slots: builtins.list[datetime] = []
    fire = schedule.next_after(start - timedelta(microseconds=1))
    while fire <= end:
        if len(slots) == MAX_BACKFILL:
            raise ConfigError(f"backfill covers more than {MAX_BACKFILL:,} slots; give a shorter range")
        slots.append(fire)
        fire = schedule.next_after(fire)
    return slots


def _find(conn: psycopg.Connection, name: str) -> Schedule | None:
    if "\x00" in name:  # a text column cannot hold NUL, so no schedule has such a name (and the query would fail)
        return None
    with conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute(Q.get_schedule, {"name": name}).fetchone()
    return None if row is None else Schedule(**row)


def _get(conn: psycopg.Connection, name: str) -> Schedule:
    found = _find(conn, name)
    assert found is not None, "read in the transaction that wrote it"
    return found


def _require(conn: psycopg.Connection, name: str) -> None:
    if _find(conn, name) is None:
        raise ConfigError(f"no schedule named {name!r}")
