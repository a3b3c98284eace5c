"""`skiplock dev`: the whole system on one machine with one command.

Without DATABASE_URL it starts an embedded PostgreSQL (pgserver) in a local folder, migrates it,
enqueues a demo workload and runs the Procfile's processes under honcho, the way
`honcho start` would in production-like local runs.
"""

from __future__ import annotations

import os
import shlex
import socket
import sys
from pathlib import Path
from typing import TextIO

from skiplock.core.errors import ConfigError
from skiplock.core.plumbing.config import load_settings
from skiplock.core.plumbing.db import connect
from skiplock.core.plumbing.migrate import apply_migrations

DEFAULT_DATA_DIR = Path(".skiplock-dev") / "pg"
DEFAULT_PORT = 5000  # the console's, when neither --port nor $PORT names one


def require_dev_extra(embedded: bool = True) -> None:
    """pgserver and honcho are the `dev` extra: a library user does not install them, so say how.

    pgserver is needed only for the embedded database (`embedded`, no DATABASE_URL); it has no build for
    Python 3.13 yet, so there the extra leaves it out and DATABASE_URL is the way."""
    import importlib.util

    needed = ("pgserver", "honcho") if embedded else ("honcho",)
    missing = [name for name in needed if importlib.util.find_spec(name) is None]
    if missing:
        hint = (" (pgserver has no build for this Python yet: set DATABASE_URL to a PostgreSQL of yours)"
                if "pgserver" in missing and sys.version_info >= (3, 13) else
                " (or set DATABASE_URL and run `skiplock worker` and `skiplock web` yourself)")
        raise ConfigError(f"skiplock dev needs {' and '.join(missing)}: pip install 'skiplock[dev]'{hint}")


def embedded_database_url(data_dir: Path) -> str:
    """Start (or reuse) the embedded PostgreSQL in `data_dir`; return its URL."""
    import warnings

    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset (containers); harmless for pgserver
        warnings.simplefilter("ignore")
        import pgserver

        data_dir = data_dir.resolve()
        data_dir.parent.mkdir(parents=True, exist_ok=True)
        # 'stop': the server stops when this process exits, so Ctrl-C leaves nothing running;
        # the data folder stays, so jobs survive between dev runs
        server = pgserver.get_server(data_dir, cleanup_mode="stop")
    return str(server.get_uri())


def port_is_free(port: int) -> bool:
    """True when a server could listen on 127.0.0.1:`port` now (bound as gunicorn binds: SO_REUSEADDR)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A port the system has free now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def console_port(requested: int | None, from_env: str | None) -> int:
    """The console's port, checked before any URL is printed.

    A port the user chose (--port, or $PORT) that is taken is an error naming --port: printing its URL
    would point at the other server. The default, 5000, is often taken (macOS's AirPlay receiver,
    another project's dev server): then a free port is used, and the URL printed says which.
    """
    if requested is None and from_env:
        try:
            requested = int(from_env)
        except ValueError:
            raise ConfigError(f"PORT must be a port number, got {from_env!r}") from None
    if requested is not None and not 0 <= requested <= 65535:
        raise ConfigError(f"--port must be between 1 and 65535 (0: any free port), got {requested}")
    if requested == 0:  # "any free port"
        return free_port()
    if requested is not None:
        if not port_is_free(requested):
            raise ConfigError(f"port {requested} is already in use (another server is listening there): "
                              "pass a free one with --port N, e.g. skiplock dev --port 5050")
        return requested
    if port_is_free(DEFAULT_PORT):
        return DEFAULT_PORT
    chosen = free_port()
    print(f"skiplock dev: port {DEFAULT_PORT} is in use; the console takes port {chosen} "
          "(choose one with --port N)", flush=True)
    return chosen


def run_dev(data_dir: str | None = None, demo: bool = True, port: int | None = None) -> int:
    """Start the dev stack in the foreground; Ctrl-C stops it."""
    require_dev_extra(embedded=not os.environ.get("DATABASE_URL"))
    # before the database and the demo: a taken port is found in a second, not after the start-up
    chosen_port = console_port(port, os.environ.get("PORT"))
    from honcho.manager import Manager
    from honcho.printer import Printer

    from skiplock.tools.demo_tasks import enqueue_demo

    settings = load_settings()
    url = settings.database_url
    if not url:
        folder = Path(data_dir) if data_dir else DEFAULT_DATA_DIR
        print(f"skiplock dev: no DATABASE_URL, starting embedded PostgreSQL in {folder}/", flush=True)
        url = embedded_database_url(folder)
    applied = apply_migrations(url)
    print(f"skiplock dev: database ready ({len(applied)} migration(s) applied)", flush=True)
    if demo:
        with connect(url, "skiplock-dev") as conn:
            ids = enqueue_demo(conn)
        print(f"skiplock dev: enqueued {len(ids)} demo jobs (emails, reports, webhooks; some retry, "
              "one ends dead)", flush=True)
    env = {**os.environ, "DATABASE_URL": url,
           "SKIPLOCK_TASKS": os.environ.get("SKIPLOCK_TASKS", "skiplock.tools.demo_tasks"),
           "PORT": str(chosen_port), "PYTHONUNBUFFERED": "1"}
    manager = Manager(Printer(SignalSafeOutput(sys.stdout)))
    python = shlex.quote(sys.executable)
    manager.add_process("worker", f"{python} -m skiplock", env=env)
    from skiplock.tools.web_cli import dev_console  # the dev command's other process: the console

    manager.add_process("web", dev_console(env), env=env)
    manager.loop()
    return int(manager.returncode or 0)


class SignalSafeOutput:
    """sys.stdout for honcho's printer, safe against honcho's own signal handler.

    On Ctrl-C honcho prints "SIGINT received" from its signal handler, which runs in the main
    thread, possibly in the middle of printing a process's line there, or of flushing it: the
    buffered stdout then raises "RuntimeError: reentrant call inside <_io.BufferedWriter>" and
    `skiplock dev` ended in a traceback (seen in test_package while the demo's jobs were logging,
    once in a write, once in a flush). A write or flush that arrives during another waits, and
    what it wrote is written once the interrupted one is complete.
    """

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self._busy = False
        self._pending: list[str] = []

    def write(self, text: str) -> int:
        if self._busy:  # called from a signal handler that interrupted a write
            self._pending.append(text)
            return len(text)
        self._busy = True
        try:
            self.stream.write(text)
            if text.endswith("\n"):  # print() writes a line's text and its newline separately
                self._write_pending()
        finally:
            self._busy = False
        return len(text)

    def _write_pending(self) -> None:
        while self._pending:
            self.stream.write(self._pending.pop(0))

    def flush(self) -> None:
        # the handler may also land inside this flush: its line and flush then wait like a write's,
        # and this one writes what they left before it returns
        if self._busy:
            return
        self._busy = True
        try:
            while True:
                self._write_pending()
                self.stream.flush()
                if not self._pending:
                    break
        finally:
            self._busy = False

    def isatty(self) -> bool:
        return self.stream.isatty()
