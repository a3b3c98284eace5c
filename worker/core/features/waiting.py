"""An idle worker's waiter rows: one-shot tokens that ask the insert trigger for a NOTIFY
(migrations 014, 015), and the flag that tells producers to look for them (022).

The claim loop registers when a pass claims less than it asked for and no token of its own is
out. The first producer that commits a job afterwards takes every token and sends one NOTIFY;
the listener then calls `taken()`, and the worker registers again the next time it runs short.
So producers commit without the NOTIFY's cluster-wide commit lock except once per idle spell of
some worker, even while workers keep up with them (each short claim would otherwise keep asking).
A failed write only costs latency: polling stays the truth.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from skiplock.core.sql import queries
from skiplock.core.status import LIVE_WORKER_SECONDS

WAITERS_SQL = queries("waiters")

log = logging.getLogger("skiplock.waiting")


class Waiting:
    """This worker's waiter rows, written only when the state changes."""

    def __init__(self, connection: Callable[[], contextlib.AbstractContextManager[Any]], worker_id: str,
                 queues: list[str], leases: list[float] | None = None, versions: list[int] | None = None) -> None:
        self.connection = connection
        self.worker_id = worker_id
        self.queues = queues
        # per queue, for a producer that hands this worker a job (migration 020)
        self.leases = leases if leases is not None else [0.0] * len(queues)
        self.versions = versions if versions is not None else [1] * len(queues)
        # the listener's advisory lock key while it is connected; None: producers hand us nothing
        self.listen_key: int | None = None
        self.registered = False
        # counts the listener's taken() calls: a NOTIFY that arrives while enter() writes may be
        # for the very token it writes, and then enter() must not believe it is registered
        self._taken = 0
        self._lock = threading.Lock()

    def enter(self) -> bool:
        """Register as waiting; True when this call wrote the rows (the caller then claims once more)."""
        with self._lock:
            if self.registered:
                return False
            taken_before = self._taken
            try:
                with self.connection() as conn:
                    conn.execute(WAITERS_SQL.waiter_register, {
                        "id": self.worker_id, "queues": self.queues, "leases": self.leases,
                        "versions": self.versions, "listen_key": self.listen_key})
                    # a statement of its own, after the tokens' commit (the pool's connections are
                    # autocommit): a producer that sees the flag clear must not miss a token
                    conn.execute(WAITERS_SQL.waiting_flag_set)
            except Exception as exc:  # no rows: no NOTIFY for us, the poll interval still finds the work
                log.debug("could not register as a waiter: %s", exc)
                return False
            self.registered = self._taken == taken_before
            return True

    def taken(self) -> None:
        """A producer's NOTIFY (payload ''): it took the tokens, so register again when idle next.

        If ours was not among them, the next registration finds it still there and writes nothing.
        """
        self._taken += 1  # only the listener thread writes it
        self.registered = False

    def leave(self) -> None:
        """Stop asking for wake-ups (a clean stop)."""
        with self._lock:
            if not self.registered:
                return
            try:
                with self.connection() as conn:
                    conn.execute(WAITERS_SQL.waiter_unregister, {"id": self.worker_id})
            except Exception as exc:
                log.debug("could not unregister as a waiter: %s", exc)
                return
            self.registered = False

    def forget(self) -> None:
        """The server may have lost the unlogged rows (a restart): register again at the next idle pass."""
        with self._lock:
            self.registered = False

    def listening(self, conn: Any, key: int | None) -> None:
        """The listener (re)connected on `conn` holding `key`: tokens from now on carry it, and so do
        the tokens still out (their old key's session is gone, or going)."""
        self.listen_key = key
        self.forget()
        if key is not None:
            conn.execute(WAITERS_SQL.waiter_rekey, {"id": self.worker_id, "listen_key": key})


def prune_gone(conn: Any) -> int:
    """The reaper's part: delete waiter rows of workers that are gone."""
    return int(conn.execute(WAITERS_SQL.waiter_prune, {"live": LIVE_WORKER_SECONDS}).rowcount or 0)
