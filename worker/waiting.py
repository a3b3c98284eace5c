"""An idle worker's waiter rows: they ask the insert trigger for a NOTIFY (migration 014).

The claim loop enters the waiting state when a pass claims less than it asked for, and leaves it
when a claim fills a whole batch. Only the transitions write: a busy worker writes nothing, and
an idle one writes once. While no worker waits, producers commit without the NOTIFY's
cluster-wide commit lock. A failed write only costs latency: polling stays the truth.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from skiplock import queries
from skiplock.status import LIVE_WORKER_SECONDS

log = logging.getLogger("skiplock.waiting")


class Waiting:
    """This worker's waiter rows, written only when the state changes."""

    def __init__(self, connection: Callable[[], contextlib.AbstractContextManager[Any]], worker_id: str,
                 queues: list[str]) -> None:
        self.connection = connection
        self.worker_id = worker_id
        self.queues = queues
        self.registered = False
        self._lock = threading.Lock()

    def enter(self) -> bool:
        """Register as waiting; True when this call wrote the rows (the caller then claims once more)."""
        with self._lock:
            if self.registered:
                return False
            try:
                with self.connection() as conn:
                    conn.execute(queries.WAITER_REGISTER, {"id": self.worker_id, "queues": self.queues})
            except Exception as exc:  # no rows: no NOTIFY for us, the poll interval still finds the work
                log.debug("could not register as a waiter: %s", exc)
                return False
            self.registered = True
            return True

    def leave(self) -> None:
        """Busy with a backlog: stop asking for wake-ups."""
        with self._lock:
            if not self.registered:
                return
            try:
                with self.connection() as conn:
                    conn.execute(queries.WAITER_UNREGISTER, {"id": self.worker_id})
            except Exception as exc:
                log.debug("could not unregister as a waiter: %s", exc)
                return
            self.registered = False

    def forget(self) -> None:
        """The server may have lost the unlogged rows (a restart): register again at the next idle pass."""
        with self._lock:
            self.registered = False


def prune_gone(conn: Any) -> int:
    """The reaper's part: delete waiter rows of workers that are gone."""
    return int(conn.execute(queries.WAITER_PRUNE, {"live": LIVE_WORKER_SECONDS}).rowcount or 0)
