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
from dataclasses import dataclass

import psycopg

from skiplock.core.features import handoff
from skiplock.core.plumbing.db import RECONNECT_MAX_DELAY, connect
from skiplock.core.plumbing.deadline import WATCHDOG, db_deadline

log = logging.getLogger("skiplock.listener")

CHANNEL = "skiplock_jobs"
HEALTH_CHECK_SECONDS = 5.0


@dataclass(frozen=True)
class ListenerHooks:
    """What the listener calls back into; each is optional (a bare listener only wakes the claim loop)."""

    # called on every (re)connection with this connection and the hand-off key it holds (None
    # without on_handoff): a restarted server has lost the unlogged waiter rows, and tokens
    # must carry the new key
    on_connect: Callable[[psycopg.Connection, int | None], None] | None = None
    # called for the insert trigger's NOTIFY: the producer took the waiter rows (migration 015)
    on_taken: Callable[[], None] | None = None
    # called with this connection for a NOTIFY about our queues, before the claim loop is
    # woken: the worker claims for an idle lane right here (see Claimer.on_notify)
    on_notify: Callable[[psycopg.Connection], bool] | None = None
    configure: Callable[[psycopg.Connection], None] | None = None  # the connection's session settings for those claims
    # called with this connection and a hand-off NOTIFY's payload (migration 020): False when it was another
    # worker's; True when it was ours and went to the sync lane, whose handler thread then wakes
    # the claim loop; None when it was ours otherwise (the listener wakes the loop)
    on_handoff: Callable[[psycopg.Connection, str], bool | None] | None = None


class Listener:
    """Runs in its own thread; call `start()` once and `stop()` at shutdown."""

    def __init__(self, url: str, queues: set[str], wake: Callable[[], None], app_name: str,
                 hooks: ListenerHooks = ListenerHooks()) -> None:
        self.url = url
        self.on_handoff = hooks.on_handoff
        self.on_notify = hooks.on_notify
        self.configure = hooks.configure
        self.on_taken = hooks.on_taken
        self.on_connect = hooks.on_connect
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
                        key = None
                        if self.on_handoff is not None:
                            # listening before the key is taken: a hand-off made to this key is
                            # committed after the LISTEN, so it is delivered here
                            conn.execute(f"LISTEN {handoff.HANDOFF_CHANNEL}")
                            key = handoff.take_listen_key(conn)
                        if self.on_connect is not None:
                            self.on_connect(conn, key)
                    self.connected.set()
                    delay = 0.1
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
                delay = min(delay * 2, RECONNECT_MAX_DELAY)
        self.connected.clear()

    def _listen(self, conn: psycopg.Connection) -> None:
        last_check = time.monotonic()
        while not self._stop.is_set():
            # stop_after=1: the generator holds the connection's lock, and on_notify uses the
            # connection; what arrives during that claim waits in psycopg's backlog for the next turn
            ours = False
            handed: bool | None = False
            for note in conn.notifies(timeout=1.0, stop_after=1):
                if note.channel == handoff.HANDOFF_CHANNEL:
                    handed = self._handoff(conn, note.payload)
                    continue
                # "" is the insert trigger's "some queue has new work" (migrations 014, 015); a
                # queue's own name comes from retry, run-now and resume
                if note.payload == "":
                    if self.on_taken is not None:
                        self.on_taken()
                    ours = True
                elif note.payload in self.queues:
                    ours = True
            # on_notify True: it started jobs, and their start (or their end) wakes the claim loop instead; a job
            # handed to us outside the sync lane (handed None) has no handler thread to do that
            claimed = ours and self.on_notify is not None and self._notify_claim(conn)
            if (ours and not claimed) or handed is None:
                self.wake()
            if time.monotonic() - last_check >= HEALTH_CHECK_SECONDS:
                # raises if the server or the network is gone; the deadline covers a silent network,
                # where no error would ever come
                with WATCHDOG.guard(conn, self.deadline):
                    conn.execute("SELECT 1")
                last_check = time.monotonic()

    def _handoff(self, conn: psycopg.Connection, payload: str) -> bool | None:
        """A hand-off NOTIFY: True when it was ours and a handler thread starts it, None when it was ours
        otherwise (the claim loop must be woken here), False when it was another worker's.
        on_handoff guards its own use of `conn` with the deadline: it rarely has any (tracing), and
        arming the watchdog would wake its thread, competing with the handler's start."""
        assert self.on_handoff is not None
        try:
            started = self.on_handoff(conn, payload)
        except psycopg.Error:
            raise  # the connection is reconnected; the job's release follows (Claimer._listening)
        except Exception:
            # the job stays ours in the database with nobody running it: the reconnect path's
            # release is not coming, so the reaper returns it when its lease ends
            log.exception("could not start a handed-off job; its lease will expire")
            return None
        if started is not False and self.on_taken is not None:
            self.on_taken()  # the producer took our tokens with it
        return started

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
