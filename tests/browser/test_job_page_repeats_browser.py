"""A job that a real worker failed the same way on every attempt, on its page in a real browser: the repeated
traceback is shown once with its count, and the timeline names each attempt's cause (the exception's class
and the end of its message), not the ids a message starts with."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from skiplock import enqueue
from tests.browser.conftest import log_in
from tests.conftest import REPO
from tests.support.helpers import scalar, wait_for

ATTEMPTS = 5

BILLING_TASKS = '''
from skiplock import task


class UpstreamError(Exception):
    """The payment provider's answer, as a client library raises it."""


@task("billing")
def charge(payload):
    raise UpstreamError(f"order {payload['order']} (customer cus_{payload['customer']}, invoice in_"
                        f"{payload['invoice']}, idempotency key {payload['key']}): payment provider returned "
                        "503 Service Unavailable")
'''

# whether an element shows all of its text (a line clamp or a fixed height would hide the rest)
CLIPPED = "e => e.scrollHeight > e.clientHeight + 1 || e.scrollWidth > e.clientWidth + 1"


@pytest.mark.parametrize("width", [390, 1440])
def test_repeated_tracebacks_collapse_and_the_timeline_names_the_cause(page: Any, console: Any, conn: Any,
                                                                        spawn_worker: Any, tmp_path: Path,
                                                                        width: int) -> None:
    (tmp_path / "billing_tasks.py").write_text(BILLING_TASKS)
    job = enqueue("billing", {"order": 48211, "customer": 99172, "invoice": 55210,
                              "key": "7f1c2e9a-0b4d-4e51-9c3a-2d8e6f1a0b77"}, max_attempts=ATTEMPTS)
    spawn_worker(SKIPLOCK_TASKS="billing_tasks", SKIPLOCK_QUEUES="billing", PYTHONPATH=f"{tmp_path}:{REPO}",
                 SKIPLOCK_POLL_INTERVAL="0.05", SKIPLOCK_BACKOFF_BASE="0.01", SKIPLOCK_BACKOFF_CAP="0.02")
    wait_for(lambda: scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (job,)) == "dead", timeout=90,
             message="the job to fail every attempt")
    stored = scalar(conn, "SELECT attempt_errors FROM jobs WHERE id = %s", (job,))
    assert len(stored) == ATTEMPTS and len({a["error"] for a in stored}) == 1  # one traceback, stored 5 times

    page.set_viewport_size({"width": width, "height": 900})
    log_in(page, console)
    page.goto(f"{console.url}/jobs/{job}")
    page.locator("ol.attempts li.attempt").first.wait_for()
    # the traceback once, with the count and every attempt's number
    entries = page.locator("ol.attempts > li.attempt")
    assert entries.count() == 1
    assert entries.first.get_attribute("data-count") == str(ATTEMPTS)
    assert page.locator("ol.attempts pre.attempt-error").count() == 1
    assert f"{ATTEMPTS} attempts failed the same way" in entries.first.inner_text()
    assert f"attempts {ATTEMPTS}\u20131" in entries.first.inner_text()
    page.locator("ol.attempts details.attempt-list summary").click()
    assert page.locator("ol.attempts details.attempt-list li").count() == ATTEMPTS

    # each failed attempt on the timeline names the cause, whole: the class and the message's end
    errors = page.locator("ol.timeline li.step[data-kind=attempt] .step-error")
    assert errors.count() == ATTEMPTS
    for i in range(ATTEMPTS):
        shown = errors.nth(i)
        text = shown.inner_text()
        assert text.startswith("UpstreamError"), text
        assert text.endswith("503 Service Unavailable"), text
        assert not shown.evaluate(CLIPPED), text
    assert page.evaluate("document.documentElement.scrollWidth") <= width
