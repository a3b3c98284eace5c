"""The repository's own Procfile runs the demo under `honcho start` (issue 35, defect 3).

With the README's variables (DATABASE_URL, SKIPLOCK_WEB_USER/PASSWORD, PORT) the worker line used to
exit 2 ("no task modules") and honcho then stopped the console too. Here the Procfile itself runs
through honcho against an empty database: the worker migrates it and runs a demo job, the console
serves its pages on $PORT, and SIGINT stops both.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import urllib.request
import uuid
from base64 import b64encode
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.conftest import REPO
from tests.support.helpers import scalar, wait_for
from tests.support.pgcluster import with_database

pytestmark = pytest.mark.slow

USER, PASSWORD = "admin", "procfile-demo-password"


@pytest.fixture
def empty_db(pg_admin_url: str) -> Iterator[str]:
    """A database with nothing in it, as a first `honcho start` meets it."""
    name = f"skiplock_procfile_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    with psycopg.connect(pg_admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield with_database(pg_admin_url, name)
    with psycopg.connect(pg_admin_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _bin_dir(tmp_path: Path) -> Path:
    """A folder holding this Python's `skiplock` and `gunicorn`, as an installed virtualenv has them.

    The test venv reuses the system's site-packages, whose gunicorn script runs another Python: a
    two-line shim runs this one's instead."""
    folder = tmp_path / "bin"
    folder.mkdir()
    here = Path(sys.executable).parent
    for name, module in (("skiplock", "skiplock.tools.cli"), ("gunicorn", "gunicorn")):
        if shutil.which(name, path=str(here)):
            (folder / name).symlink_to(here / name)
        else:
            (folder / name).write_text(f'#!/bin/sh\nexec {sys.executable} -m {module} "$@"\n')
            (folder / name).chmod(0o755)
    return folder


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_honcho_start_runs_the_procfile_demo(empty_db: str, tmp_path: Path) -> None:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SKIPLOCK_", "DJANGO_"))}
    env.update({"DATABASE_URL": empty_db, "SKIPLOCK_WEB_USER": USER, "SKIPLOCK_WEB_PASSWORD": PASSWORD,
                "PORT": str(port), "PYTHONUNBUFFERED": "1",
                "PATH": f"{_bin_dir(tmp_path)}{os.pathsep}{env.get('PATH', '')}"})
    log_path = tmp_path / "honcho.log"
    with open(log_path, "wb") as log:
        honcho = subprocess.Popen([sys.executable, "-m", "honcho", "start", "-f", str(REPO / "Procfile")],
                                  cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT,
                                  start_new_session=True)

    def output() -> str:
        return log_path.read_text(errors="replace")

    def started() -> bool:
        if honcho.poll() is not None:  # a line that exits stops the other too: fail now, with the log
            raise AssertionError(f"honcho exited {honcho.returncode} before the demo ran:\n{output()}")
        return "skiplock.worker" in output() and "starting: queues=" in output()

    try:
        wait_for(started, timeout=120, message="the Procfile's worker to start")
        from skiplock import enqueue

        with psycopg.connect(empty_db, autocommit=True) as conn:
            job_id = enqueue("emails", {"to": "procfile@example.com"}, conn=conn)  # a demo queue
            wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE id = %s", (job_id,)) == 0, timeout=60,
                     message="the demo job to complete")
        assert f"job {job_id} queue=emails attempt=1/" in output()

        def page(path: str) -> tuple[int, str]:
            request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers={
                "Authorization": "Basic " + b64encode(f"{USER}:{PASSWORD}".encode()).decode()})
            try:
                with urllib.request.urlopen(request, timeout=5) as answer:
                    return answer.status, answer.read().decode()
            except OSError:
                return 0, ""

        def overview() -> str:
            status, html = page("/")
            return html if status == 200 else ""

        assert "emails" in wait_for(overview, timeout=60, message="the console to serve")
    finally:
        os.killpg(honcho.pid, signal.SIGINT)
        try:
            honcho.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(honcho.pid, signal.SIGKILL)
            honcho.wait(timeout=30)
            raise AssertionError(f"honcho did not stop within 60 s after SIGINT\n{output()}") from None
    assert "skiplock.worker: worker" in output() and " stopped: " in output()  # the worker's own clean stop
    assert "web.1 stopped" in output() and "worker.1 stopped" in output()
