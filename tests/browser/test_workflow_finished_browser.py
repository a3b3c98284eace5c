"""A workflow that a real worker ran to the end, in a real browser: the page offers no action when there is
nothing to act on, every box names its task after its row is deleted, and on a phone the graph is all
reachable (it fits the screen or scrolls inside its own box, saying so)."""

from __future__ import annotations

from typing import Any

import pytest

import skiplock
from tests.browser.conftest import log_in
from tests.support.helpers import scalar, wait_for

KIDS = 3


def _finished_workflow(conn: Any, spawn_worker: Any) -> int:
    """root -> KIDS children -> summary, all in wfc_step, all succeeded; history mode delete takes the rows."""
    root = skiplock.enqueue("wfc_step", {"n": 0})
    kids = skiplock.enqueue_many([{"queue": "wfc_step", "payload": {"n": i}, "depends_on": [root]}
                                  for i in range(1, KIDS + 1)])
    skiplock.enqueue("wfc_step", {"n": -1}, depends_on=kids)
    worker = spawn_worker(SKIPLOCK_TASKS="tests.support.console_workflow_handlers", SKIPLOCK_QUEUES="wfc_step")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs") == 0, timeout=60,
             message="the worker to run the whole workflow (its rows deleted)")
    worker.terminate()
    return root


@pytest.mark.parametrize("width", [1440, 390])
def test_a_finished_workflow_offers_no_action_and_names_every_task(page: Any, console: Any, conn: Any,
                                                                   spawn_worker: Any, width: int) -> None:
    root = _finished_workflow(conn, spawn_worker)
    page.set_viewport_size({"width": width, "height": 900})
    log_in(page, console)
    page.goto(f"{console.url}/workflows/{root}")
    page.wait_for_selector("svg.dag")
    assert page.locator("li.count[data-state=succeeded] strong").inner_text() == str(KIDS + 2)
    # nothing is dead and nothing is left to run: no button to retry or cancel, and the page says why
    assert page.locator("button:has-text('Retry the dead ones')").count() == 0
    assert page.locator("button:has-text('Cancel the rest')").count() == 0
    assert "nothing to retry or cancel" in page.locator("[data-nothing-to-act-on]").inner_text()
    # each box names its task (its queue), kept after the rows were deleted; no "row gone" jargon
    labels = page.locator("svg.dag g.node text.l2").all_text_contents()
    assert labels and set(labels) == {"wfc_step"}, labels
    assert "row gone" not in page.content()

    # the whole graph can be seen: it fits its box, or its box scrolls sideways and says so
    box = page.evaluate("""() => { const w = document.querySelector('.dag-wrap'), s = w.querySelector('svg');
        return {wrapRight: w.getBoundingClientRect().right, svgRight: s.getBoundingClientRect().right,
                scrollable: w.scrollWidth > w.clientWidth, overflow: getComputedStyle(w).overflowX}; }""")
    assert box["wrapRight"] <= width
    if box["scrollable"]:
        assert box["overflow"] in ("auto", "scroll") and page.locator(".dag-hint").is_visible(), box
    else:
        assert box["svgRight"] <= box["wrapRight"] + 1, box
    assert page.evaluate("document.documentElement.scrollWidth") <= width
