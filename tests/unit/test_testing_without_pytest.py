"""`skiplock.testing` imports without pytest: an application's runtime (a tutorial's venv) has none,
and its functions (drain, enqueued_jobs, assert_enqueued) need none; the fixtures come with pytest."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO

BLOCK_PYTEST = """
import sys
sys.modules["pytest"] = None  # as if pytest were not installed: importing it raises ImportError
import skiplock.testing as t
print(sorted(n for n in ("drain", "enqueued_jobs", "assert_enqueued", "skiplock_db") if hasattr(t, n)))
"""


def test_skiplock_testing_imports_without_pytest() -> None:
    out = subprocess.run([sys.executable, "-c", BLOCK_PYTEST], cwd=REPO, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['assert_enqueued', 'drain', 'enqueued_jobs']"


def test_with_pytest_the_plugin_still_gives_its_fixtures() -> None:
    import skiplock.testing as t

    assert {"skiplock_db", "skiplock_conn", "skiplock_database_url"} <= set(dir(t))
