"""Lanes: the worker's queues split by handler kind, each with its own slots and claim sizing.

Sync handlers run in the thread pool (SKIPLOCK_CONCURRENCY slots), async handlers on the event
loop (SKIPLOCK_ASYNC_CONCURRENCY slots). A claim is made per lane, for that lane's queues and
sized from that lane's free slots: a worker whose threads are all busy still fills its free
async slots, and the reverse. Each lane has its own ClaimSizing (worker/runtime/prefetch.py), because
the two kinds have different slot counts and handler times.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from skiplock.core.plumbing.config import Settings
from skiplock.core.registry import Task
from skiplock.runtime.prefetch import ClaimSizing

SYNC = "sync"
ASYNC = "async"


@dataclass
class Lane:
    """The queues whose handlers run one way, and how many of their claimed jobs are held."""

    kind: str
    slots: int
    queues: list[str]
    leases: list[float]
    sizing: ClaimSizing
    plan: tuple[int, int] = (0, 1)  # (capacity, threshold) from sizing.plan(), re-planned per turn
    held: int = 0  # claimed and not finished: running or waiting for a slot
    # The lane's last claim found no job. Until one finds some, a finishing job wakes the claim loop
    # only when it is the lane's last (not at the claim threshold), and the lane, once idle,
    # registers as a waiter before its next claim instead of after it (Claimer.run_once): the
    # claim after registering, which an idle spell needs anyway, is then its only empty claim.
    # A batch of jobs sent to two idle workers (tests/benchmarks/bursts.py) costs fewer claims this
    # way (pg_stat_statements), and less CPU in the workers and in PostgreSQL per batch. A NOTIFY or
    # the poll interval still wakes the loop, and every wake-up of the loop claims: this only drops
    # claims that follow one that found nothing.
    # The listener's claim on a NOTIFY sets it too when it found fewer jobs than it asked for (it
    # left the queue empty) and they are short (Claimer.on_notify).
    found_nothing: bool = False
    # held while claiming for this lane: the claim loop, or the listener for an idle lane on a NOTIFY
    claiming: threading.Lock = field(default_factory=threading.Lock)


def build_lanes(settings: Settings, tasks: dict[str, Task], queues: list[str],
                leases: list[float]) -> list[Lane]:
    """One lane per handler kind present among `queues` (sync first), in the queues' order."""
    lanes: list[Lane] = []
    for kind, slots in ((SYNC, settings.concurrency), (ASYNC, settings.async_concurrency)):
        chosen = [(q, lease) for q, lease in zip(queues, leases, strict=True)
                  if tasks[q].is_async == (kind == ASYNC)]
        if chosen:
            sizing = ClaimSizing(slots, settings.batch_size, settings.prefetch)
            lanes.append(Lane(kind, slots, [q for q, _ in chosen], [lease for _, lease in chosen],
                              sizing, sizing.plan()))
    return lanes
