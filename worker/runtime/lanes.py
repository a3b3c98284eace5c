"""Lanes: the worker's queues split by handler kind, each with its own slots and claim sizing.

Sync handlers run in the thread pool (SKIPLOCK_CONCURRENCY slots), async handlers on the event
loop (SKIPLOCK_ASYNC_CONCURRENCY slots), and each batch handler's queue has a lane of its own, whose
slots are its batch_size (the jobs one call takes). A claim is made per lane, for that lane's queues and
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
BATCH = "batch"  # one lane per batch handler's queue: its jobs are gathered into calls (runtime/batch_runner.py)


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
    # the most jobs one claim takes for this lane: SKIPLOCK_BATCH_SIZE, or a batch handler's batch_size
    # (a batch fills in one claim when its jobs are there)
    most_per_claim: int = 50
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
                  if tasks[q].is_async == (kind == ASYNC) and not tasks[q].is_batch]
        if chosen:
            sizing = ClaimSizing(slots, settings.batch_size, settings.prefetch)
            lanes.append(Lane(kind, slots, [q for q, _ in chosen], [lease for _, lease in chosen],
                              sizing, sizing.plan(), most_per_claim=settings.batch_size))
    for queue, lease in zip(queues, leases, strict=True):
        size = tasks[queue].batch_size
        if size is not None:
            # Room for two more batches beside the one running: the next call's jobs are claimed and
            # waiting when the handler returns, and a claim is under way meanwhile, instead of the next
            # call waiting for a claim to fill it (with one batch of room it waited about as long as it
            # ran).
            sizing = ClaimSizing(size, size, 2 * size)
            lanes.append(Lane(BATCH, size, [queue], [lease], sizing, sizing.plan(), most_per_claim=size))
    return lanes
