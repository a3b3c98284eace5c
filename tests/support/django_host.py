"""The Django host of the console tests: examples/django_project served by gunicorn on a fresh database.

Django is configured once per process, and the test process already uses tests.django_settings, so
the project runs in its own processes, as it does in production. Users: alice (superuser), bob
(staff), dave (staff with orders.operate_jobs), carol (not staff); each password is "<name>-pw".
"""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg

from skiplock import enqueue
from tests.conftest import REPO
from tests.support.helpers import scalar, wait_for
from tests.support.pgcluster import free_port

PROJECT = REPO / "examples" / "django_project"
PREFIX = "/jobs"
USERS = """
from django.contrib.auth.models import Permission, User
User.objects.create_superuser("alice", "alice@example.com", "alice-pw")
User.objects.create_user("bob", password="bob-pw", is_staff=True)
User.objects.create_user("carol", password="carol-pw")
dave = User.objects.create_user("dave", password="dave-pw", is_staff=True)
dave.user_permissions.add(Permission.objects.get(codename="operate_jobs"))
"""


def project_env(db_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SKIPLOCK_", "DJANGO_"))}
    env.update({"DATABASE_URL": db_url, "DJANGO_SETTINGS_MODULE": "shop.settings",
                "PYTHONPATH": f"{PROJECT}:{REPO}", "PYTHONUNBUFFERED": "1"})
    return env


def up_at(url: str) -> bool:
    """True once `url` answers 200 (a server's start-up is done)."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def prepare(db_url: str) -> None:
    """Django's migrations and the project's users on `db_url` (skiplock's tables are already there)."""
    for cmd in (["migrate", "--noinput", "-v", "0"], ["shell", "-c", USERS]):
        done = subprocess.run([sys.executable, "manage.py", *cmd], cwd=PROJECT, env=project_env(db_url),
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr


@contextmanager
def django_shop(db_url: str, log_path: Path) -> Iterator[str]:
    """Migrate `db_url` for the project, create its users, serve it; yields the base URL."""
    prepare(db_url)
    env = project_env(db_url)
    port = free_port()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "gunicorn", "shop.wsgi", "--worker-class", "gthread",
                                 "--threads", "4", "--bind", f"127.0.0.1:{port}"], cwd=PROJECT, env=env,
                                stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: proc.poll() is not None or up_at(url + "/accounts/login/"), timeout=30, message="gunicorn up")
        assert proc.poll() is None, log_path.read_text()
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def make_dead_job_in(db_url: str, spawn_worker: Callable[..., Any]) -> int:
    """A dead job on `db_url` as a real worker leaves it: the handler raised PermanentFailure."""
    with psycopg.connect(db_url, autocommit=True) as conn:
        job_id = enqueue("t1", {"permanent": True}, conn=conn)
        worker = spawn_worker(url=db_url, SKIPLOCK_QUEUES="t1")
        wait_for(lambda: scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (job_id,)) == "dead",
                 message="the worker to kill the job")
    worker.terminate()
    assert job_id is not None
    return int(job_id)
