"""Small test utilities: waiting on conditions with a deadline (never a bare sleep)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

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


def scalar(conn, sql: str, params: object = None):
    """First column of the first row."""
    row = conn.execute(sql, params).fetchone()
    return None if row is None else row[0]


def race(count: int, body: Callable[[int], None]) -> None:
    """Run body(0..count-1) in `count` threads that start together (a barrier); re-raise the first error."""
    import threading

    errors: list[BaseException] = []
    barrier = threading.Barrier(count)

    def run(index: int) -> None:
        try:
            barrier.wait()
            body(index)
        except BaseException as exc:  # collected, then raised in the test's own thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def thread_connection(local: Any, application_name: str) -> Any:
    """A handler thread's own autocommit connection to DATABASE_URL, made again if it broke."""
    import os

    import psycopg

    conn = getattr(local, "conn", None)
    if conn is None or conn.closed or conn.broken:
        conn = psycopg.connect(os.environ["DATABASE_URL"], autocommit=True, application_name=application_name)
        local.conn = conn
    return conn


def worker_pool_settings(conn, pool: str, query: str) -> tuple[Any, ...] | None:
    """Run an in-process Worker until it has run and acked one job, then `query` on its pool named
    `pool` (`claim_pool`, `rows_pool`): the session settings a real worker's connection carries."""
    import threading

    from skiplock.core.plumbing.config import load_settings
    from skiplock.core.registry import Registry, Task
    from skiplock.runtime.runner import Worker

    registry = Registry()
    registry.add(Task("t1", lambda payload: None, wants_job=False))
    worker = Worker(load_settings(), registry=registry, queues=["t1"])
    thread = threading.Thread(target=worker.run, kwargs={"install_signals": False}, daemon=True)
    thread.start()
    try:
        conn.execute("INSERT INTO jobs (queue, payload) VALUES ('t1', '{}')")
        wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs") == 0, timeout=60, message="the job to be acked")
        with getattr(worker, pool).connection() as pooled:
            found = pooled.execute(query).fetchone()
    finally:
        worker.request_stop()
        thread.join(timeout=60)
    assert not thread.is_alive()
    return found
