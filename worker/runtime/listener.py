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
                 on_taken: Callable[[], None] | None = None,
                 on_notify: Callable[[psycopg.Connection], bool] | None = None,
                 configure: Callable[[psycopg.Connection], None] | None = None) -> None:
        self.url = url
        # called with this connection for a NOTIFY about our queues, before the claim loop is
        # woken: the worker claims for an idle lane right here (see Worker._claim_on_notify)
        self.on_notify = on_notify
        self.configure = configure  # the connection's session settings for those claims
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
                        if self.configure is not None:
                            self.configure(conn)
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
            # stop_after=1: the generator holds the connection's lock, and on_notify uses the
            # connection; what arrives during that claim waits in psycopg's backlog for the next turn
            ours = False
            for note in conn.notifies(timeout=1.0, stop_after=1):
                # "" is the insert trigger's "some queue has new work" (migrations 014, 015); a
                # queue's own name comes from retry, run-now and resume
                if note.payload == "":
                    if self.on_taken is not None:
                        self.on_taken()
                    ours = True
                elif note.payload in self.queues:
                    ours = True
            # on_notify True: it started jobs, and their start wakes the claim loop instead
            if ours and not (self.on_notify is not None and self._notify_claim(conn)):
                self.wake()
            if time.monotonic() - last_check >= HEALTH_CHECK_SECONDS:
                # raises if the server or the network is gone; the deadline covers a silent network,
                # where no error would ever come
                with WATCHDOG.guard(conn, self.deadline):
                    conn.execute("SELECT 1")
                last_check = time.monotonic()

    def _notify_claim(self, conn: psycopg.Connection) -> bool:
        """Run on_notify under the deadline. A database error goes up (the connection is reconnected);
        any other error is logged and the listener goes on: the claim loop, woken next, claims anyway."""
        assert self.on_notify is not None
        try:
            with WATCHDOG.guard(conn, self.deadline):
                return self.on_notify(conn)
        except psycopg.Error:
            raise
        except Exception:
            log.exception("claiming on a NOTIFY failed; the claim loop claims instead")
            return False
