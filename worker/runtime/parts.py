"""What a worker's parts share, in one frozen object: WorkerParts.

The claimer, the executor, the acker, the heartbeat and the shutdown each take a WorkerParts and
at most a few arguments of their own, instead of the same nine to sixteen arguments each. The
Worker (worker/runtime/runner.py) builds it once; a test builds one with the fields it needs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from skiplock.core.plumbing.config import Settings
from skiplock.runtime.flow import WorkerFlow
from skiplock.runtime.job_logs import LiveLogs
from skiplock.runtime.job_stacks import RunningStacks
from skiplock.runtime.latency import LatencyRecorder
from skiplock.runtime.ledger import Counters, HeldJobs
from skiplock.runtime.signals import Signals

Connect = Callable[[], AbstractContextManager[Any]]


@dataclass(frozen=True)
class WorkerParts:
    """One worker's shared state and connections (each field says who changes it)."""

    settings: Settings
    worker_id: str
    ledger: HeldJobs  # the jobs held and the lanes' counts: changed only through its methods
    flow: WorkerFlow  # the tasks, payload versions, tenant cursors, limited queues
    rows_connection: Connect  # acks, heartbeats and releases: one connection of their own (see Worker)
    # The ack, the heartbeat and the shutdown release lock the same running rows from different
    # connections, in different orders: concurrently they deadlock. One at a time per worker, they cannot.
    row_writes: threading.Lock = field(default_factory=threading.Lock)
    signals: Signals = field(default_factory=Signals)
    counters: Counters = field(default_factory=Counters)
    latency: LatencyRecorder = field(default_factory=LatencyRecorder)
    job_logs: LiveLogs = field(default_factory=LiveLogs)  # the runs' log lines not yet written (heartbeat, acker)
    stacks: RunningStacks = field(default_factory=RunningStacks)  # where runs run, for a stack asked (heartbeat)
