"""Search finds the jobs a real worker moved to jobs_history (SKIPLOCK_HISTORY_MODE=partitioned), marked as
such, beside the jobs still in the table; a found job's page shows what history keeps of it."""

from __future__ import annotations

from typing import Any

from skiplock import enqueue, enqueue_many
from tests.browser.conftest import log_in
from tests.support.helpers import scalar, wait_for


def test_search_reads_jobs_history_and_marks_what_it_found_there(page: Any, console: Any, conn: Any,
                                                                 spawn_worker: Any) -> None:
    done = enqueue_many([("t1", {"order": 7001 + n}) for n in range(3)])
    worker = spawn_worker(SKIPLOCK_QUEUES="t1", SKIPLOCK_HISTORY_MODE="partitioned")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs_history WHERE id = ANY(%s)", (done,)) == 3,
             timeout=60, message="the worker to run the jobs and move them to jobs_history")
    worker.terminate()
    live = enqueue("t1", {"order": 7100})  # still queued: in jobs
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE id = ANY(%s)", (done,)) == 0

    log_in(page, console)
    page.goto(f"{console.url}/search/?queue=t1")
    page.wait_for_selector("table.jobs tbody tr[data-job-id]")
    ids = [int(i) for i in page.locator("table.jobs tbody tr[data-job-id]").evaluate_all(
        "rows => rows.map(r => r.dataset.jobId)")]
    assert ids == [live, *sorted(done, reverse=True)]  # newest first, both tables
    for job in done:
        row = page.locator(f"tr[data-job-id='{job}']")
        assert row.get_attribute("data-archived") is not None
        assert "in history" in row.inner_text() and "succeeded" in row.inner_text()
    assert page.locator(f"tr[data-job-id='{live}']").get_attribute("data-archived") is None

    # by id, and by a payload value, too; the job's page shows what history keeps
    page.goto(f"{console.url}/search/?id={done[1]}")
    page.wait_for_selector(f"tr[data-job-id='{done[1]}'][data-archived]")
    page.goto(f"{console.url}/search/?path=order&value=7003")
    page.wait_for_selector(f"tr[data-job-id='{done[2]}'][data-archived]")
    page.click(f"tr[data-job-id='{done[2]}'] a[href='/jobs/{done[2]}']")
    page.wait_for_selector("#job-history")
    assert '"order": 7003' in page.locator("pre.payload").inner_text()
