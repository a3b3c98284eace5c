"""LISTEN/NOTIFY waker: wakes the claim loop when a job is inserted into one of our queues.

Polling stays the source of truth; this only makes an idle worker start sooner. The connection
is health-checked while idle; when it is lost, the listener reconnects with backoff, listens
again and wakes the loop once, since notifications sent meanwhile are gone.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import psycopg

from skiplock.core.db import connect
from skiplock.core.deadline import WATCHDOG, db_deadline

log = logging.getLogger("skiplock.listener")

CHANNEL = "skiplock_jobs"
HEALTH_CHECK_SECONDS = 5.0


class Listener:
    """Runs in its own thread; call `start()` once and `stop()` at shutdown."""

    def __init__(self, url: str, queues: set[str], wake: Callable[[], None], app_name: str,
                 on_connect: Callable[[], None] | None = None,
                 on_taken: Callable[[], None] | None = None) -> None:
        self.url = url
        # called for the insert trigger's NOTIFY: the producer took the waiter rows (migration 015)
        self.on_taken = on_taken
        # called on every (re)connection: a restarted server has lost the unlogged waiter rows
        self.on_connect = on_connect
        self.queues = queues
        self.wake = wake
        self.app_name = app_name
        self.connected = threading.Event()
        self.reconnects = 0
        self.deadline = db_deadline()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="skiplock-listener", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=3.0)

    def _run(self) -> None:
        delay = 0.1
        while not self._stop.is_set():
            try:
                with connect(self.url, self.app_name, autocommit=True) as conn:
                    with WATCHDOG.guard(conn, self.deadline):
                        conn.execute(f"LISTEN {CHANNEL}")
                    self.connected.set()
                    delay = 0.1
                    if self.on_connect is not None:
                        self.on_connect()
                    self.wake()  # anything sent while we were not listening is lost; poll once now
                    self._listen(conn)
            except psycopg.Error as exc:
                if self._stop.is_set():
                    break
                self.connected.clear()
                self.reconnects += 1
                log.warning("listener connection lost (%s); reconnecting in %.1fs",
                            str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__,
                            delay)
                self._stop.wait(delay)
                delay = min(delay * 2, 5.0)
        self.connected.clear()

    def _listen(self, conn: psycopg.Connection) -> None:
        last_check = time.monotonic()
        while not self._stop.is_set():
            for note in conn.notifies(timeout=1.0):
                # "" is the insert trigger's "some queue has new work" (migrations 014, 015); a
                # queue's own name comes from retry, run-now and resume
                if note.payload == "":
                    if self.on_taken is not None:
                        self.on_taken()
                    self.wake()
                elif note.payload in self.queues:
                    self.wake()
            if time.monotonic() - last_check >= HEALTH_CHECK_SECONDS:
                # raises if the server or the network is gone; the deadline covers a silent network,
                # where no error would ever come
                with WATCHDOG.guard(conn, self.deadline):
                    conn.execute("SELECT 1")
                last_check = time.monotonic()
