"""Global per-queue limits: most running at once, and claims per second.

The limits live in queue_limits, one row per limited queue, and are enforced by the claim itself
(worker/core/sql/jobs_claim.sql, and skiplock_limit_allowances of migration 018), for all
workers on all machines together:
- concurrency N: a claim takes at most N minus the queue's running jobs, counted while it holds
  the queue's row lock, so two claimers never both take the last slot. A reaped lease is no
  longer running, so its slot comes back with it (pgqueuer#475 kept a stale job's slot forever).
- rate R/s with burst B: a token bucket in the same row, refilled at R per second up to B and
  spent by each claim. Over any one-second window at most R + B jobs start: B is the stated
  tolerance, max(1, R/10) unless set.
Set them with `skiplock queues limit`, the console, or @task(concurrency=..., rate=...).

Per-tenant limits (set_tenant_limit) hold each tenant of the queue (the jobs' `tenant`) on top of the
global ones: at most N of its jobs running, at most R per second started (a bucket per tenant), decided
by the same claim under the same row lock. A job's `weight` counts toward every one of these limits.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from skiplock.core.errors import ConfigError
from skiplock.core.sql import queries

_UNITS = {"s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
REFRESH_SECONDS = 1.0  # how stale a worker's view of which queues are limited may be (see LimitsView)

# The statements: worker/core/sql/queue_limits.sql.
_SQL = "queue_limits"


@dataclass(frozen=True)
class QueueLimit:
    """One queue's limits as stored."""

    queue: str
    concurrency: int | None
    rate: float | None  # claims per second
    burst: float | None  # token bucket size: the tolerance over any one-second window
    running: int = 0  # the running jobs' weight (a job counts its weight)
    updated_by: str = ""
    tenant_concurrency: int | None = None  # the most one tenant has running at once
    tenant_rate: float | None = None  # starts per second, per tenant
    tenant_burst: float | None = None  # each tenant's bucket size

    @property
    def global_limits(self) -> bool:
        """Whether the queue has a global limit (not only per-tenant ones)."""
        return self.concurrency is not None or self.rate is not None

    @property
    def tenant_limits(self) -> bool:
        """Whether the queue has per-tenant limits."""
        return self.tenant_concurrency is not None or self.tenant_rate is not None


@dataclass(frozen=True)
class TenantAtLimit:
    """A tenant holding some of its queue's per-tenant limits now."""

    tenant: str
    running: int  # its running jobs' weight
    allow: int  # the weight it may still start now: 0 = at its limit


# Bounds that keep a typo (or a hostile form value) from reaching the database as an overflow:
# far above any real limit, within int4 and float8.
MAX_CONCURRENCY = 1_000_000
MAX_RATE = 1_000_000.0


def parse_rate(value: object) -> float:
    """A rate as claims per second: a positive number, or "N/s", "N/m", "N/h".

    >>> parse_rate("100/s"), parse_rate("30/m"), parse_rate(2.5)
    (100.0, 0.5, 2.5)
    """
    if isinstance(value, bool):
        raise ConfigError(f"rate must be a number per second or like '100/s', got {value!r}")
    if isinstance(value, int | float):
        per_second = float(value)
    elif isinstance(value, str) and (m := re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(?:/\s*([a-z]+))?\s*", value)):
        unit = _UNITS.get(m.group(2) or "s")
        if unit is None:
            raise ConfigError(f"rate unit must be /s, /m or /h, got {value!r}")
        per_second = float(m.group(1)) / unit
    else:
        raise ConfigError(f"rate must be a number per second or like '100/s', got {value!r}")
    if not math.isfinite(per_second) or not 0 < per_second <= MAX_RATE:
        raise ConfigError(f"rate must be > 0 and at most {MAX_RATE:,.0f}/s, got {value!r}")
    return per_second


def check_concurrency(value: object) -> int:
    """A concurrency limit: a whole number from 1 to MAX_CONCURRENCY (the column is a 32-bit int)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_CONCURRENCY:
        raise ConfigError(f"concurrency must be a whole number from 1 to {MAX_CONCURRENCY:,}, got {value!r}")
    return value


def default_burst(rate: float) -> float:
    """The bucket size when none is given: a tenth of a second's worth, at least one job."""
    return max(1.0, rate / 10.0)


def checked_rate(rate: float | str | None, burst: float | None) -> tuple[float | None, float | None]:
    """(rate per second, burst) validated, the burst defaulted; (None, None) without a rate."""
    if rate is None:
        return None, None
    per_second = parse_rate(rate)
    burst = default_burst(per_second) if burst is None else burst
    if isinstance(burst, bool) or not isinstance(burst, int | float) or not math.isfinite(burst) or burst < 1:
        raise ConfigError(f"burst must be a number >= 1, got {burst!r}")
    return per_second, float(burst)


def set_limit(conn: psycopg.Connection, queue: str, *, concurrency: int | None, rate: float | str | None,
              burst: float | None = None, actor: str = "") -> None:
    """Set (replace) `queue`'s global limits; with neither, it has no global limit (its per-tenant
    limits, if any, stay)."""
    if concurrency is not None:
        check_concurrency(concurrency)
    per_second, burst = checked_rate(rate, burst)
    conn.execute(queries(_SQL).upsert_global, {"queue": queue, "concurrency": concurrency, "rate": per_second,
                                               "burst": burst, "actor": actor})
    conn.execute(queries(_SQL).drop_if_unlimited, {"queue": queue})


def set_tenant_limit(conn: psycopg.Connection, queue: str, *, concurrency: int | None, rate: float | str | None,
                     burst: float | None = None, actor: str = "") -> None:
    """Set (replace) `queue`'s per-tenant limits: each tenant at most `concurrency` running (its jobs'
    weights summed) and `rate` started per second ("10/s"; bucket `burst`, default rate/10, at least 1).
    With neither, the queue has no per-tenant limit (its global limits, if any, stay). Everything is
    checked before anything is written: a bad value raises ConfigError and changes nothing."""
    if concurrency is not None:
        check_concurrency(concurrency)
    if rate is None and burst is not None:  # a burst alone would be dropped without a word
        raise ConfigError("a per-tenant burst needs a per-tenant rate")
    per_second, burst = checked_rate(rate, burst)
    conn.execute(queries(_SQL).upsert_per_tenant, {"queue": queue, "concurrency": concurrency,
                                                   "rate": per_second, "burst": burst, "actor": actor})
    conn.execute(queries(_SQL).drop_if_unlimited, {"queue": queue})


def clear_limit(conn: psycopg.Connection, queue: str) -> bool:
    """Remove every limit of `queue`, global and per-tenant; True if it had some."""
    row = conn.execute(queries(_SQL).delete_limits, {"queue": queue}).fetchone()
    return bool(row and row[0])


def list_limits(conn: psycopg.Connection) -> list[QueueLimit]:
    """Every limited queue, with its running weight now."""
    return [QueueLimit(r[0], r[1], r[2], r[3], int(r[6]), r[5], r[7], r[8], r[9])
            for r in conn.execute(queries(_SQL).list_limits)]


def tenants_at_limit(conn: psycopg.Connection, queue: str, limit: int = 20) -> list[TenantAtLimit]:
    """The tenants of `queue` holding some of its per-tenant limits now, those at the limit first."""
    rows = conn.execute(queries(_SQL).tenants_at_limit, {"queue": queue, "limit": limit}).fetchall()
    return [TenantAtLimit(r[0], int(r[1]), int(r[2])) for r in rows]


def apply_task_limits(conn: psycopg.Connection, tasks: Sequence[Any]) -> list[str]:
    """Write the limits declared with @task(concurrency=, rate=) (a worker does this at start).

    The code is the source of truth for such a queue: a limit changed with the CLI or the
    console lasts until the next worker starts. Queues that declare none are left as they are.
    """
    done = []
    for task in tasks:
        if task.concurrency is not None or task.rate is not None:
            set_limit(conn, task.queue, concurrency=task.concurrency, rate=task.rate, actor="@task")
            done.append(task.queue)
    return done


class LimitsView:
    """A worker's view of which of its queues are limited, refreshed at most every REFRESH_SECONDS.

    It only decides whether a claim first locks queue_limits rows (an extra statement): a queue
    limited since the last refresh is left out of claims until then (the claim skips limited
    queues it did not lock), never claimed past its limit.
    """

    def __init__(self, queues: Sequence[str], clock: Any = time.monotonic) -> None:
        self.queues = list(queues)
        self._clock = clock
        self._lock = threading.Lock()
        self._at = -math.inf
        self.limited: frozenset[str] = frozenset()
        self.rates: dict[str, tuple[float, float]] = {}  # queue -> (rate, burst)

    def refresh(self, conn: psycopg.Connection, force: bool = False) -> frozenset[str]:
        """The limited queues, re-read when the view is older than REFRESH_SECONDS (or `force`)."""
        now = self._clock()
        with self._lock:
            if not force and now - self._at < REFRESH_SECONDS:
                return self.limited
            self._at = now
        rows = conn.execute(queries("jobs_claim").limits_of, {"queues": self.queues}).fetchall()
        # the quicker bucket of the two (global, per tenant) sets how soon an idle worker looks again
        self.rates = {r[0]: min(((float(rate), float(burst or 1.0)) for rate, burst in ((r[2], r[3]), (r[4], r[5]))
                                 if rate is not None), key=lambda rb: rb[1] / rb[0])
                      for r in rows if r[2] is not None or r[4] is not None}
        self.limited = frozenset(r[0] for r in rows)
        return self.limited

    def max_wait(self, queues: Sequence[str]) -> float | None:
        """How long an idle worker may sleep before claiming a limited queue again, or None.

        No NOTIFY says that another worker's slot or a token became free, so a lane with a limited
        queue looks again after one token's worth of time (rate) or a quarter second (concurrency).
        """
        waits = [self.rates[q][1] / self.rates[q][0] for q in queues if q in self.rates]
        if any(q in self.limited for q in queues):
            waits.append(0.25)
        return max(0.02, min(waits)) if waits else None
