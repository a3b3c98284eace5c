"""Every failed attempt's error is kept on the job, bounded to the last 20, by a real worker;
and the console's job page lists them in a real browser."""

from __future__ import annotations

from pathlib import Path

import pytest

from skiplock import enqueue
from skiplock.core.state_changes import ERROR_CHARS, KEEP_ATTEMPTS
from tests.browser.conftest import log_in
from tests.conftest import REPO
from tests.support.helpers import scalar, wait_for

FAILING_TASKS = '''
from skiplock import task


@task("flaky")
def flaky(payload, job):
    raise ValueError(f"failure number {job.attempt} " + "x" * payload.get("pad", 0))
'''


def finished(conn, job_id: int) -> bool:
    return scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (job_id,)) == "dead"


@pytest.mark.slow
@pytest.mark.browser
def test_the_last_20_attempts_are_kept_and_the_console_lists_them(page, console, conn, spawn_worker,
                                                                   tmp_path: Path) -> None:
    (tmp_path / "failing_tasks.py").write_text(FAILING_TASKS)
    many = enqueue("flaky", {"pad": 5000}, max_attempts=23)
    few = enqueue("flaky", {}, max_attempts=2)
    spawn_worker(SKIPLOCK_TASKS="failing_tasks", PYTHONPATH=f"{tmp_path}:{REPO}", SKIPLOCK_POLL_INTERVAL="0.05",
                 SKIPLOCK_BACKOFF_BASE="0.01", SKIPLOCK_BACKOFF_CAP="0.02")
    wait_for(lambda: finished(conn, many) and finished(conn, few), timeout=120, message="both jobs dead")

    history = scalar(conn, "SELECT attempt_errors FROM jobs WHERE id = %s", (many,))
    assert len(history) == KEEP_ATTEMPTS
    assert [h["attempt"] for h in history] == list(range(4, 24))  # the newest 20 of 23, oldest first
    assert all(len(h["error"]) == ERROR_CHARS and h["worker"] and h["duration_ms"] >= 0 for h in history)
    assert "failure number 23" in history[-1]["error"]
    assert "failure number 23" in scalar(conn, "SELECT last_error FROM jobs WHERE id = %s", (many,))
    short = scalar(conn, "SELECT attempt_errors FROM jobs WHERE id = %s", (few,))
    assert [h["attempt"] for h in short] == [1, 2]
    assert "ValueError: failure number 1" in short[0]["error"]

    log_in(page, console)
    page.goto(f"{console.url}/jobs/{few}")
    items = page.locator("ol.attempts li.attempt")
    items.first.wait_for()
    assert items.count() == 2
    assert [items.nth(i).get_attribute("data-attempt") for i in range(2)] == ["2", "1"]  # newest first
    assert "ValueError: failure number 1" in items.nth(1).inner_text()
    page.goto(f"{console.url}/jobs/{many}")
    page.locator("ol.attempts li.attempt").first.wait_for()
    assert page.locator("ol.attempts li.attempt").count() == KEEP_ATTEMPTS
