"""The client-side deadline's watchdog (worker/core/plumbing/deadline.py) is woken only when it would sleep past a
new deadline; a shorter deadline that starts while a longer one is guarded still cuts in time."""

from __future__ import annotations

import socket
import threading
from types import SimpleNamespace

from skiplock.core.plumbing.deadline import Watchdog


def _conn(sock: socket.socket) -> SimpleNamespace:
    return SimpleNamespace(pgconn=SimpleNamespace(socket=sock.fileno()))


def test_a_shorter_deadline_under_a_longer_one_is_still_cut() -> None:
    dog = Watchdog()
    long_a, long_b = socket.socketpair()
    short_a, short_b = socket.socketpair()
    got: list[bytes] = []
    with long_a, long_b, short_a, short_b, dog.guard(_conn(long_a), 60), dog.guard(_conn(short_a), 0.2):
        reader = threading.Thread(target=lambda: got.append(short_a.recv(1)))
        reader.start()
        reader.join(30)  # the cut ends the recv; a missed wake-up would leave it blocked for the test's 30 s
        assert not reader.is_alive()
    assert got == [b""]  # shut down, not answered
    assert dog.fired == 1  # the long borrow ended in time: not cut


def test_borrows_with_later_deadlines_do_not_wake_the_watchdog() -> None:
    dog = Watchdog()
    a, b = socket.socketpair()
    wakes = 0
    original = dog._wake.notify

    def counting_notify(n: int = 1) -> None:
        nonlocal wakes
        wakes += 1
        original(n)

    dog._wake.notify = counting_notify  # type: ignore[method-assign]
    with a, b, dog.guard(_conn(a), 60):  # the first: the watchdog learns a deadline
        for _ in range(100):
            with dog.guard(_conn(a), 60):  # each later than the one it sleeps until
                pass
    assert wakes == 1
    assert dog.fired == 0
