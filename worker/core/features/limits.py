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

_UNITS = {"s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
REFRESH_SECONDS = 1.0  # how stale a worker's view of which queues are limited may be (see LimitsView)

UPSERT_LIMIT = """
INSERT INTO queue_limits AS l (queue, concurrency, rate, burst, tokens, refilled_at, updated_by)
VALUES (%(queue)s, %(concurrency)s::int, %(rate)s::float8, %(burst)s::float8, coalesce(%(burst)s::float8, 0), now(),
        %(actor)s)
ON CONFLICT (queue) DO UPDATE
   SET concurrency = EXCLUDED.concurrency, rate = EXCLUDED.rate, burst = EXCLUDED.burst,
       tokens = least(coalesce(EXCLUDED.burst, 0), l.tokens), updated_at = now(), updated_by = EXCLUDED.updated_by
RETURNING queue
"""
DELETE_LIMIT = "DELETE FROM queue_limits WHERE queue = %(queue)s RETURNING queue"
# Every limit, with the queue's running count (what the console and /metrics show).
LIST_LIMITS = """
SELECT l.queue, l.concurrency, l.rate, l.burst, l.updated_at, l.updated_by,
       (SELECT count(*) FROM jobs r WHERE r.status = 'running' AND r.queue = l.queue) AS running
  FROM queue_limits l
 WHERE l.concurrency IS NOT NULL OR l.rate IS NOT NULL
 ORDER BY l.queue
"""


@dataclass(frozen=True)
class QueueLimit:
    """One queue's limits as stored."""

    queue: str
    concurrency: int | None
    rate: float | None  # claims per second
    burst: float | None  # token bucket size: the tolerance over any one-second window
    running: int = 0
    updated_by: str = ""


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


def set_limit(conn: psycopg.Connection, queue: str, *, concurrency: int | None, rate: float | str | None,
              burst: float | None = None, actor: str = "") -> None:
    """Set (replace) `queue`'s limits; with neither limit the queue becomes unlimited."""
    if concurrency is None and rate is None:
        clear_limit(conn, queue)
        return
    if concurrency is not None:
        check_concurrency(concurrency)
    if rate is not None:
        rate = parse_rate(rate)
        burst = default_burst(rate) if burst is None else float(burst)
        if not math.isfinite(burst) or burst < 1:
            raise ConfigError(f"burst must be >= 1, got {burst}")
    else:
        burst = None
    conn.execute(UPSERT_LIMIT, {"queue": queue, "concurrency": concurrency, "rate": rate, "burst": burst,
                                "actor": actor})


def clear_limit(conn: psycopg.Connection, queue: str) -> bool:
    """Remove `queue`'s limits; True if it had some."""
    return conn.execute(DELETE_LIMIT, {"queue": queue}).fetchone() is not None


def list_limits(conn: psycopg.Connection) -> list[QueueLimit]:
    """Every limited queue, with its running count now."""
    return [QueueLimit(r[0], r[1], r[2], r[3], int(r[6]), r[5]) for r in conn.execute(LIST_LIMITS)]


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
        from skiplock.core.sql import queries

        rows = conn.execute(queries("jobs_claim").limits_of, {"queues": self.queues}).fetchall()
        self.rates = {r[0]: (float(r[2]), float(r[3] or 1.0)) for r in rows if r[2] is not None}
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
