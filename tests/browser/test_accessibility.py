"""axe-core (vendored under tests/browser/vendor/, pinned by sha256 like htmx) finds no serious or
critical WCAG violation on any console page, filled with what a real worker produces: dead jobs with
tracebacks, running jobs, a recurring schedule the scheduler fired, a paused queue."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from skiplock import enqueue_many
from tests.browser.conftest import log_in
from tests.console.test_dead_groups_from_a_worker import _worker_made_dead_jobs
from tests.support.helpers import scalar, wait_for

VENDOR = Path(__file__).resolve().parent / "vendor"
AXE = VENDOR / "axe-core-4.10.2.min.js"
RUN_AXE = """async () => {
  const tags = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"];
  const result = await axe.run(document, {runOnly: {type: "tag", values: tags}});
  return result.violations.filter(v => v.impact === "serious" || v.impact === "critical")
    .map(v => ({id: v.id, impact: v.impact, help: v.help, where: v.nodes.slice(0, 3).map(n => n.target.join(" "))}));
}"""


def test_axe_core_is_the_pinned_file() -> None:
    pinned = (VENDOR / f"{AXE.name}.sha256").read_text().split()[0]
    assert hashlib.sha256(AXE.read_bytes()).hexdigest() == pinned


def _violations(page: Any) -> list[dict[str, Any]]:
    # evaluated through the browser's debugging protocol, which the page's CSP does not govern
    page.evaluate(AXE.read_text() + "\n;0")
    return list(page.evaluate(RUN_AXE))


def test_no_serious_or_critical_violation_on_any_page(page: Any, console: Any, conn: Any, spawn_worker: Any) -> None:
    ids = _worker_made_dead_jobs(conn, spawn_worker)
    enqueue_many([("t1", {"sleep_after": 60, "n": n}) for n in range(2)])
    spawn_worker(SKIPLOCK_TASKS="tests.support.handlers,tests.support.recurring_handlers", SKIPLOCK_QUEUES="t1,rtick")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'running' AND queue = 't1'") == 2,
             timeout=60, message="running jobs")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM recurring_slots") >= 1, timeout=60, message="a fired slot")
    conn.execute("INSERT INTO paused_queues (queue, paused_by) VALUES ('t1', 'operator')")
    waiting = enqueue_many([("t2", {"n": 1})])[0]  # an unserved queue: the flag, the reasons, Health failing

    page.goto(console.url + "/login")
    found = {"/login": _violations(page)}
    log_in(page, console)
    pages = ["/", "/queues/t1", "/queues/orders?status=dead", "/running/", "/dead/", "/dead/?queue=orders",
             f"/jobs/{ids['connection'][0]}", f"/jobs/{waiting}", "/queues/t2", "/queues/t1?status=running",
             "/?range=7d", "/workers/", "/recurring/", "/health"]
    for path in pages:
        page.goto(console.url + path)
        page.wait_for_selector("main")
        found[path] = _violations(page)
    bad = {path: v for path, v in found.items() if v}
    assert not bad, "\n".join(f"{p}: {v}" for p, v in bad.items())
