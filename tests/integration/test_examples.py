"""The three teams' first day (issue 35), each an example under examples/ with an end-to-end check.py.

Each check migrates, serves the app (gunicorn or uvicorn), enqueues in a transaction (a rollback
leaves no job, a commit one), runs a worker that uses the ORM, and uses the console mounted behind
the app's own login (read-only refused, CSRF required, a retry audited under the app's user).
They run here from the checkout, and from the built wheel in a fresh venv outside the checkout.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.support.wheel import built_wheel, fresh_venv

EXAMPLES = ("flask_sqlalchemy", "django_project", "fastapi_async")


def as_url(conninfo: str) -> str:
    """A postgresql:// URL for a conninfo string (the fixtures' form): what users put in DATABASE_URL."""
    from urllib.parse import quote

    from psycopg.conninfo import conninfo_to_dict

    p = conninfo_to_dict(conninfo)
    auth = quote(str(p.get("user", "postgres"))) + (f":{quote(str(p['password']))}" if p.get("password") else "")
    return f"postgresql://{auth}@{p.get('host', '127.0.0.1')}:{p.get('port', 5432)}/{p['dbname']}"


def run_check(python: str, folder: Path, db_url: str, logs: Path) -> subprocess.CompletedProcess[str]:
    """`python check.py` in `folder`, as a user runs it: only DATABASE_URL set, no checkout on the path."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SKIPLOCK_", "DJANGO_")) and k not in ("PYTHONPATH", "DATABASE_URL")}
    env.update({"DATABASE_URL": as_url(db_url), "EXAMPLE_LOGS": str(logs)})
    logs.mkdir(parents=True, exist_ok=True)
    return subprocess.run([python, "check.py"], cwd=folder, env=env, capture_output=True, text=True, timeout=240)


def explain(result: subprocess.CompletedProcess[str], logs: Path) -> str:
    parts = [result.stdout, result.stderr]
    parts += [f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in sorted(logs.glob("*.log"))]
    return "\n".join(parts)


@pytest.mark.slow
@pytest.mark.parametrize("example", EXAMPLES)
def test_example_from_the_checkout(example: str, fresh_db_url: str, tmp_path: Path) -> None:
    result = run_check(sys.executable, REPO / "examples" / example, fresh_db_url, tmp_path / "logs")
    assert result.returncode == 0, explain(result, tmp_path / "logs")
    assert "all checks passed" in result.stdout


@pytest.fixture(scope="session")
def wheel_venv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh venv outside the checkout, as a newcomer makes one: nothing of this interpreter's packages
    (no --system-site-packages), skiplock from the wheel built from the checkout with its dependencies
    resolved by pip, and each example's own requirements.txt (from the package index pip is set up with)."""
    root = tmp_path_factory.mktemp("wheel")
    wheel = built_wheel(tmp_path_factory)
    requirements = [arg for name in EXAMPLES for arg in ("-r", str(REPO / "examples" / name / "requirements.txt"))]
    yield fresh_venv(root / "venv", str(wheel), *requirements)
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.timeout(900)  # the first one waits for the venv's install of every dependency from the index
@pytest.mark.parametrize("example", EXAMPLES)
def test_example_from_the_wheel_in_a_fresh_venv(example: str, wheel_venv: Path, fresh_db_url: str,
                                                tmp_path: Path) -> None:
    python = str(wheel_venv / "bin" / "python")
    where = subprocess.run([python, "-c", "import skiplock; print(skiplock.__file__)"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=60, env={"PATH": os.environ.get("PATH", "")})
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(wheel_venv), where.stdout  # not the checkout
    borrowed = subprocess.run([python, "-c", "import pytest"], cwd=tmp_path, capture_output=True, timeout=60)
    assert borrowed.returncode != 0, "the venv sees the test interpreter's packages: not a newcomer's venv"
    folder = tmp_path / example
    shutil.copytree(REPO / "examples" / example, folder, ignore=shutil.ignore_patterns("__pycache__"))
    result = run_check(python, folder, fresh_db_url, tmp_path / "logs")
    assert result.returncode == 0, explain(result, tmp_path / "logs")
    assert "all checks passed" in result.stdout
