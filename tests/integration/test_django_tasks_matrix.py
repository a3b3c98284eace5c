"""skiplock's django.tasks backend from the built wheel, in fresh venvs, on every supported Django.

Each entry of the matrix is a venv outside the checkout, made by its own interpreter, with
`pip install "skiplock-*.whl[django]" "Django==X.*"`: the django-tasks backport on Django 4.2, 5.1 and
5.2 under Python 3.11, and Django's own django.tasks on Django 6 under 3.12 and 3.13. Each runs the
project in tests/support/django_tasks_project as its user would: `manage.py migrate` (twice: the
second applies nothing), then check.py, which enqueues in atomic() (a rollback leaves no job, a commit
runs it), starts a real `manage.py skiplock_worker` and reads the results back: return values, a
failing task's errors with class and traceback, a retry's attempt number, run_after, an async task.

An interpreter this machine lacks skips its entries, saying which. The venvs are made per run, in
the run's temporary folder; the entries run side by side under pytest-xdist.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

from tests.conftest import REPO
from tests.integration.test_package import dists  # noqa: F401  (the wheel, built once per run)
from tests.support.pgcluster import with_database

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

PROJECT = REPO / "tests" / "support" / "django_tasks_project"
PYENV = Path(os.environ.get("PYENV_ROOT", "/root/.pyenv")) / "versions"

# (python, Django requirement, the framework compat.py must pick)
MATRIX = [
    ("3.11", "Django==4.2.*", "django_tasks"),
    ("3.11", "Django==5.1.*", "django_tasks"),
    ("3.11", "Django==5.2.*", "django_tasks"),
    ("3.12", "Django==6.0.*", "django.tasks"),
    ("3.13", "Django>=6.0,<7", "django.tasks"),
]


def interpreter(version: str) -> str | None:
    """A python of `version` (X.Y): this one, else pyenv's newest of that series, else one on PATH."""
    if f"{sys.version_info.major}.{sys.version_info.minor}" == version:
        return sys.executable
    found = sorted(PYENV.glob(f"{version}.*/bin/python"))
    return str(found[-1]) if found else shutil.which(f"python{version}")


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{cmd} exited {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


@contextmanager
def django_project(python: str, django: str, wheels: dict[str, Path], tmp_path: Path,
                   pg_admin_url: str) -> Iterator[tuple[str, Path, dict[str, str]]]:
    """A fresh venv of `python` with the wheel and `django`, a copy of the project, and its own database:
    (the venv's python, the project folder, the environment to run it in)."""
    exe = interpreter(python)
    if exe is None:
        pytest.skip(f"no Python {python} on this machine (pyenv or PATH)")
    env = {k: v for k, v in os.environ.items()  # nothing of the checkout or of the test run's venv
           if not k.startswith(("SKIPLOCK_", "PYTHON", "VIRTUAL_ENV", "DJANGO_"))}
    venv = tmp_path / "venv"
    _run([exe, "-m", "venv", str(venv)], tmp_path, env, 120)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    _run([*pip, f"{wheels['checkout']}[django]", django], tmp_path, env, 600)
    project = tmp_path / "project"
    shutil.copytree(PROJECT, project, ignore=shutil.ignore_patterns("__pycache__"))
    name = f"skiplock_djt_{os.getpid()}_{python.replace('.', '')}_{abs(hash(django)) % 10_000}"
    with psycopg.connect(pg_admin_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        env.update(DATABASE_URL=with_database(pg_admin_url, name), PATH=f"{venv / 'bin'}:{env.get('PATH', '')}")
        yield str(venv / "bin" / "python"), project, env
    finally:
        with psycopg.connect(pg_admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.parametrize(("python", "django", "framework"), MATRIX, ids=[f"py{p}-{d}" for p, d, _ in MATRIX])
def test_a_django_project_on_the_wheel(python: str, django: str, framework: str, dists: dict[str, Path],  # noqa: F811
                                       tmp_path: Path, pg_admin_url: str) -> None:
    with django_project(python, django, dists, tmp_path, pg_admin_url) as (python_in_venv, project, env):
        first = _run([python_in_venv, "manage.py", "migrate"], project, env, 300)
        assert "Applying skiplock.0001_skiplock_schema... OK" in first.stdout, first.stdout
        again = _run([python_in_venv, "manage.py", "migrate"], project, env, 300)
        assert "No migrations to apply." in again.stdout, again.stdout
        check = _run([python_in_venv, "check.py"], project, env, 400)
        lines = check.stdout.strip().splitlines()
        assert lines[0].startswith(f"framework {framework} Django {django.split('=')[-1].rstrip('.*')[:1]}"), lines
        assert lines[-1] == "ok", check.stdout + check.stderr


def test_django_tasks_as_workflow_parents_and_durable_waits(dists: dict[str, Path],  # noqa: F811
                                                            tmp_path: Path, pg_admin_url: str) -> None:
    """Django 6's own django.tasks on Python 3.12, from the wheel: check_flows.py enqueues a task as a
    workflow's parent and its dependent (which reads the parent's return value), and a task that parks on
    job.wait_for until skiplock.signal wakes it (a signal rolled back with its transaction wakes nothing);
    one real `manage.py skiplock_worker` runs them. The parked task is RUNNING to get_result meanwhile, and
    Django's log never calls it FAILED."""
    with django_project("3.12", "Django==6.0.*", dists, tmp_path, pg_admin_url) as (python_in_venv, project, env):
        _run([python_in_venv, "manage.py", "migrate"], project, env, 300)
        check = _run([python_in_venv, "check_flows.py"], project, env, 400)
        assert check.stdout.strip().splitlines()[-1] == "ok", check.stdout + check.stderr
        assert "ship_when_approved state=FAILED" not in check.stderr, check.stderr
