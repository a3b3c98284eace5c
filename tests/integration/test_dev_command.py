"""README's run command: `skiplock dev` without DATABASE_URL on an embedded PostgreSQL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.support.helpers import wait_for

pytestmark = pytest.mark.slow


def test_skiplock_dev_runs_demo_on_embedded_postgres(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKIPLOCK_") and k != "DATABASE_URL"}
    env.update({"PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1", "PORT": "0"})
    log_path = tmp_path / "dev.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "skiplock.tools.cli", "dev", "--data-dir", str(tmp_path / "pg")],
                                cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        def output() -> str:
            return log_path.read_text(errors="replace")

        wait_for(lambda: "starting embedded PostgreSQL" in output(), timeout=60, message="embedded postgres")
        wait_for(lambda: "enqueued" in output() and "demo jobs" in output(), timeout=120, message="demo enqueue")
        wait_for(lambda: " ok in " in output(), timeout=60, message="a demo job done")
        wait_for(lambda: "failed, retry in" in output(), timeout=60, message="a retrying demo job")
        wait_for(lambda: "now dead" in output(), timeout=60, message="the demo job that ends dead")
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=60)
    assert (tmp_path / "pg" / "PG_VERSION").exists()


def test_a_line_printed_from_a_signal_handler_during_another_waits_for_it() -> None:
    """honcho prints "SIGINT received" from its signal handler, in the thread that may be printing a
    process's line: the second write must not re-enter the first (it raised RuntimeError)."""
    import io

    from skiplock.tools.dev import SignalSafeOutput

    class Interrupted(io.StringIO):
        """A stream whose first write is interrupted by a 'signal handler' that writes too."""

        def __init__(self) -> None:
            super().__init__()
            self.wrapper: SignalSafeOutput | None = None

        def write(self, text: str) -> int:
            if self.wrapper is not None and text == "worker | job 1 ok":
                wrapper, self.wrapper = self.wrapper, None
                print("system | SIGINT received", file=wrapper, flush=True)  # re-entrant: held back
            return super().write(text)

    stream = Interrupted()
    out = SignalSafeOutput(stream)
    stream.wrapper = out
    print("worker | job 1 ok", file=out, flush=True)
    print("system | sending SIGTERM", file=out, flush=True)
    assert stream.getvalue() == "worker | job 1 ok\nsystem | SIGINT received\nsystem | sending SIGTERM\n"


def test_a_line_printed_from_a_signal_handler_during_a_flush_waits_for_it() -> None:
    """The same signal may land while the main thread flushes (print(..., flush=True) after a line):
    the handler's own flush re-entered the stream's and raised RuntimeError (CI, 2026-11-24)."""
    import io

    from skiplock.tools.dev import SignalSafeOutput

    class InterruptedFlush(io.StringIO):
        """A stream whose first flush is interrupted by a 'signal handler' that prints and flushes."""

        def __init__(self) -> None:
            super().__init__()
            self.wrapper: SignalSafeOutput | None = None
            self.flushing = False

        def flush(self) -> None:
            if self.flushing:
                raise RuntimeError("reentrant call inside flush")  # what io.BufferedWriter does
            self.flushing = True
            try:
                if self.wrapper is not None:
                    wrapper, self.wrapper = self.wrapper, None
                    print("system | SIGINT received", file=wrapper, flush=True)
                super().flush()
            finally:
                self.flushing = False

    stream = InterruptedFlush()
    out = SignalSafeOutput(stream)
    print("worker | job 1 ok", file=out)
    stream.wrapper = out
    out.flush()
    assert stream.getvalue() == "worker | job 1 ok\nsystem | SIGINT received\n"
