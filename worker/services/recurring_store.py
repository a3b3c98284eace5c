"""The recurring tables: sync from code, enqueue a definition's due slots, pause/resume/run-now.

Exactly once per slot rests on two things, both here:
- `advance` locks the definition's row (FOR UPDATE SKIP LOCKED), so one worker at a time plans
  its slots from the stored head (`next_fire_at`); the others skip it and find it done.
- each slot is inserted into recurring_slots (primary key name, fire_at) ON CONFLICT DO NOTHING,
  in the same transaction as its job: the job exists iff the slot row does, and a slot that
  was ever enqueued is never enqueued again, whoever asks and however late.
Jobs are only written through the queue core (producer.enqueue, state_changes.cancel_queued).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from skiplock.core import state_changes
from skiplock.core.producer import enqueue, enqueue_many
from skiplock.core.sql import queries
from skiplock.services.schedule import LATE_GRACE, build_schedule, plan_slots, plan_time

log = logging.getLogger("skiplock.recurring")
Q = queries("recurring_schedules")

# Lock one enabled, active definition for planning; a row another worker holds is skipped.
LOCK_DUE = """
SELECT name, queue, kind, schedule, timezone, payload, catch_up, tenant, last_fire_at, next_fire_at
  FROM recurring_schedules
 WHERE name = %(name)s AND enabled AND active
   FOR UPDATE SKIP LOCKED
"""

# The durable "this slot was enqueued" record; no row back means it already was.
INSERT_SLOT = """
INSERT INTO recurring_slots (name, fire_at, manual) VALUES (%(name)s, %(fire_at)s, %(manual)s)
ON CONFLICT (name, fire_at) DO NOTHING
RETURNING fire_at
"""

SET_SLOT_JOB = "UPDATE recurring_slots SET job_id = %(job_id)s WHERE name = %(name)s AND fire_at = %(fire_at)s"

# After planning: the newest slot that came due, the pending one, and when to plan the one after it.
SET_FIRE_TIMES = """
UPDATE recurring_schedules SET last_fire_at = %(last)s, next_fire_at = %(next)s, plan_at = %(plan_at)s,
       updated_at = now()
 WHERE name = %(name)s
"""

# Start-up sync: a new definition is inserted with nothing planned (next_fire_at NULL).
INSERT_DEFINITION = """
INSERT INTO recurring_schedules (name, queue, kind, schedule, timezone, payload, catch_up)
VALUES (%(name)s, %(queue)s, %(kind)s, %(schedule)s, %(timezone)s, %(payload)s, %(catch_up)s)
ON CONFLICT (name) DO NOTHING
RETURNING name
"""

LOCK_DEFINITION = """
SELECT name, queue, kind, schedule, timezone, payload, catch_up, active, origin
  FROM recurring_schedules WHERE name = %(name)s FOR UPDATE
"""

# A changed (or re-added) definition: new settings, and plan again from now.
REPLACE_DEFINITION = """
UPDATE recurring_schedules
   SET queue = %(queue)s, kind = %(kind)s, schedule = %(schedule)s, timezone = %(timezone)s,
       payload = %(payload)s, catch_up = %(catch_up)s, active = true, next_fire_at = NULL, plan_at = NULL,
       updated_at = now()
 WHERE name = %(name)s
"""

SET_CATCH_UP = "UPDATE recurring_schedules SET catch_up = %(catch_up)s, updated_at = now() WHERE name = %(name)s"

# Definitions of this process's queues that its code no longer declares (runtime ones are not code's).
DEACTIVATE_MISSING = """
UPDATE recurring_schedules SET active = false, next_fire_at = NULL, plan_at = NULL, updated_at = now()
 WHERE active AND origin = 'code' AND queue = ANY(%(queues)s::text[]) AND NOT (name = ANY(%(names)s::text[]))
RETURNING name
"""

# Jobs of a definition's scheduled slots that have not started yet.
PENDING_JOBS = """
SELECT s.job_id FROM recurring_slots s JOIN jobs j ON j.id = s.job_id
 WHERE s.name = %(name)s AND NOT s.manual AND j.status = 'queued'
"""

# A withdrawn (cancelled before it started) slot may be planned again: it never ran.
DELETE_WITHDRAWN_SLOTS = "DELETE FROM recurring_slots WHERE name = %(name)s AND job_id = ANY(%(ids)s::bigint[])"

PAUSE = """
UPDATE recurring_schedules SET enabled = false, next_fire_at = NULL, plan_at = NULL, updated_at = now()
 WHERE name = %(name)s AND enabled RETURNING name
"""

RESUME = """
UPDATE recurring_schedules SET enabled = true, next_fire_at = NULL, plan_at = NULL, updated_at = now()
 WHERE name = %(name)s AND NOT enabled RETURNING name
"""

SELECT_ONE = "SELECT name, queue, payload, tenant FROM recurring_schedules WHERE name = %(name)s FOR SHARE"

LIST = """
SELECT name, queue, kind, schedule, timezone, payload, tenant, origin, enabled, active, catch_up,
       last_fire_at, next_fire_at, updated_at
  FROM recurring_schedules ORDER BY name
"""

# Old slot rows, a batch at a time. A scheduled slot older than its definition's last fired
# slot can never be planned again (planning only moves forward from the head, or from now);
# the age limit on top covers a worker whose clock runs far behind.
PRUNE_SLOTS = """
DELETE FROM recurring_slots
 WHERE (name, fire_at) IN (
       SELECT s.name, s.fire_at
         FROM recurring_slots s JOIN recurring_schedules r ON r.name = s.name
        WHERE s.fire_at < now() - make_interval(secs => %(older_than)s)
          AND (s.manual OR s.fire_at < r.last_fire_at)
        LIMIT %(limit)s)
"""


@dataclass(frozen=True)
class Advanced:
    """What one `advance` did: the slots it enqueued and the definition's pending slot."""

    enqueued: list[datetime]
    next_fire_at: datetime | None


def slot_key(name: str, fire_at: datetime, manual: bool = False) -> str:
    """The job's unique_key for a slot, e.g. 'recurring:nightly:2026-01-01T02:00:00+00:00'."""
    stamp = fire_at.astimezone(UTC).isoformat()
    return f"recurring:{name}:manual:{stamp}" if manual else f"recurring:{name}:{stamp}"


def _enqueue_slot(conn: psycopg.Connection, row: dict[str, Any], fire_at: datetime,
                  *, manual: bool) -> tuple[bool, int | None]:
    """Record the slot and enqueue its job, in the caller's transaction; (slot was new, job id)."""
    name = row["name"]
    if conn.execute(INSERT_SLOT, {"name": name, "fire_at": fire_at, "manual": manual}).fetchone() is None:
        return False, None
    # a manual instance runs at now() so the insert trigger wakes idle workers at once
    job_id = enqueue(row["queue"], row["payload"], conn=conn, run_at=None if manual else fire_at,
                     unique_key=slot_key(name, fire_at, manual), tenant=row.get("tenant"))
    if job_id is None:
        log.warning("recurring %s: slot %s collapsed onto an in-flight job with the same key", name, fire_at)
    conn.execute(SET_SLOT_JOB, {"job_id": job_id, "name": name, "fire_at": fire_at})
    return True, job_id


def advance(conn: psycopg.Connection, name: str, now: datetime, grace: timedelta = LATE_GRACE) -> Advanced | None:
    """Enqueue what `name` needs at `now` (late/catch-up slots and the next one), in one transaction.

    None when the definition is paused, inactive, gone, or being planned by another worker.
    """
    with conn.transaction():
        with conn.cursor(row_factory=dict_row) as cur:
            row = cur.execute(LOCK_DUE, {"name": name}).fetchone()
        if row is None:
            return None
        advanced = _plan_locked(conn, row, now, grace)
    _log_enqueued(name, advanced)
    return advanced


def advance_many(conn: psycopg.Connection, names: list[str], now: datetime,
                 grace: timedelta = LATE_GRACE) -> dict[str, Advanced]:
    """`advance` for several definitions in one transaction: what the scheduler's pass does, a batch at a time.

    Set-based: the slot times are computed here, then each write is one statement for the whole batch (the
    slots ON CONFLICT DO NOTHING, their jobs, the slots' job ids, the definitions' fire times), so a batch
    costs a handful of round trips and one commit however many definitions it holds. Definitions another
    worker holds, or that are paused or gone, are left out of the result.
    """
    with conn.transaction():
        with conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(Q.lock_due_many, {"names": names}).fetchall()
        plans = {row["name"]: plan_row(row, now, grace) for row in rows}
        wanted = [(name, fire_at) for name, plan in plans.items() for fire_at in plan.slots]
        new = _insert_slots(conn, wanted) if wanted else []
        if new:
            by_name = {row["name"]: row for row in rows}
            _enqueue_slot_jobs(conn, [(by_name[name], fire_at) for name, fire_at in new])
        conn.execute(Q.set_fire_times_many, {
            "names": list(plans), "lasts": [p.last for p in plans.values()],
            "nexts": [p.next_fire_at for p in plans.values()], "plan_ats": [p.plan_at for p in plans.values()]})
    enqueued: dict[str, list[datetime]] = {name: [] for name in plans}
    for name, fire_at in new:
        enqueued[name].append(fire_at)
    if new:
        log.info("recurring: enqueued %d slot(s) of %d schedule(s)", len(new), len(plans))
    return {name: Advanced(sorted(enqueued[name]), plan.next_fire_at) for name, plan in plans.items()}


@dataclass(frozen=True)
class Plan:
    """What planning a definition at `now` writes: the slots to enqueue, and its fire times after."""

    slots: list[datetime]
    next_fire_at: datetime | None
    last: datetime | None
    plan_at: datetime | None


def plan_row(row: dict[str, Any], now: datetime, grace: timedelta = LATE_GRACE) -> Plan:
    """The plan of the definition in `row` at `now` (pure: reads the row, writes nothing)."""
    head: datetime | None = row["next_fire_at"]
    schedule = build_schedule(row["kind"], row["schedule"], row["timezone"])
    slots = plan_slots(schedule, head, now, row["catch_up"], grace)
    if not slots:
        # not due yet (a definition migrated before plan_at, or a pass that raced another worker's)
        return Plan([], head, row["last_fire_at"], _plan_at(row, head))
    due = [t for t in (head, *slots) if t is not None and t <= now]
    return Plan(slots, slots[-1], max(due) if due else row["last_fire_at"], _plan_at(row, slots[-1]))


def _insert_slots(conn: psycopg.Connection, slots: list[tuple[str, datetime]]) -> list[tuple[str, datetime]]:
    """Record `slots` (name, fire_at) in one statement; those that were new (the others were enqueued before)."""
    rows = conn.execute(Q.insert_slots, {"names": [n for n, _ in slots], "fire_ats": [t for _, t in slots]})
    return [(name, fire_at) for name, fire_at in rows.fetchall()]


def _enqueue_slot_jobs(conn: psycopg.Connection, slots: list[tuple[dict[str, Any], datetime]]) -> None:
    """Enqueue the jobs of new slots (one INSERT) and write each slot's job id (one UPDATE)."""
    keys = [slot_key(row["name"], fire_at) for row, fire_at in slots]
    enqueue_many([{"queue": row["queue"], "payload": row["payload"], "run_at": fire_at, "unique_key": key,
                   "tenant": row["tenant"]} for (row, fire_at), key in zip(slots, keys, strict=True)], conn=conn)
    # the ids by key, not by position: a slot whose key collapsed onto an in-flight job has none of its own
    linked = conn.execute(Q.link_slot_jobs, {"names": [row["name"] for row, _ in slots],
                                             "fire_ats": [t for _, t in slots], "keys": keys}).rowcount
    if linked < len(slots):
        log.warning("recurring: %d new slot(s) collapsed onto in-flight jobs with the same key",
                    len(slots) - linked)


def _plan_locked(conn: psycopg.Connection, row: dict[str, Any], now: datetime, grace: timedelta) -> Advanced:
    """Enqueue the due slots of the definition in `row` (locked by the caller's transaction) and store its head."""
    plan = plan_row(row, now, grace)
    enqueued = [fire_at for fire_at in plan.slots if _enqueue_slot(conn, row, fire_at, manual=False)[0]]
    conn.execute(SET_FIRE_TIMES, {"name": row["name"], "next": plan.next_fire_at, "last": plan.last,
                                  "plan_at": plan.plan_at})
    return Advanced(enqueued, plan.next_fire_at)


def _log_enqueued(name: str, advanced: Advanced) -> None:
    for fire_at in advanced.enqueued:
        log.info("recurring %s: enqueued slot %s", name, fire_at.isoformat())


def _plan_at(row: dict[str, Any], head: datetime | None) -> datetime | None:
    """When the slot after `head` should be planned (None: nothing pending, due at once)."""
    if head is None:
        return None
    return plan_time(row["name"], row["kind"], row["schedule"], row["timezone"], head)


def due_schedules(conn: psycopg.Connection, now: datetime, limit: int) -> list[dict[str, Any]]:
    """Up to `limit` enabled, active definitions due for planning at `now`, the longest due first."""
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(Q.due_schedules, {"now": now, "limit": limit}).fetchall()


def soonest_fire(conn: psycopg.Connection, now: datetime, queues: Iterable[str]) -> datetime | None:
    """The soonest pending slot after `now` of a definition on `queues`, or None."""
    row = conn.execute(Q.soonest_fire, {"now": now, "queues": sorted(queues)}).fetchone()
    return None if row is None else row[0]


def soonest_plan(conn: psycopg.Connection, now: datetime) -> datetime | None:
    """The soonest moment after `now` at which a definition becomes due for planning, or None."""
    row = conn.execute(Q.soonest_plan, {"now": now}).fetchone()
    return None if row is None else row[0]


def backfill_slots(conn: psycopg.Connection, row: dict[str, Any], slots: Iterable[datetime]) -> list[int]:
    """Enqueue each of `slots` of the definition in `row` that was never enqueued; the new jobs' ids."""
    ids = []
    for fire_at in slots:
        inserted, job_id = _enqueue_slot(conn, row, fire_at, manual=False)
        if inserted and job_id is not None:
            ids.append(job_id)
    if ids:
        log.info("recurring %s: backfilled %d slot(s)", row["name"], len(ids))
    return ids


def withdraw_pending(conn: psycopg.Connection, name: str, reason: str) -> list[int]:
    """Cancel the not-yet-started jobs of `name`'s scheduled slots and forget those slots."""
    ids = [r[0] for r in conn.execute(PENDING_JOBS, {"name": name}).fetchall()]
    cancelled = state_changes.cancel_queued(conn, ids, reason) if ids else []
    if cancelled:
        conn.execute(DELETE_WITHDRAWN_SLOTS, {"name": name, "ids": cancelled})
    return cancelled


@dataclass
class SyncResult:
    """What a start-up sync changed, by definition name."""

    added: list[str]
    changed: list[str]
    deactivated: list[str]
    conflicts: list[str] = field(default_factory=list)  # code definitions named like a runtime schedule


class Definition(Protocol):
    """What the store reads of a recurring definition (skiplock.services.recurring_defs.Definition, which
    imports this module: a Protocol here keeps the import one way)."""

    @property
    def name(self) -> str: ...
    @property
    def queue(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def schedule(self) -> str: ...
    @property
    def timezone(self) -> str: ...
    @property
    def payload(self) -> Any: ...
    @property
    def catch_up(self) -> str: ...


def _params(d: Definition) -> dict[str, Any]:
    return {"name": d.name, "queue": d.queue, "kind": d.kind, "schedule": d.schedule,
            "timezone": d.timezone, "payload": Jsonb(d.payload), "catch_up": d.catch_up}


def sync_definitions(conn: psycopg.Connection, definitions: Iterable[Definition],
                     owned_queues: Iterable[str]) -> SyncResult:
    """Write the code's definitions to recurring_schedules; mark missing ones of `owned_queues` inactive.

    A definition whose queue, schedule, time zone or payload changed (or that comes back after
    being inactive) has its pending instance withdrawn and is planned again from now, so the
    change applies from the next slot. Only definitions on queues this process knows are
    deactivated: a worker pool for other queues must not switch off schedules it never loaded.
    Each definition is its own short transaction, so concurrent start-ups do not deadlock.
    """
    result = SyncResult([], [], [])
    defs = sorted(definitions, key=lambda d: d.name)
    for d in defs:
        params = _params(d)
        with conn.transaction():
            if conn.execute(INSERT_DEFINITION, params).fetchone() is not None:
                result.added.append(d.name)
                continue
            with conn.cursor(row_factory=dict_row) as cur:
                row = cur.execute(LOCK_DEFINITION, {"name": d.name}).fetchone()
            assert row is not None  # inserted or present; rows are never deleted concurrently here
            if row["origin"] == "runtime":
                # a schedule made at runtime owns its name; code does not overwrite what an operator made
                result.conflicts.append(d.name)
                continue
            stored = (row["queue"], row["kind"], row["schedule"], row["timezone"], row["payload"])
            if stored != (d.queue, d.kind, d.schedule, d.timezone, d.payload) or not row["active"]:
                conn.execute(REPLACE_DEFINITION, params)
                withdraw_pending(conn, d.name, f"a change of schedule {d.name}")
                result.changed.append(d.name)
            elif row["catch_up"] != d.catch_up:
                conn.execute(SET_CATCH_UP, params)
    with conn.transaction():
        gone = [r[0] for r in conn.execute(DEACTIVATE_MISSING, {
            "queues": sorted(set(owned_queues)), "names": [d.name for d in defs]}).fetchall()]
        for name in gone:
            withdraw_pending(conn, name, f"removal of schedule {name} from code")
    result.deactivated = gone
    for name in result.changed:
        log.info("recurring %s: definition changed; planning again from now", name)
    for name in gone:
        log.warning("recurring %s: no longer defined in code; marked inactive", name)
    for name in result.conflicts:
        log.error("recurring %s: defined in code, but a schedule made at runtime has that name; the runtime one "
                  "is kept (rename one of them)", name)
    return result


def pause(conn: psycopg.Connection, name: str) -> bool:
    """enabled -> paused; its pending instance is cancelled. True if it was enabled."""
    with conn.transaction():
        if conn.execute(PAUSE, {"name": name}).fetchone() is None:
            return False
        withdraw_pending(conn, name, f"pause of schedule {name}")
    return True


def resume(conn: psycopg.Connection, name: str, now: datetime | None = None) -> bool:
    """paused -> enabled, planned from the next slot after now (paused slots are not caught up)."""
    with conn.transaction():
        if conn.execute(RESUME, {"name": name}).fetchone() is None:
            return False
        # enqueue the next slot right away instead of waiting for a worker's pass
        advance(conn, name, now or datetime.now(UTC))
    return True


def run_now(conn: psycopg.Connection, name: str) -> int | None:
    """Enqueue one manual instance of `name` now; its job id, or None if no such definition."""
    with conn.transaction():
        with conn.cursor(row_factory=dict_row) as cur:
            row = cur.execute(SELECT_ONE, {"name": name}).fetchone()
        if row is None:
            return None
        while True:
            # the microsecond clock is the manual slot's key; a (rare) clash just takes the next one
            stamp = conn.execute("SELECT clock_timestamp()").fetchone()
            assert stamp is not None
            inserted, job_id = _enqueue_slot(conn, row, stamp[0], manual=True)
            if inserted:
                return job_id


def list_schedules(conn: psycopg.Connection) -> list[dict[str, Any]]:
    """Every recurring_schedules row as a dict, by name."""
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(LIST).fetchall()


def prune_slots(conn: psycopg.Connection, older_than: timedelta, limit: int = 1000) -> int:
    """Delete up to `limit` slot rows that can never matter again; return how many."""
    cur = conn.execute(PRUNE_SLOTS, {"older_than": older_than.total_seconds(), "limit": limit})
    return cur.rowcount
