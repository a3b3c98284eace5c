"""Recurring jobs: definitions in code, and the operator functions the console and CLI call.

Declare a definition next to its handler:

    @task("reports", every="5m")                      # name = the queue name
    def build_report(payload): ...

    recurring("nightly-report", queue="reports", cron="0 2 * * *", timezone="Europe/Berlin",
              payload={"kind": "nightly"})

Every worker process syncs these into `recurring_schedules` at start-up and keeps the next
slot of each one enqueued (worker/services/recurring_service.py); `recurring_slots` records every slot
so that it is enqueued exactly once (worker/services/recurring_store.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from skiplock.core.errors import ConfigError, EnqueueError
from skiplock.core.producer import serialize_payload
from skiplock.core.registry import REGISTRY
from skiplock.services import recurring_store
from skiplock.services.schedule import build_schedule, load_zone, parse_interval

MAX_NAME = 200
CATCH_UP_POLICIES = ("once", "skip")
# Definitions are small; this only stops a payload meant for a job body from living in a schedule.
MAX_DEFINITION_PAYLOAD = 65_536


@dataclass(frozen=True)
class Definition:
    """One validated recurring definition, as it is stored in recurring_schedules."""

    name: str
    queue: str
    kind: str  # 'cron' | 'interval'
    schedule: str  # the crontab text, or the interval text like '5m'
    timezone: str
    payload: Any
    catch_up: str  # 'once' | 'skip'


# name -> Definition; filled by recurring() and @task(..., every=/cron=) at import time.
DEFINITIONS: dict[str, Definition] = {}


def _interval_text(name: str, every: str | int | float | timedelta) -> str:
    if isinstance(every, timedelta):
        every = every.total_seconds()
    if isinstance(every, bool) or not isinstance(every, str | int | float):
        raise ConfigError(f"recurring {name!r}: every= must be like '5m', a number of seconds or a timedelta")
    text = every if isinstance(every, str) else f"{int(every)}s"
    if not isinstance(every, str) and int(every) != every:
        raise ConfigError(f"recurring {name!r}: every= must be a whole number of seconds, got {every}")
    try:
        parse_interval(text)
    except ValueError as exc:
        raise ConfigError(f"recurring {name!r}: {exc}") from None
    return text.strip()


def define(
    name: str,
    *,
    queue: str,
    cron: str | None = None,
    every: str | int | float | timedelta | None = None,
    payload: Any = None,
    timezone: str = "UTC",
    catch_up: str = "once",
) -> Definition:
    """Validate the arguments of `recurring` into a Definition; ConfigError names the definition."""
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME or "\x00" in name:
        raise ConfigError(f"recurring definition needs a name of 1-{MAX_NAME} characters, got {name!r}")
    if not isinstance(queue, str) or not queue.strip() or len(queue) > 128:
        raise ConfigError(f"recurring {name!r}: queue must be a non-empty name of at most 128 characters")
    if (cron is None) == (every is None):
        raise ConfigError(f"recurring {name!r}: give exactly one of cron= or every=")
    if catch_up not in CATCH_UP_POLICIES:
        raise ConfigError(f"recurring {name!r}: catch_up must be 'once' or 'skip', got {catch_up!r}")
    if not isinstance(timezone, str):
        raise ConfigError(f"recurring {name!r}: timezone must be an IANA name like 'Europe/Berlin'")
    try:
        load_zone(timezone)
    except ValueError as exc:
        raise ConfigError(f"recurring {name!r}: {exc}") from None
    if cron is not None:
        if not isinstance(cron, str):
            raise ConfigError(f"recurring {name!r}: cron= must be a 5-field crontab string")
        kind, text = "cron", " ".join(cron.split())
    else:
        assert every is not None
        kind, text = "interval", _interval_text(name, every)
    try:
        # computing one fire time also rejects crontabs that can never fire, like '0 0 30 2 *'
        build_schedule(kind, text, timezone).next_after(datetime.now(UTC))
    except ValueError as exc:
        raise ConfigError(f"recurring {name!r}: invalid {kind} schedule {text!r}: {exc}") from None
    try:
        # stored as jsonb and compared with the table at sync: keep the JSON round-trip form
        normalised = json.loads(serialize_payload(payload, MAX_DEFINITION_PAYLOAD))
    except EnqueueError as exc:
        raise ConfigError(f"recurring {name!r}: {exc}") from None
    return Definition(name, queue, kind, text, timezone, normalised, catch_up)


# recurring's keywords repeat define's on purpose: it is the public call, and its signature is what
# help(), the API reference and a type checker show. The validation is define's alone.
def recurring(
    name: str,
    *,
    queue: str,
    cron: str | None = None,
    every: str | int | float | timedelta | None = None,
    payload: Any = None,
    timezone: str = "UTC",
    catch_up: str = "once",
) -> Definition:
    """Declare a recurring job: enqueue `payload` on `queue` at every slot of `cron` or `every`.

    `cron` is a 5-field crontab read in `timezone`; `every` is '30s', '5m', '1h', '1d', '1h30m'
    (aligned to multiples since the Unix epoch). `catch_up` says what happens to slots missed
    while no worker ran: 'once' runs one catch-up job, 'skip' runs none. An invalid definition
    raises ConfigError naming it, at import time (so at worker start-up).
    """
    definition = define(name, queue=queue, cron=cron, every=every, payload=payload,
                        timezone=timezone, catch_up=catch_up)
    existing = DEFINITIONS.get(definition.name)
    if existing is not None and existing != definition:
        raise ConfigError(f"recurring {name!r} is defined twice with different settings")
    DEFINITIONS[definition.name] = definition
    return definition


# ---- @task("reports", every="5m", timezone=..., catch_up=...) --------------------------------


def from_task(queue: str, func: Callable[..., Any], value: Any) -> None:
    """@task's every=/cron= hook: a definition named after the queue, with the task's options."""
    task = REGISTRY.get(queue)
    options = task.options if task is not None else {}
    recurring(queue, queue=queue, cron=options.get("cron"), every=options.get("every"),
              timezone=options.get("timezone", "UTC"), catch_up=options.get("catch_up", "once"))


def needs_schedule(queue: str, func: Callable[..., Any], value: Any) -> None:
    """@task's timezone=/catch_up= hook: only meaningful together with every= or cron=."""
    task = REGISTRY.get(queue)
    options = task.options if task is not None else {}
    if "every" not in options and "cron" not in options:
        raise ConfigError(f"@task({queue!r}): timezone= and catch_up= need every= or cron=")



# ---- operator functions (console, CLI): each takes a psycopg connection ----------------------


def list_schedules(conn: psycopg.Connection) -> list[dict[str, Any]]:
    """Every row of recurring_schedules as a dict, ordered by name."""
    return recurring_store.list_schedules(conn)


def pause_schedule(conn: psycopg.Connection, name: str) -> bool:
    """Stop new instances of `name` (its pending instance is cancelled); True if it was running."""
    return recurring_store.pause(conn, name)


def resume_schedule(conn: psycopg.Connection, name: str) -> bool:
    """Continue `name` from its next slot after now (no catch-up); True if it was paused."""
    return recurring_store.resume(conn, name)


def run_schedule_now(conn: psycopg.Connection, name: str) -> int | None:
    """Enqueue one extra instance of `name` now, with its own slot key; its job id, or None if unknown."""
    return recurring_store.run_now(conn, name)
