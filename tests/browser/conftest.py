"""Browser tests: Debian chromium driven by Playwright against gunicorn on a free loopback port.

The project installs chromium itself when it is missing (Debian package, root only), so CI needs
no Playwright browser download. Not root, or no apt-get: the browser tests are skipped with the reason
(docs/reference/testing-the-project.md).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO
from tests.support.helpers import wait_for

CHROMIUM = "/usr/bin/chromium"
INSTALL_LOCK = "/tmp/skiplock-tests-chromium-install.lock"
USER, PASSWORD = "operator", "browser-test-password"


def _ensure_chromium() -> None:
    """Install Debian's chromium when it is missing, as root; skip the browser tests, saying why, when
    that cannot work. A failed install (no network, a broken mirror) fails: it could have worked."""
    if os.path.exists(CHROMIUM):
        return
    if os.geteuid() != 0:
        pytest.skip(f"browser tests need {CHROMIUM}: it is missing and only root may `apt-get install chromium`; "
                    "install Debian's chromium package, then re-run")
    if shutil.which("apt-get") is None:
        pytest.skip(f"browser tests need {CHROMIUM}: it is missing and there is no apt-get to install it "
                    "(not a Debian-like system); install chromium at that path, then re-run")
    # pytest-xdist's workers may all get here: one installs, the others wait for it (dpkg allows one at a time)
    with open(INSTALL_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(CHROMIUM):
            return
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for argv in (["apt-get", "update"], ["apt-get", "install", "-y", "chromium"]):
            done = subprocess.run(argv, env=env, capture_output=True, text=True)
            if done.returncode != 0:
                pytest.fail(f"`{' '.join(argv)}` failed ({done.returncode}):\n"
                            f"{done.stdout[-2000:]}{done.stderr[-2000:]}")


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    _ensure_chromium()
    return {**browser_type_launch_args, "executable_path": CHROMIUM,
            "args": ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                     "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Console:
    """A running gunicorn console: its base URL and its log."""

    url: str
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/healthz", timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


@pytest.fixture
def console_settings() -> dict[str, str]:
    """SKIPLOCK_* settings for the console under test: none; a test module overrides this fixture to give some."""
    return {}


@contextlib.contextmanager
def serve_console(settings: dict[str, str], tmp_path: Path) -> Iterator[Console]:
    """The console under gunicorn (gthread, 1 worker) with these settings on top of a login, until the block ends."""
    port = _free_port()
    # the caller's settings decide the database(s): none of the environment's own leaks in
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKIPLOCK_") and k != "DATABASE_URL"}
    env.update({"SKIPLOCK_WEB_USER": USER, "SKIPLOCK_WEB_PASSWORD": PASSWORD,
                "SKIPLOCK_SECRET_KEY": "browser-test-secret", "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1",
                **settings})
    log_path = tmp_path / "gunicorn.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "gunicorn", "skiplock.webapp:create_app()", "--worker-class",
                                 "gthread", "--workers", "1", "--threads", "4", "--bind", f"127.0.0.1:{port}"],
                                cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    console = Console(f"http://127.0.0.1:{port}", log_path)
    try:
        wait_for(lambda: proc.poll() is not None or _healthy(console.url), timeout=30, message="gunicorn up")
        assert proc.poll() is None, console.log()
        yield console
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)


@pytest.fixture
def console(db_url: str, tmp_path: Path, console_settings: dict[str, str]) -> Iterator[Console]:
    with serve_console({"DATABASE_URL": db_url, **console_settings}, tmp_path) as console:
        yield console


def log_in(page: Any, console: Console) -> None:
    """Log in through the form, as an operator does."""
    page.goto(console.url + "/")
    page.fill("input[name=user]", USER)
    page.fill("input[name=password]", PASSWORD)
    page.click("form[action='/login'] button[type=submit]")
    page.wait_for_selector("h1:has-text('Queues')")


def save_screenshot(page: Any, name: str, tmp_path: Path) -> None:
    """Screenshot to the test's folder; also to static/screenshots/ when UPDATE_SCREENSHOTS=1."""
    page.screenshot(path=str(tmp_path / name), full_page=True)
    if os.environ.get("UPDATE_SCREENSHOTS") == "1":
        target = REPO / "static" / "screenshots"
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy(tmp_path / name, target / name)
