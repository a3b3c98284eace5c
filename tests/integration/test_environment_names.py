"""Environment variables that skiplock's own code and test suite read never trip load_settings.

load_settings refuses an unknown SKIPLOCK_* name (a typo silently ignored is worse than an error). So
a SKIPLOCK_* variable read anywhere else must be one it knows, or a run that sets it breaks every
process that reads its settings: the fault books' report was SKIPLOCK_FAULT_REPORT, and setting it
made the test process's own enqueue fail; the testing plugin's SKIPLOCK_TEST_DATABASE_URL did the
same to any skiplock command started in a user's test session.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import psycopg
import pytest

from skiplock.core.plumbing.config import _KNOWN_ELSEWHERE, _PARSERS
from skiplock.core.producer import enqueue
from tests.fault import books
from tests.support.workers import REPO, worker_env

# a read of a variable: environ.get( / environ[ / getenv( followed by its quoted SKIPLOCK_* name
READ = re.compile(r"""(?:environ\.get\(|environ\[|getenv\()\s*["'](SKIPLOCK_[A-Z0-9_]+)["']""")


def test_every_skiplock_variable_read_in_the_code_is_a_known_setting() -> None:
    reads: dict[str, str] = {}
    for folder in ("worker", "webapp", "tests"):
        for path in (REPO / folder).rglob("*.py"):
            for match in READ.finditer(path.read_text()):
                reads.setdefault(match.group(1), str(path.relative_to(REPO)))
    assert "SKIPLOCK_DB_DEADLINE" in reads  # the pattern finds reads (worker/core/plumbing/deadline.py)
    unknown = {name: where for name, where in reads.items() if name not in set(_PARSERS) | _KNOWN_ELSEWHERE}
    assert not unknown, f"read but refused by load_settings: {unknown}"


def test_the_fault_books_report_leaves_the_settings_alone(db_url: str, monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path) -> None:
    report = tmp_path / "books.jsonl"
    monkeypatch.setenv(books.REPORT_VARIABLE, str(report))
    with psycopg.connect(db_url) as conn:
        job_id = enqueue("report_check", {}, conn=conn)  # reads this environment's settings
        conn.commit()
        try:
            books.record(books.audit(conn, "report_variable", [job_id], effects=False))
        finally:
            books.RESULTS.pop()  # not a fault scenario: kept out of the session's summary
    line = json.loads(report.read_text())
    assert (line["scenario"], line["enqueued"], line["queued"], line["lost"]) == ("report_variable", 1, 1, 0)


@pytest.mark.parametrize("name", ["SKIPLOCK_TEST_DATABASE_URL", "SKIPLOCK_TEST_SERVER_URL"])
def test_a_command_runs_with_the_testing_plugins_variables_set(name: str, db_url: str) -> None:
    env = {**worker_env(db_url), name: db_url}
    proc = subprocess.run([sys.executable, "-m", "skiplock.tools.cli", "migrate"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "unknown setting" not in proc.stderr
