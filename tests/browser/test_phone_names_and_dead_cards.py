"""On a 390 px phone, with dead jobs a real worker made in queues with long names: a queue's name wraps only
after its separators (or is cut with an ellipsis, the whole name in its tooltip), never mid-word; and the
dead-letter page's groups and jobs are cards, each cell (the error, Retry and Purge) on the screen."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from skiplock import enqueue_many
from tests.browser.conftest import log_in
from tests.conftest import REPO
from tests.support.helpers import scalar, wait_for

QUEUES = ("payments_settlement.eu-west-1", "notificationsdigestbackfillweekly")
TASKS = f'''
from skiplock import task


def fail(payload):
    raise ConnectionError(f"POST https://hooks.example.com/settle/{{payload['n']}}: 503")


for queue in {QUEUES!r}:
    task(queue, max_attempts=1)(fail)
'''

# Every line break inside a text node that holds a queue's name: [name, the character before the break,
# whether the name's box is cut (an ellipsis), and the box's tooltip].
NAME_BREAKS = """names => {
  const out = [];
  const walker = document.createTreeWalker(document.querySelector('main'), NodeFilter.SHOW_TEXT);
  const nodes = [];
  while (walker.nextNode()) nodes.push(walker.currentNode);
  for (const name of names) {
    // a name may be split over several text nodes (a <wbr> between its parts): join a parent's text nodes
    const parents = new Set(nodes.filter(n => name.includes(n.data) && n.data.length > 0
                                         && n.parentElement.textContent.includes(name)).map(n => n.parentElement));
    for (const el of parents) {
      if (el.offsetParent === null) continue;
      let prevTop = null, prevChar = null;
      for (const n of el.childNodes) {
        if (n.nodeType !== Node.TEXT_NODE) continue;
        for (let i = 0; i < n.data.length; i++) {
          const r = document.createRange(); r.setStart(n, i); r.setEnd(n, i + 1);
          const rect = r.getBoundingClientRect();
          if (rect.width === 0 && rect.height === 0) continue;
          if (prevTop !== null && rect.top > prevTop + 3) {
            const box = el.closest('.qname') || el;
            out.push([name, prevChar, box.scrollWidth > box.clientWidth + 1, box.getAttribute('title')]);
          }
          prevTop = rect.top; prevChar = n.data[i];
        }
      }
    }
  }
  return out;
}"""

# the right edge of each shown cell of a table's first row, with its label
FIRST_ROW = """sel => Array.from(document.querySelectorAll(sel + ' tbody tr:first-child td'))
  .filter(td => td.offsetParent !== null)
  .map(td => [td.dataset.label || td.textContent.slice(0, 20), Math.round(td.getBoundingClientRect().right)])"""


def test_queue_names_wrap_at_separators_and_dead_letters_are_cards(page: Any, console: Any, conn: Any,
                                                                   spawn_worker: Any, tmp_path: Path) -> None:
    (tmp_path / "long_named_tasks.py").write_text(TASKS)
    enqueue_many([{"queue": q, "payload": {"n": n}, "max_attempts": 1} for q in QUEUES for n in range(3)])
    worker = spawn_worker(SKIPLOCK_TASKS="long_named_tasks", SKIPLOCK_QUEUES=",".join(QUEUES),
                          PYTHONPATH=f"{tmp_path}:{REPO}")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'dead'") == 6, timeout=60,
             message="the worker to kill every job")
    worker.terminate()

    log_in(page, console)
    page.set_viewport_size({"width": 390, "height": 844})
    for path in ("/", "/dead/?window=all", f"/dead/?window=all&queue={QUEUES[0]}", f"/queues/{QUEUES[0]}?status=dead",
                 f"/queues/{QUEUES[1]}?status=dead", "/search/?state=dead",
                 f"/jobs/{scalar(conn, 'SELECT min(id) FROM jobs')}"):
        page.goto(console.url + path)
        page.wait_for_selector("main")
        for name, before, cut, title in page.evaluate(NAME_BREAKS, list(QUEUES)):
            # a break only after a separator; a part too wide for its box is cut, with the whole name on hover.
            # A break after a space is between words around the name (e.g. "New job on <name>"), never in it.
            assert before.isspace() or before in "-_.:/" or (cut and title == name), (path, name, before, cut, title)
        assert page.evaluate("document.documentElement.scrollWidth") <= 390, path

    # the dead-letter page: its groups and its jobs are cards, each cell on the screen
    page.goto(f"{console.url}/dead/?window=all&queue={QUEUES[0]}")
    page.wait_for_selector("table.jobs tbody tr")
    for table in ("table.groups", "table.jobs"):
        cells = page.evaluate(FIRST_ROW, table)
        assert cells and all(right <= 390 for _, right in cells), (table, cells)
    for button in ("retry", "purge"):
        box = page.locator(f"table.jobs tbody tr:first-child button:has-text('{button}')").bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390, (button, box)
    group = page.locator("table.groups tbody tr:first-child td.err a")
    group_box = group.bounding_box()
    assert group_box is not None and group_box["width"] > 150, group_box  # the error reads across the card
