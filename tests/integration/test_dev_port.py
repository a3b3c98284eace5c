"""`skiplock dev` when the console's port is taken (issue 35, defect 6).

It used to print "console on http://127.0.0.1:5000/", which pointed at the other server, then exit 1
without a hint. A port the user chose is now checked before anything starts, and refused with a
message naming --port; the default 5000, when taken, gives way to a free port, and that URL is printed.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.support.helpers import wait_for

pytestmark = pytest.mark.slow


def _dev_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKIPLOCK_") and k != "PORT"}
    env.update({"PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1", **extra})
    return env


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port another server listens on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        yield other.getsockname()[1]


def test_a_chosen_port_that_is_taken_is_refused_before_anything_starts(taken_port: int, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "skiplock.tools.cli", "dev", "--port", str(taken_port),
                           "--data-dir", str(tmp_path / "pg")], cwd=tmp_path, env=_dev_env(),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert f"port {taken_port} is already in use" in done.stderr and "--port" in done.stderr
    assert "console on" not in done.stdout  # no URL pointing at the other server
    assert not (tmp_path / "pg").exists()  # checked before the embedded database was started


def test_port_from_the_environment_that_is_taken_is_refused_too(taken_port: int, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "skiplock.tools.cli", "dev", "--data-dir", str(tmp_path / "pg")],
                          cwd=tmp_path, env=_dev_env(PORT=str(taken_port)), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2 and "--port" in done.stderr and "console on" not in done.stdout


def test_the_default_port_taken_gives_way_to_a_free_one_that_serves(db_url: str, tmp_path: Path) -> None:
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        try:
            holder.bind(("127.0.0.1", 5000))
            holder.listen()
        except OSError:
            pass  # another program on this machine holds 5000 already: taken either way
        log_path = tmp_path / "dev.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen([sys.executable, "-m", "skiplock.tools.cli", "dev", "--no-demo"], cwd=tmp_path,
                                    env=_dev_env(DATABASE_URL=db_url), stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        try:
            def console_url() -> str | None:
                found = re.search(r"console on (http://127\.0\.0\.1:(\d+)/)", log_path.read_text(errors="replace"))
                return found.group(1) if found else None

            url: str = wait_for(console_url, timeout=60, message="the console's URL") or ""
            assert ":5000/" not in url
            assert "port 5000 is in use" in log_path.read_text()

            def healthz() -> bool:
                try:
                    with urllib.request.urlopen(url + "healthz", timeout=5) as answer:
                        return answer.status == 200
                except OSError:
                    return False

            wait_for(healthz, timeout=60, message=f"the console to answer on {url}")
        finally:
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(timeout=60)
    finally:
        holder.close()
