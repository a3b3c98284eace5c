"""skiplock.testing, used the way an application uses it: its own folder, its own pytest run.

examples/testing/ is a small application (a Flask view that enqueues in its transaction, a
handler that succeeds, retries and gives up) with the tests its developers would write; the
README shows the same files. Here it is copied to a temporary folder and run by pytest in a
subprocess against a database the plugin creates on our test server.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from tests.conftest import REPO

EXAMPLE = REPO / "examples" / "testing"

FAILING_TEST = '''
from skiplock.testing import assert_enqueued
import skiplock


def test_expects_a_job_that_is_not_there(skiplock_db):
    skiplock.enqueue("emails", {"to": "someone@example.com"})
    assert_enqueued("emails", {"to": "nobody@example.com"})
'''


def _run_user_suite(folder: Path, server_url: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": server_url}
    env.pop("SKIPLOCK_TEST_DATABASE_URL", None)
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rf", str(folder)],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=180)


def _test_databases(server_url: str) -> set[str]:
    """The databases named as skiplock.testing names them (this suite's own are named otherwise, so
    that pytest-xdist's other workers making theirs meanwhile do not count)."""
    with psycopg.connect(server_url, autocommit=True) as conn:
        return {r[0] for r in conn.execute("SELECT datname FROM pg_database WHERE datname LIKE 'skiplock_test_%'")}


@pytest.mark.slow  # 8-25 s each (fuzzing, a second cluster, a subprocess suite): the full run, not the edit-test loop
def test_a_users_test_suite_runs_with_the_plugin(tmp_path: Path, pg_admin_url: str) -> None:
    folder = tmp_path / "myapp"
    shutil.copytree(EXAMPLE, folder, ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "pytest.ini").write_text("[pytest]\n")  # the application's rootdir, not ours
    (folder / "test_expected_failure.py").write_text(FAILING_TEST)
    before = _test_databases(pg_admin_url)

    result = _run_user_suite(folder, pg_admin_url)

    output = result.stdout + result.stderr
    assert result.returncode == 1, output  # exactly the one test written to fail, fails
    assert "1 failed, 4 passed" in output, output
    # the failure names what was expected and lists what is queued instead
    assert "expected a job in queue 'emails' with payload containing {'to': 'nobody@example.com'}" in output
    assert "'to': 'someone@example.com'" in output
    # the session's database was created on the server and dropped at the end
    assert _test_databases(pg_admin_url) == before
