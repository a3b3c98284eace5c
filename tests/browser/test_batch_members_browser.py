"""A batch whose members a real worker is failing, on its page in a real browser: a member that failed and
waits to retry says so, with its attempts and its last error, instead of looking untouched ("queued")."""

from __future__ import annotations

from typing import Any

import pytest

import skiplock
from tests.browser.conftest import log_in
from tests.support.helpers import scalar, wait_for

FAILING = 3


@pytest.mark.parametrize("width", [1440, 390])
def test_failing_batch_members_show_their_attempts_and_error(page: Any, console: Any, conn: Any,
                                                             spawn_worker: Any, width: int) -> None:
    with skiplock.batch(on_complete=("t2", {"done": True})) as batch:
        failing = batch.enqueue_many([{"queue": "t1", "payload": {"fail_times": 9, "n": n}, "max_attempts": 4}
                                      for n in range(FAILING)])
        fine = batch.enqueue("t1", {"n": 99})
    # a long backoff: after its first failure each member waits, queued, for its second attempt
    worker = spawn_worker(SKIPLOCK_QUEUES="t1", SKIPLOCK_BACKOFF_BASE="600", SKIPLOCK_BACKOFF_CAP="900")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE id = ANY(%s) AND status = 'queued' AND attempts = 1",
                            (failing,)) == FAILING, timeout=60, message="each failing member to fail once")
    worker.terminate()

    page.set_viewport_size({"width": width, "height": 900})
    log_in(page, console)
    page.goto(f"{console.url}/batches/{batch.id}")
    page.wait_for_selector(f"li[data-job-id='{failing[0]}']")
    for job in failing:
        member = page.locator(f"li[data-job-id='{job}']")
        text = member.inner_text()
        assert "queued" not in text and "failing" in text, text
        assert "attempts 1/4" in text and "retry 2 of 4" in text, text
        assert "RuntimeError: planned failure on attempt 1" in text, text
    assert page.locator(f"li[data-job-id='{fine}']").count() == 0  # it succeeded: not among the unfinished
    assert page.evaluate("document.documentElement.scrollWidth") <= width
