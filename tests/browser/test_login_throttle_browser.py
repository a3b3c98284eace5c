"""Failed logins slow the (account, address) pair that failed, with a growing delay, and never lock the on-call
out: in Chromium against gunicorn, every client on 127.0.0.1 (a script and the on-call share the address, as
behind one NAT). The throttles are on the Audit page and on Health, screenshotted at 1440 and 390 px
(docs/img/ with UPDATE_DOCS_IMG=1)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

from tests.browser.conftest import PASSWORD, USER, log_in
from tests.conftest import REPO
from tests.console.test_dead_groups_from_a_worker import _worker_made_dead_jobs
from tests.support.helpers import scalar, wait_for


def _submit(page: Any, url: str, user: str, password: str) -> str:
    """One try through the login form; the page's error line ("" when it logged in)."""
    page.goto(url + "/login")
    page.fill("input[name=user]", user)
    page.fill("input[name=password]", password)
    with page.expect_navigation():
        page.click("form[action='/login'] button[type=submit]")
    page.wait_for_selector("main")
    error = page.locator("p.flash.error")
    return str(error.first.inner_text()) if error.count() else ""


def _wait_asked(text: str) -> int:
    found = re.search(r"[Ww]ait (\d+) seconds", text)
    return int(found.group(1)) if found else 0


def test_a_failing_script_never_locks_the_on_call_out(page: Any, console: Any, conn: Any, spawn_worker: Any,
                                                       tmp_path: Path) -> None:
    _worker_made_dead_jobs(conn, spawn_worker)  # the on-call has real dead letters to look at
    # a script (another client on the same address) tries a wrong password for its account five times
    script = page.context.browser.new_context().new_page()
    answers = [_submit(script, console.url, "ci-bot", f"wrong-{n}") for n in range(5)]
    assert all(a.startswith("Wrong user or password.") for a in answers), answers

    # the on-call, on the same address, logs in at once with the right password
    log_in(page, console)
    assert page.url == console.url + "/"
    assert page.locator("tr[data-queue='orders'] [data-count='dead']").inner_text().strip() == "14"
    assert _wait_asked(answers[-1]) == 1  # the script's pair, past the limit, waits: 1 s now, then 2, 4 ...

    # the script keeps failing: each failure past the limit doubles its wait; its tries during a wait are refused
    wait_for(lambda: _wait_asked(_submit(script, console.url, "ci-bot", "wrong-again")) == 2, timeout=30,
             message="the script's next failure after its 1 s wait, which doubles it")
    throttled = "SELECT array_agg((detail->>'seconds')::int ORDER BY id) FROM audit_log " \
                "WHERE action = 'login throttled' AND actor = %s"
    assert scalar(conn, throttled, ("ci-bot",)) == [1, 2]

    # the on-call mistypes their own password five times: slowed, not locked out; the right one then works
    page.click("form.who button[type=submit]")
    for n in range(5):
        error = _submit(page, console.url, USER, f"typo-{n}")
    assert _wait_asked(error) == 1
    wait_for(lambda: _submit(page, console.url, USER, PASSWORD) == "", timeout=30,
             message="the right password after a one-second wait")
    page.wait_for_selector("h1:has-text('Queues')")
    assert scalar(conn, throttled, (USER,)) == [1]
    assert scalar(conn, "SELECT count(*) FROM login_failures WHERE key LIKE %s", (f"%{USER}%",)) == 0  # cleared

    # Health lists the throttles of the day: who, from which address, how many failures, how long
    for width, height in ((1440, 900), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        page.goto(console.url + "/health/")
        box = page.locator("#login-throttles")
        assert box.get_attribute("data-throttled") == "3"
        rows = box.locator("tr[data-throttle-user]")
        assert rows.evaluate_all("rs => rs.map(r => r.dataset.throttleUser)") == [USER, "ci-bot", "ci-bot"]
        assert "127.0.0.1" in rows.first.inner_text()
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        name = f"console-login-throttles-{width}.png"
        box.screenshot(path=str(tmp_path / name))  # the section, not the whole page of checks
        if os.environ.get("UPDATE_DOCS_IMG") == "1":
            shutil.copy(tmp_path / name, REPO / "docs" / "img" / name)
