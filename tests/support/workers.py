"""Real `python -m skiplock` worker processes for tests (the `spawn_worker` fixture makes them)."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import TextIO

REPO = Path(__file__).resolve().parents[2]


class WorkerProcess:
    """A real `python -m skiplock` subprocess with its log in a file."""

    def __init__(self, proc: subprocess.Popen[bytes], log_path: Path) -> None:
        self.proc = proc
        self.log_path = log_path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill(self) -> None:
        """SIGKILL: no cleanup, no release; exactly a crash."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def terminate(self, timeout: float = 60) -> int:
        """SIGTERM and wait for exit; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)


def worker_env(db_url: str, **settings: str) -> dict[str, str]:
    """Environment for a worker subprocess against `db_url`."""
    # nor DJANGO_SETTINGS_MODULE: a Django test of this process may have set it, and it makes the worker
    # set Django up (a test that wants that passes it in `settings`)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKIPLOCK_") and k != "DJANGO_SETTINGS_MODULE"}
    env.update({"DATABASE_URL": db_url, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1",
                "SKIPLOCK_TASKS": "tests.support.handlers"})
    env.update(settings)
    return env


class WorkerSlots:
    """At most `slots` tests at a time, across pytest-xdist's processes, run worker processes on the
    shared test server: each such test holds 10-20 connections (a worker's pools and listener), and
    four of them at once would pass the suite's budget (tests/support/connection_budget.py).

    A slot is an exclusive lock (fcntl.flock) on one of `slots` files in a folder all the run's
    processes share; the lock goes with its process, so a crashed xdist worker frees its slot."""

    def __init__(self, folder: Path, slots: int) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.paths = [folder / f"worker-slot-{i}.lock" for i in range(slots)]

    def acquire(self, timeout: float = 900.0) -> TextIO:
        """Block until a slot is free; returns the open file that holds it (close it to release)."""
        import fcntl
        import time

        deadline = time.monotonic() + timeout
        while True:
            for path in self.paths:
                handle = open(path, "w")  # noqa: SIM115 - held open as the lock, closed by release()
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    return handle
                except BlockingIOError:
                    handle.close()
            if time.monotonic() > deadline:
                raise TimeoutError(f"no worker slot free after {timeout:.0f} s")
            time.sleep(0.05)  # polling a lock file: no event to wait on across processes
