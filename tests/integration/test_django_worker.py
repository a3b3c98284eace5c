"""A Django project's worker (issue 35, defect 2), with a real project folder and real worker processes.

- With DJANGO_SETTINGS_MODULE set, the worker sets Django up before it imports the task modules, so a
  tasks module that imports its models at the top, and a handler that uses the ORM, just work (they
  failed with AppRegistryNotReady until the user called django.setup() themselves).
- A handler that fails because the environment is broken (the settings are not configured) stops the
  worker with the reason and a non-zero exit, its job back in the queue with the attempt not counted;
  it used to be retried 20 times with backoff and show up dead hours later.
- Settings that cannot be loaded stop the worker's start with a message naming DJANGO_SETTINGS_MODULE.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import psycopg
import pytest

from skiplock import enqueue
from tests.conftest import REPO, worker_env
from tests.support.helpers import scalar, wait_for

pytestmark = pytest.mark.slow

SETTINGS = """
import os

import psycopg.conninfo

_db = psycopg.conninfo.conninfo_to_dict(os.environ["DATABASE_URL"])
DATABASES = {"default": {"ENGINE": "django.db.backends.postgresql", "NAME": _db["dbname"],
                         "USER": _db.get("user", ""), "PASSWORD": _db.get("password", ""),
                         "HOST": _db.get("host", ""), "PORT": str(_db.get("port", ""))}}
INSTALLED_APPS = ["orders"]
SECRET_KEY = "django-worker-test"
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
"""

MODELS = """
from django.db import models


class Receipt(models.Model):
    order_id = models.IntegerField()

    class Meta:
        db_table = "django_receipts"
"""

# what the Django docs' users write: the models imported at the top of the tasks module
TASKS = """
from skiplock import task

from orders.models import Receipt


@task("receipts")
def write_receipt(payload):
    Receipt.objects.create(order_id=payload["order_id"])
"""

# the models imported inside the handler: the module imports without Django, the handler cannot run
LAZY_TASKS = """
from skiplock import task


@task("receipts")
def write_receipt(payload):
    from orders.models import Receipt

    Receipt.objects.create(order_id=payload["order_id"])
"""


@pytest.fixture
def project(tmp_path: Path, conn: psycopg.Connection) -> Path:
    """A Django project: shop/settings.py and an `orders` app with a model and the skiplock tasks."""
    files = {"shop/__init__.py": "", "shop/settings.py": SETTINGS, "orders/__init__.py": "",
             "orders/models.py": MODELS, "orders/tasks.py": TASKS, "orders/lazy_tasks.py": LAZY_TASKS}
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(exist_ok=True)
        (tmp_path / path).write_text(textwrap.dedent(text))
    conn.execute("DROP TABLE IF EXISTS django_receipts")
    conn.execute("CREATE TABLE django_receipts (id bigserial PRIMARY KEY, order_id int NOT NULL)")
    return tmp_path


def _worker(db_url: str, project: Path, tasks: str, **env: str) -> subprocess.Popen[str]:
    settings = worker_env(db_url, SKIPLOCK_TASKS=tasks, PYTHONPATH=f"{REPO}:{project}", **env)
    if "DJANGO_SETTINGS_MODULE" not in env:
        settings.pop("DJANGO_SETTINGS_MODULE", None)
    return subprocess.Popen([sys.executable, "-m", "skiplock"], cwd=project, env=settings, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _stop(worker: subprocess.Popen[str]) -> tuple[int, str]:
    if worker.poll() is None:
        worker.terminate()
    output, _ = worker.communicate(timeout=60)
    return worker.returncode, output


def test_the_worker_sets_django_up_before_importing_the_tasks(db_url: str, project: Path,
                                                              conn: psycopg.Connection) -> None:
    worker = _worker(db_url, project, "orders.tasks", DJANGO_SETTINGS_MODULE="shop.settings")
    try:
        job_id = enqueue("receipts", {"order_id": 42})
        wait_for(lambda: worker.poll() is not None or scalar(conn, "SELECT count(*) FROM jobs WHERE id = %s",
                                                             (job_id,)) == 0,
                 timeout=60, message="the job to run")
        assert scalar(conn, "SELECT array_agg(order_id) FROM django_receipts") == [42]
    finally:
        code, output = _stop(worker)
    assert code == 0, output
    assert "set up Django" in output and "shop.settings" in output


def test_a_handler_failing_on_a_broken_environment_stops_the_worker(db_url: str, project: Path,
                                                                     conn: psycopg.Connection) -> None:
    worker = _worker(db_url, project, "orders.lazy_tasks")  # no DJANGO_SETTINGS_MODULE
    try:
        job_id = enqueue("receipts", {"order_id": 7})
        wait_for(lambda: worker.poll() is not None, timeout=60, message="the worker to stop on its own")
    finally:
        code, output = _stop(worker)
    assert code == 3, output
    assert "environment is broken" in output and "ImproperlyConfigured" in output
    assert "DJANGO_SETTINGS_MODULE" in output  # says what to do
    row = conn.execute("SELECT status::text, attempts, last_error FROM jobs WHERE id = %s", (job_id,)).fetchone()
    assert row == ("queued", 0, None)  # back in its queue, the attempt not counted
    assert scalar(conn, "SELECT count(*) FROM django_receipts") == 0


def test_settings_that_cannot_load_stop_the_start_with_a_clear_message(db_url: str, project: Path) -> None:
    worker = _worker(db_url, project, "orders.tasks", DJANGO_SETTINGS_MODULE="shop.no_such_settings")
    try:
        output, _ = worker.communicate(timeout=60)  # it must exit on its own
    finally:
        _stop(worker)
    assert worker.returncode == 2, output
    assert "cannot set Django up (DJANGO_SETTINGS_MODULE=shop.no_such_settings)" in output
    assert "Traceback" not in output
