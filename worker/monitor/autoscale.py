"""The autoscaling signal: how many worker processes each queue needs now (`skiplock_desired_workers`).

Little's law: a queue receiving `arrival` jobs/s that each hold a slot for `service` seconds keeps
arrival x service slots busy. A backlog must also go within the target wait, which adds
backlog / target_wait jobs/s for as long as it lasts. Processes of `concurrency` slots are asked
to run at `occupancy` (80%) of them, leaving room for bursts:

    desired = ceil((arrival + backlog / target_wait) x service / (concurrency x occupancy))

    >>> desired_workers(arrival=100, service=0.05, concurrency=10, backlog=0, target_wait=10)
    1
    >>> desired_workers(arrival=1000, service=0.05, concurrency=10, backlog=0, target_wait=10)
    7
    >>> desired_workers(arrival=0, service=0.05, concurrency=10, backlog=0, target_wait=10)
    0

Damping (`Damper`): the published value rises at once (a backlog is waiting) but falls only once
the lower value has held for `hold` seconds, so a brief lull does not scale away workers that the
next burst needs. The arrival rate itself is averaged over the last one to two minutes (job_stats
is kept per minute). A Kubernetes HPA or KEDA adds its own stabilisation window on top.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import psycopg

TARGET_WAIT = 10.0  # seconds: a backlog should be gone within this
OCCUPANCY = 0.8  # busy share of each process's slots the sizing aims for
HOLD = 120.0  # seconds a lower value must hold before the published one falls
DEFAULT_CONCURRENCY = 10  # slots per process when no worker is live to say (SKIPLOCK_CONCURRENCY's default)


def desired_workers(*, arrival: float, service: float, concurrency: float, backlog: float,
                    target_wait: float = TARGET_WAIT, occupancy: float = OCCUPANCY) -> int:
    """Worker processes a queue needs (see the module docstring); 0 when there is nothing to do."""
    rate = max(arrival, 0.0) + max(backlog, 0.0) / target_wait
    if rate <= 0 or service <= 0:
        return 0 if backlog <= 0 else 1
    return max(1, math.ceil(round(rate * service / (concurrency * occupancy), 9)))


@dataclass
class Damper:
    """Per-queue hysteresis: up at once, down only after `hold` seconds below the published value."""

    hold: float = HOLD
    _published: dict[str, int] = field(default_factory=dict)
    _lower_since: dict[str, float] = field(default_factory=dict)

    def update(self, queue: str, raw: int, now: float) -> int:
        """The value to publish for `queue`, given this scrape's raw value at time `now` (seconds)."""
        current = self._published.get(queue)
        if current is None or raw >= current:
            self._published[queue] = raw
            self._lower_since.pop(queue, None)
            return raw
        since = self._lower_since.setdefault(queue, now)
        if now - since >= self.hold:
            self._published[queue] = raw
            self._lower_since.pop(queue, None)
        return self._published[queue]


# Finished jobs per queue over the last complete minute and the current one, with the seconds
# that window covers (60 to 120): the arrival rate, for a queue that keeps up.
RECENT_RATE = """
SELECT queue, sum(completed + retried + failed + dead)::float8,
       extract(epoch FROM now() - (date_trunc('minute', now()) - interval '1 minute'))::float8
  FROM job_stats
 WHERE minute >= date_trunc('minute', now()) - interval '1 minute'
 GROUP BY queue
"""
# Mean handler run time over the workers' histograms, and the live workers' slots per process.
SERVICE = "SELECT coalesce(sum(total_sum) / nullif(sum(total_count), 0), 0) FROM worker_latency " \
          "WHERE metric = 'handler'"
SLOTS = "SELECT avg(concurrency) FROM workers WHERE last_seen > now() - interval '30 seconds'"
READY = "SELECT queue, count(*) FROM jobs WHERE status = 'queued' AND run_at <= now() GROUP BY queue"


@dataclass
class QueueLoad:
    """What the sizing of one queue is computed from."""

    queue: str
    arrival: float  # jobs/s
    backlog: int  # ready jobs
    service: float  # seconds per job
    concurrency: float  # slots per process
    desired: int


def queue_loads(conn: psycopg.Connection, ready: dict[str, int] | None = None, *,
                target_wait: float = TARGET_WAIT) -> list[QueueLoad]:
    """Every queue with recent work or a backlog, and its raw desired worker count.

    `ready`: ready counts already read (the metrics scrape has them); else they are counted here."""
    rates = {q: n / max(secs, 1.0) for q, n, secs in conn.execute(RECENT_RATE)}
    if ready is None:
        ready = {q: int(n) for q, n in conn.execute(READY)}
    row = conn.execute(SERVICE).fetchone()
    service = float(row[0]) if row and row[0] else 0.0
    row = conn.execute(SLOTS).fetchone()
    concurrency = float(row[0]) if row and row[0] else float(DEFAULT_CONCURRENCY)
    loads = []
    for queue in sorted(set(rates) | {q for q, n in ready.items() if n}):
        arrival, backlog = rates.get(queue, 0.0), ready.get(queue, 0)
        loads.append(QueueLoad(queue, arrival, backlog, service, concurrency,
                               desired_workers(arrival=arrival, service=service, concurrency=concurrency,
                                               backlog=backlog, target_wait=target_wait)))
    return loads
