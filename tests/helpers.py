"""Small test utilities: waiting on conditions with a deadline (never a bare sleep)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(condition: Callable[[], T], timeout: float = 30.0, message: str = "condition",
             interval: float = 0.02) -> T:
    """Poll `condition` until it returns something truthy; fail the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last: T = condition()
    while not last:
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message} (last value: {last!r})")
        time.sleep(interval)
        last = condition()
    return last


def scalar(conn, sql: str, params: object = None):  # type: ignore[no-untyped-def]
    """First column of the first row."""
    row = conn.execute(sql, params).fetchone()
    return None if row is None else row[0]
