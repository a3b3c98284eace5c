"""skiplock as a user gets it: the built wheel (and the wheel built from the sdist), installed into a
fresh virtualenv in a folder outside the checkout, used with that venv's executables only.

From that folder: migrate a fresh database, enqueue through `from skiplock import enqueue`, run
`skiplock worker` on a task module that lives in the folder, serve the console with gunicorn from
the installed package (log in, see the counts, load htmx and check its sha256, retry a dead job),
and run the other commands. The wheel must install one top-level name: skiplock.
"""

from __future__ import annotations

import fcntl
import hashlib
import http.cookiejar
import os
import re
import signal
import socket
import subprocess
import sys
import tarfile
import textwrap
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.conftest import REPO
from tests.support.helpers import scalar, wait_for
from tests.support.pgcluster import with_database

# A fresh virtualenv and a pip install of the wheel with its dependencies per test: minutes on a busy
# 2-CPU machine, beyond the suite's 300 s default.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

HTMX = "htmx-2.0.11.min.js"
PINNED_HTMX_SHA256 = (REPO / "static" / f"{HTMX}.sha256").read_text().split()[0]
USER, PASSWORD = "pkg-admin", "pkg-password-123"


def _run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 300,
         check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{cmd} exited {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The wheel built from the checkout, the sdist, and a wheel built from that sdist.

    Built once per run: under pytest-xdist the first process to get here builds them into a folder
    all the processes share (each has basetemp/popen-gwN), under a file lock the others wait on."""
    base = tmp_path_factory.getbasetemp()
    out = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "skiplock-dists"
    out.mkdir(exist_ok=True)
    with open(out / "build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (out / "built").exists():
            _build(out)
            (out / "built").touch()
    return {"checkout": next((out / "checkout").glob("*.whl")),
            "sdist": next((out / "sdist").glob("skiplock-*.tar.gz")),
            "from-sdist": next((out / "from-sdist").glob("*.whl"))}


def _build(out: Path) -> None:
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(REPO), "-w", str(out / "checkout")], cwd=out)
    _run([sys.executable, "-m", "build", "--sdist", "--outdir", str(out / "sdist"), str(REPO)], cwd=out)
    sdist = next((out / "sdist").glob("skiplock-*.tar.gz"))
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(sdist), "-w", str(out / "from-sdist")],
         cwd=out)


def test_the_wheel_holds_one_package_and_its_data(dists: dict[str, Path]) -> None:
    for kind in ("checkout", "from-sdist"):
        names = zipfile.ZipFile(dists[kind]).namelist()
        top_level = next(n for n in names if n.endswith(".dist-info/top_level.txt"))
        assert zipfile.ZipFile(dists[kind]).read(top_level).decode().split() == ["skiplock"], kind
        assert {n.split("/")[0] for n in names} == {"skiplock", top_level.split("/")[0]}, kind
        for needed in ("skiplock/migrations/001_jobs.sql", "skiplock/templates/layout.html",
                       f"skiplock/static/{HTMX}", f"skiplock/static/{HTMX}.sha256", "skiplock/webapp/__init__.py",
                       "skiplock/py.typed", "skiplock/tools/bench_tasks.py", "skiplock/core/sql/django_tasks.sql",
                       "skiplock/django/backend.py", "skiplock/django/migrations/0001_skiplock_schema.py",
                       "skiplock/django/management/commands/skiplock_worker.py",
                       *(f"skiplock/{layer}/__init__.py" for layer in ("core", "monitor", "services", "runtime"))):
            assert needed in names, f"{needed} missing from the {kind} wheel"
        assert not any(n.startswith("skiplock/tests") or "screenshots" in n for n in names), kind
    # the sdist carries the sources the wheel is built from, and no tests are needed to build it
    with tarfile.open(dists["sdist"]) as sdist:
        members = sdist.getnames()
    assert any(m.endswith("/migrations/001_jobs.sql") for m in members)
    assert any(m.endswith(f"/static/{HTMX}") for m in members)


class Installed:
    """A fresh venv outside the checkout with one wheel installed; commands run from its folder."""

    def __init__(self, folder: Path, url: str) -> None:
        self.folder = folder
        self.bin = folder / "venv" / "bin"
        self.url = url

    def env(self, **extra: str) -> dict[str, str]:
        # nothing from the checkout: no PYTHONPATH, no SKIPLOCK_* of the test run
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("SKIPLOCK_", "PYTHON", "VIRTUAL_ENV", "PYENV", "DJANGO_"))}
        env.update({"DATABASE_URL": self.url, "PATH": f"{self.bin}:{env.get('PATH', '')}", **extra})
        return env

    def run(self, *cmd: str, check: bool = True, **env: str) -> subprocess.CompletedProcess[str]:
        exe = str(self.bin / cmd[0])
        return _run([exe, *cmd[1:]], cwd=self.folder, env=self.env(**env), check=check)


@pytest.fixture(params=["checkout", "from-sdist"])
def installed(request: pytest.FixtureRequest, dists: dict[str, Path], tmp_path: Path,
              pg_admin_url: str) -> Iterator[Installed]:
    folder = tmp_path / "app"
    folder.mkdir()
    assert REPO not in folder.parents
    _run([sys.executable, "-m", "venv", str(folder / "venv")], cwd=folder)
    _run([str(folder / "venv" / "bin" / "pip"), "install", "-q", str(dists[request.param])], cwd=folder, timeout=600)
    name = f"skiplock_pkg_{os.getpid()}_{request.param.replace('-', '_')}"
    with psycopg.connect(pg_admin_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield Installed(folder, with_database(pg_admin_url, name))
    finally:
        with psycopg.connect(pg_admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


TASKS = textwrap.dedent('''
    from skiplock import PermanentFailure, task

    @task("pkg")
    def handle(payload):
        return None

    @task("pkgfail")
    def fail(payload):
        raise PermanentFailure(f"order {payload['order']} cannot be shipped")
''')


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_installed_wheel_migrates_enqueues_works_and_serves_the_console(installed: Installed) -> None:
    app = installed
    version = app.run("skiplock", "--version").stdout.strip()
    assert re.fullmatch(r"skiplock \d+\.\d+\.\d+\S*", version), version
    where = app.run("python", "-c", "import skiplock, skiplock.webapp; print(skiplock.__file__, skiplock.__version__)")
    assert str(app.folder / "venv") in where.stdout and version.split()[1] in where.stdout
    # `from skiplock import recurring` is the function, not a module
    app.run("python", "-c", "from skiplock import recurring; assert callable(recurring) and "
            "type(recurring).__name__ == 'function'")
    # no generic top-level modules come with it
    app.run("python", "-c", "import importlib.util as u; assert u.find_spec('worker') is None "
            "and u.find_spec('webapp') is None")

    assert "applied" in app.run("skiplock", "migrate").stdout
    assert "up to date" in app.run("skiplock", "migrate").stdout
    app.run("python", "-c", "from skiplock import enqueue, enqueue_many\n"
            "enqueue_many([('pkg', {'n': i}) for i in range(20)])\n"
            "assert enqueue('pkgfail', {'order': 77}) is not None")
    (app.folder / "pkgtasks.py").write_text(TASKS)
    with psycopg.connect(app.url, autocommit=True) as conn:
        assert scalar(conn, "SELECT count(*) FROM jobs") == 21
        worker = subprocess.Popen([str(app.bin / "skiplock"), "worker", "--tasks", "pkgtasks"], cwd=app.folder,
                                  env=app.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            wait_for(lambda: worker.poll() is not None
                     or (scalar(conn, "SELECT count(*) FILTER (WHERE queue = 'pkg'), count(*) FILTER "
                                "(WHERE status = 'dead') FROM jobs") == 0
                         and scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'dead'") == 1),
                     timeout=60, message="the installed worker to drain")
            if worker.poll() is not None:
                output = worker.stdout.read() if worker.stdout else ""
                raise AssertionError(f"the installed worker exited {worker.returncode}: {output}")
        finally:
            worker.send_signal(signal.SIGTERM)
            out = worker.communicate(timeout=60)[0]
        assert worker.returncode == 0, out
        dead_id = scalar(conn, "SELECT id FROM jobs WHERE status = 'dead'")

        _check_console(app, conn, dead_id)

    # the other commands, from the same folder
    assert "no recurring schedules" in app.run("skiplock", "schedules", "list").stdout
    doctor = app.run("skiplock", "doctor", check=False)
    assert doctor.returncode in (0, 1) and "Traceback" not in doctor.stderr, doctor.stderr
    bench = app.run("skiplock", "bench", "--quick")
    assert "drain" in bench.stdout, bench.stdout
    dev = app.run("skiplock", "dev", check=False)  # the dev extra is not installed: say how to get it
    assert dev.returncode == 2 and "pip install 'skiplock[dev]'" in dev.stderr, dev.stderr
    assert "gunicorn" in app.run("skiplock", "web", "--help").stdout


def test_skiplock_dev_from_the_wheel_with_the_dev_extra(dists: dict[str, Path], tmp_path: Path) -> None:
    """The README's run command as a wheel user has it: no DATABASE_URL, an embedded PostgreSQL."""
    app = Installed(tmp_path / "app", "")
    app.folder.mkdir()
    _run([sys.executable, "-m", "venv", str(app.bin.parent)], cwd=app.folder)
    _run([str(app.bin / "pip"), "install", "-q", f"{dists['checkout']}[dev]"], cwd=app.folder, timeout=600)
    env = app.env()
    del env["DATABASE_URL"]
    port = _free_port()
    log_path = tmp_path / "dev.log"
    with open(log_path, "wb") as log:
        dev = subprocess.Popen([str(app.bin / "skiplock"), "dev", "--port", str(port)], cwd=app.folder, env=env,
                               stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        def console_up() -> bool:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as response:
                    return bool(response.status == 200)
            except OSError:
                return dev.poll() is not None

        wait_for(console_up, timeout=120, message="skiplock dev's console")
        wait_for(lambda: " ok in " in log_path.read_text() or dev.poll() is not None, timeout=60,
                 message="skiplock dev's worker to run a demo job")
        assert dev.poll() is None, log_path.read_text()
        assert (app.folder / ".skiplock-dev" / "pg").is_dir()  # the embedded server's data, in the folder
    finally:
        os.killpg(dev.pid, signal.SIGINT)
        try:
            dev.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(dev.pid, signal.SIGKILL)
            dev.wait(timeout=30)
    assert "Traceback" not in log_path.read_text(), log_path.read_text()


def _check_console(app: Installed, conn: psycopg.Connection, dead_id: int) -> None:
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    env = app.env(SKIPLOCK_WEB_USER=USER, SKIPLOCK_WEB_PASSWORD=PASSWORD)
    gunicorn = subprocess.Popen([str(app.bin / "gunicorn"), "skiplock.webapp:create_app()", "--worker-class",
                                 "gthread", "--threads", "4", "--bind", f"127.0.0.1:{port}"],
                                cwd=app.folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))

        def get(path: str) -> str:
            with opener.open(base + path, timeout=10) as response:
                return str(response.read().decode())

        def up() -> bool:
            try:
                return bool(get("/healthz"))
            except OSError:
                return gunicorn.poll() is not None

        wait_for(up, timeout=30, message="gunicorn from the installed package")
        assert gunicorn.poll() is None
        token = re.search(r'name="csrf_token" value="([^"]+)"', get("/login"))
        assert token
        form = urllib.parse.urlencode({"user": USER, "password": PASSWORD, "csrf_token": token.group(1),
                                       "next": "/"}).encode()
        with opener.open(base + "/login", data=form, timeout=10) as response:
            overview = response.read().decode()
        assert response.geturl() == base + "/" and "pkgfail" in overview
        with opener.open(f"{base}/static/{HTMX}", timeout=10) as response:
            assert hashlib.sha256(response.read()).hexdigest() == PINNED_HTMX_SHA256
        page = get(f"/jobs/{dead_id}")
        assert "order 77 cannot be shipped" in page
        token = re.search(r'name="csrf_token" value="([^"]+)"', page)
        assert token
        # the job page's Retry asks first; the confirmation's "Yes" posts confirm=yes
        data = urllib.parse.urlencode({"csrf_token": token.group(1)}).encode()
        with opener.open(f"{base}/jobs/{dead_id}/retry", data=data, timeout=10) as response:
            assert "No, go back" in response.read().decode()
        assert scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (dead_id,)) == "dead"
        data = urllib.parse.urlencode({"csrf_token": token.group(1), "confirm": "yes"}).encode()
        with opener.open(f"{base}/jobs/{dead_id}/retry", data=data, timeout=10) as response:
            assert f"Job {dead_id} retried" in response.read().decode()
        assert scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (dead_id,)) == "queued"
    finally:
        gunicorn.terminate()
        out = gunicorn.communicate(timeout=30)[0]
    assert "Traceback" not in out, out


def test_the_editable_install_loads_one_copy_of_each_module() -> None:
    """`pip install -e .` maps the folders like the wheel: `skiplock` only, never `worker` beside it
    (two copies would mean two task registries)."""
    code = ("import sys, skiplock, skiplock.webapp, skiplock.runtime.runner, skiplock.tools.cli\n"
            "from skiplock.core.registry import REGISTRY\n"
            "from skiplock import task\n"
            "assert not [m for m in sys.modules if m.split('.')[0] in ('worker', 'webapp')], sys.modules.keys()\n"
            "print(skiplock.__file__, skiplock.webapp.__file__)")
    out = _run([sys.executable, "-c", code], cwd=REPO).stdout.split()
    assert out == [str(REPO / "worker" / "__init__.py"), str(REPO / "webapp" / "__init__.py")]
