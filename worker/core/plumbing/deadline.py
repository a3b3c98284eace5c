"""Client-side deadlines for database round trips: a connection that goes silent cannot hang a thread.

TCP keepalives do not catch every silent loss. Behind a NAT, a cloud load balancer or a proxy that
stops forwarding, the near end of the TCP connection stays healthy (keepalive probes are answered by
the middlebox) while no reply will ever come, and libpq waits forever for it. So every borrow of a
pooled connection, and the listener's health check, runs under a deadline kept by one watchdog
thread per process: when a borrow outlives it, the watchdog shuts the socket down. libpq then sees
"server closed the connection", the operation raises psycopg.OperationalError, and the caller's
ordinary reconnect path takes over (the pool discards the broken connection and opens a new one).

SKIPLOCK_DB_DEADLINE (seconds, default 30) bounds how long one borrow may take; it is also the
bound on how long a cut-off worker goes unnoticed.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

log = logging.getLogger("skiplock.deadline")

DEFAULT_DEADLINE = 30.0


def db_deadline() -> float:
    """SKIPLOCK_DB_DEADLINE, validated like every setting (0 turns deadlines off)."""
    from skiplock.core.plumbing.config import _number

    return _number("SKIPLOCK_DB_DEADLINE", os.environ.get("SKIPLOCK_DB_DEADLINE", str(DEFAULT_DEADLINE)),
                   float, 0, "seconds >= 0 (0 = no client-side deadline)")


class Watchdog:
    """Shuts down the socket of any guarded connection whose deadline passes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._active: dict[int, tuple[Any, float]] = {}  # token -> (connection, deadline)
        self._heap: list[tuple[float, int]] = []
        self._tokens = itertools.count()
        self._thread: threading.Thread | None = None
        self.fired = 0  # how many sockets it shut down (tests and logs read it)

    @contextlib.contextmanager
    def guard(self, conn: Any, seconds: float) -> Iterator[None]:
        """Run the block with `conn` under a deadline of `seconds` (<= 0: no deadline)."""
        if seconds <= 0:
            yield
            return
        token = next(self._tokens)
        deadline = time.monotonic() + seconds
        with self._lock:
            self._active[token] = (conn, deadline)
            # Wake the watchdog only when it sleeps past this deadline: it is idle (empty heap) or
            # this deadline is earlier than every one it knows. Otherwise it wakes in time anyway,
            # at the earliest deadline, and drops the entries of borrows that ended. Notifying on
            # every borrow woke this thread once per claim, ack and heartbeat: a thread switch
            # and a GIL hand-off in the middle of the round trip being guarded.
            sleeps_past = not self._heap or deadline < self._heap[0][0]
            heapq.heappush(self._heap, (deadline, token))
            self._ensure_thread()
            if sleeps_past:
                self._wake.notify()
        try:
            yield
        finally:
            with self._lock:
                # removed under the lock: once the block is over the watchdog can no longer touch this
                # connection, which the pool may already be lending to someone else
                self._active.pop(token, None)

    def _ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="skiplock-db-watchdog", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        with self._lock:
            while True:
                while self._heap and self._heap[0][1] not in self._active:
                    heapq.heappop(self._heap)  # finished in time
                if not self._heap:
                    self._wake.wait()
                    continue
                deadline, token = self._heap[0]
                wait = deadline - time.monotonic()
                if wait > 0:
                    self._wake.wait(wait)
                    continue
                heapq.heappop(self._heap)
                conn, _ = self._active.pop(token)
                self._cut(conn)

    def _cut(self, conn: Any) -> None:
        """Shut the connection's socket down so that the thread blocked on it gets an error now."""
        try:
            fd = conn.pgconn.socket
            # a duplicate descriptor of the same socket: shutdown() acts on the socket itself, and
            # closing our duplicate leaves libpq's descriptor to libpq
            with socket.socket(fileno=os.dup(fd)) as sock:
                sock.shutdown(socket.SHUT_RDWR)
            self.fired += 1
            log.warning("a database round trip outlived its deadline (SKIPLOCK_DB_DEADLINE); the connection "
                        "is cut so this process can reconnect (a silent network, a frozen proxy or a failover)")
        except Exception as exc:  # closed already, or not a socket any more: nothing is waiting on it
            log.debug("deadline: could not cut connection: %s", exc)


WATCHDOG = Watchdog()
