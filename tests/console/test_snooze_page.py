"""The job page shows how often a job snoozed (migration 012), for a snooze made by a real run."""

from __future__ import annotations

from skiplock import Snooze, enqueue
from skiplock.core.registry import Registry, Task
from skiplock.tools.testing import drain


def test_job_page_shows_the_snooze_count(admin, conn):
    def dozy(payload):
        raise Snooze(600)

    registry = Registry()
    registry.add(Task("dozy", dozy, wants_job=False))
    job = enqueue("dozy", {})
    assert "snoozed" not in admin.get(f"/jobs/{job}").get_data(as_text=True)
    drain("dozy", registry=registry)
    conn.execute("UPDATE jobs SET run_at = now() WHERE id = %s", (job,))  # wake it for a second snooze
    drain("dozy", registry=registry)
    html = admin.get(f"/jobs/{job}").get_data(as_text=True)
    assert '<dt>snoozed</dt><dd class="snoozed">2 times</dd>' in html
    assert "0 of" in html  # no attempt used up
