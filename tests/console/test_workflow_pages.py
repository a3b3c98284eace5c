"""The console's workflow pages (issue 33) on workflows made through the public API and run by
skiplock.tools.testing.drain (the worker's claim and ack): the job page's parents, dependents, result and
"waiting on N of M"; the workflow page's DAG, counts and its two actions; the batch page; progress
on Long-runners."""

from __future__ import annotations

import contextlib
import re

import psycopg
import pytest

import skiplock
from skiplock.tools import testing
from skiplock.webapp.shared import dag
from tests.console.conftest import Session
from tests.support import console_workflow_handlers as handlers
from tests.support.helpers import scalar

DRAIN = ["wfc_step", "wfc_big", "wfc_fail", "wfc_progress"]


def _fan(children: int, child_queue: str = "wfc_step") -> tuple[int, list[int], int]:
    """root -> `children` -> summary, through the public API."""
    root = skiplock.enqueue("wfc_step", {"n": 0})
    kids = skiplock.enqueue_many([{"queue": child_queue, "payload": {"n": i}, "depends_on": [root]}
                                  for i in range(1, children + 1)])
    summary = skiplock.enqueue("wfc_step", {"n": -1}, depends_on=kids)
    return root, kids, summary


def _run(jobs: int) -> None:
    """Run the first `jobs` ready jobs (as a worker would), leaving the rest."""
    with contextlib.suppress(testing.DrainLimitExceeded):  # more were ready: that is the point
        testing.drain(DRAIN, max_jobs=jobs)


def _svg_jobs(html: str) -> set[int]:
    """The job ids drawn as single boxes in the workflow's SVG."""
    svg = html[html.index("<svg class=\"dag\""):html.index("</svg>")]
    return {int(i) for i in re.findall(r'data-job-id="(\d+)"', svg)}


def _counts(html: str) -> dict[str, int]:
    return {s: int(n.replace(",", "")) for s, n in
            re.findall(r'<li class="count" data-state="(\w+)">.*?<strong>([\d,]+)</strong>', html)}


def test_a_waiting_job_says_what_it_waits_on_and_links_it(admin: Session) -> None:
    root, kids, summary = _fan(3)
    html = admin.get(f"/jobs/{summary}").get_data(as_text=True)
    assert "Why isn't it running?" in html
    assert re.search(r'data-reason="waiting">Waiting on <strong class="waiting-count">3 of 3</strong>', html)
    for kid in kids:
        assert f'class="open-dep" href="/jobs/{kid}"' in html
    assert f'href="/workflows/{root}"' in html  # its workflow

    _run(2)  # the root and the first child
    html = admin.get(f"/jobs/{summary}").get_data(as_text=True)
    assert '<strong class="waiting-count">2 of 3</strong>' in html
    assert f'class="open-dep" href="/jobs/{kids[0]}"' not in html
    # the first child's row is gone (history mode delete): its edge recorded succeeded
    assert re.search(rf'data-job-id="{kids[0]}"><a href="/jobs/{kids[0]}">{kids[0]}</a>\s*'
                     r'<span class="state st-succeeded">succeeded</span>', html)
    assert "the edge recorded succeeded" in html


def test_the_workflow_page_draws_every_job_before_and_after_the_run(admin: Session) -> None:
    root, kids, summary = _fan(4)
    response = admin.get(f"/workflows/{root}")
    assert response.status_code == 200
    html = response.get_data(as_text=True)
    assert _svg_jobs(html) == {root, *kids, summary}
    assert _counts(html) == {"queued": 1, "waiting": 5}
    assert "Retry the dead ones" not in html and "Cancel the rest" in html  # none dead, some to cancel
    assert html.count('class="edge"') == 8  # 4 from the root, 4 into the summary
    # layered by depth: root at 0, the children at 1, the summary at 2
    assert re.search(rf'data-depth="2" data-job-id="{summary}"', html)

    assert len(testing.drain(DRAIN)) == 6
    html = admin.get(f"/workflows/{root}").get_data(as_text=True)
    assert _svg_jobs(html) == {root, *kids, summary}  # rows gone, still drawn from the edges
    assert _counts(html) == {"succeeded": 6}
    # a member whose row is gone no longer knows its root: its page draws the part below it
    assert _svg_jobs(admin.get(f"/workflows/{kids[1]}").get_data(as_text=True)) == {kids[1], summary}


def test_views_between_changes_show_jobs_finished_and_added_since(admin: Session) -> None:
    """The page keeps a workflow's shape between views (webapp/shared/workflow_structure.py): a job that
    finished since (its row deleted) shows its final state, a job added since is drawn."""
    root, kids, summary = _fan(3)
    assert _counts(admin.get(f"/workflows/{root}").get_data(as_text=True)) == {"queued": 1, "waiting": 4}
    _run(3)  # the root and two children: their rows are gone
    html = admin.get(f"/workflows/{root}").get_data(as_text=True)
    assert _svg_jobs(html) == {root, *kids, summary}
    assert _counts(html) == {"queued": 1, "waiting": 1, "succeeded": 3}
    late = skiplock.enqueue("wfc_step", {"n": 9}, depends_on=[kids[2]])  # joins the root's workflow
    html = admin.get(f"/workflows/{root}").get_data(as_text=True)
    assert _svg_jobs(html) == {root, *kids, summary, late}
    assert _counts(html) == {"queued": 1, "waiting": 2, "succeeded": 3}
    assert len(testing.drain(DRAIN)) == 3
    assert _counts(admin.get(f"/workflows/{root}").get_data(as_text=True)) == {"succeeded": 6}


def test_a_member_with_its_row_redirects_to_its_root(admin: Session) -> None:
    root, kids, _ = _fan(2)
    response = admin.get(f"/workflows/{kids[1]}")
    assert response.status_code == 303
    assert response.headers["Location"].endswith(f"/workflows/{root}")
    assert admin.get("/workflows/987654").status_code == 404
    assert admin.get("/workflows/abc").status_code == 400


def test_a_big_layer_is_one_box_per_queue_and_state(admin: Session) -> None:
    root, _, summary = _fan(dag.LAYER_LIMIT + 28)  # 40 children
    _run(6)  # root and 5 children: the layer holds two states now
    html = admin.get(f"/workflows/{root}").get_data(as_text=True)
    assert _svg_jobs(html) == {root, summary}
    groups = re.findall(r'class="node st-(\w+) group" data-state="\w+" data-count="(\d+)" data-depth="1"', html)
    assert sorted(groups) == [("queued", "35"), ("succeeded", "5")]
    assert "\u00d735 · queued" in html  # times 35
    assert html.count('class="edge"') == 4  # root -> 2 groups -> summary
    assert _counts(html) == {"waiting": 1, "queued": 35, "succeeded": 6}


def test_the_job_page_shows_the_result_escaped_and_cut_with_show_all(admin: Session) -> None:
    job = skiplock.enqueue("wfc_big", {"items": 3000})
    child = skiplock.enqueue("wfc_step", {"n": 1}, depends_on=[job])
    testing.drain(DRAIN)
    html = admin.get(f"/jobs/{job}").get_data(as_text=True)  # its row is gone; its result is not
    assert "row is gone" in html
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "show all" in html
    assert "2999" not in html  # cut
    full = admin.get(f"/jobs/{job}?result=all").get_data(as_text=True)
    assert "2999" in full and "show all" not in full
    assert f'href="/jobs/{child}"' in html  # its dependent


def test_cancel_the_rest_confirms_with_the_exact_count_then_cancels_and_audits(admin: Session,
                                                                             conn: psycopg.Connection) -> None:
    root, _, _ = _fan(5)
    _run(2)  # the root and one child ran; 4 children and the summary have not
    confirm = admin.post(f"/workflows/{root}/cancel-rest")
    assert confirm.status_code == 200
    html = confirm.get_data(as_text=True)
    assert 'class="confirm-count" data-count="5"' in html
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'failed'") == 0  # nothing changed yet

    done = admin.post(f"/workflows/{root}/cancel-rest", {"confirm": "yes"})
    assert done.status_code == 303
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'failed'") == 5
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE status IN ('queued', 'waiting')") == 0
    row = conn.execute("SELECT action, count, detail->>'workflow' FROM audit_log ORDER BY id DESC LIMIT 1").fetchone()
    assert row == ("cancel the rest of a workflow", 5, str(root))
    page = admin.get(f"/workflows/{root}").get_data(as_text=True)
    assert "cancelled 5 job(s)" in page
    assert _counts(page) == {"succeeded": 2, "failed": 5}


def test_retry_the_dead_ones_brings_back_their_dependents(admin: Session, conn: psycopg.Connection) -> None:
    root = skiplock.enqueue("wfc_step", {"n": 0})
    bad = skiplock.enqueue("wfc_fail", {"n": 1}, depends_on=[root])
    good = skiplock.enqueue("wfc_step", {"n": 2}, depends_on=[root])
    summary = skiplock.enqueue("wfc_step", {"n": -1}, depends_on=[bad, good])
    testing.drain(DRAIN)
    page = admin.get(f"/workflows/{root}").get_data(as_text=True)
    assert _counts(page) == {"succeeded": 2, "dead": 2}
    assert '<button type="submit" class="primary" >Retry the dead ones' in page  # now the thing to do

    html = admin.post(f"/workflows/{root}/retry-dead").get_data(as_text=True)
    assert 'class="confirm-count" data-count="1"' in html  # the one that failed on its own
    assert "<strong>1</strong> job(s) that\n    ended only because a dependency failed" in html
    assert admin.post(f"/workflows/{root}/retry-dead", {"confirm": "yes"}).status_code == 303
    assert scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (bad,)) == "queued"
    assert scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (summary,)) == "waiting"
    row = conn.execute("SELECT action, count FROM audit_log ORDER BY id DESC LIMIT 1").fetchone()
    assert row == ("retry the dead ones of a workflow", 1)


def test_a_read_only_login_cannot_act_on_a_workflow(viewer: Session, conn: psycopg.Connection) -> None:
    root, _, _ = _fan(2)
    assert viewer.post(f"/workflows/{root}/cancel-rest", {"confirm": "yes"}).status_code == 403
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'failed'") == 0


def test_an_action_without_the_csrf_token_is_refused(admin: Session, conn: psycopg.Connection) -> None:
    root, _, _ = _fan(2)
    response = admin.client.post(f"/workflows/{root}/cancel-rest", data={"confirm": "yes"})
    assert response.status_code == 400
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'failed'") == 0


def test_the_batch_page_shows_progress_and_the_callback(admin: Session, conn: psycopg.Connection) -> None:
    with skiplock.batch(on_complete=("wfc_step", {"n": "callback"}), on_success=("wfc_step", {"n": "ok"})) as b:
        members = [b.enqueue("wfc_step", {"n": 1}), b.enqueue("wfc_step", {"n": 2}), b.enqueue("wfc_fail", {"n": 3})]
    html = admin.get(f"/batches/{b.id}").get_data(as_text=True)
    assert '<strong class="batch-done">0 of 3</strong>' in html
    assert "not yet: enqueued once the last member is final" in html
    assert all(f'data-job-id="{m}"' in html for m in members)
    member_page = admin.get(f"/jobs/{members[0]}").get_data(as_text=True)
    assert f'href="/batches/{b.id}"' in member_page

    testing.drain(DRAIN)
    html = admin.get(f"/batches/{b.id}").get_data(as_text=True)
    assert '<strong class="batch-done">3 of 3</strong>' in html
    assert re.search(r'data-count="dead">1<', html) and re.search(r'data-count="succeeded">2<', html)
    complete_id = scalar(conn, "SELECT complete_job_id FROM job_batches WHERE id = %s", (b.id,))
    assert complete_id is not None
    assert re.search(rf'data-callback="on_complete">.*?href="/jobs/{complete_id}">{complete_id}</a>.*?'
                     r'st-succeeded', html, re.S)
    assert "not enqueued: a member did not succeed" in html  # on_success: one member died
    assert f'data-job-id="{members[2]}"' in html  # the dead member is listed
    assert admin.get("/batches/999999").status_code == 404


def test_long_runners_and_the_job_page_show_a_running_jobs_progress(admin: Session, db_url: str) -> None:
    job = skiplock.enqueue("wfc_progress", {})
    handlers.CONSOLE.update(client=admin.client, url=db_url, pages=["/running/", f"/jobs/{job}"])
    handlers.SEEN.clear()
    testing.drain("wfc_progress")
    running = handlers.SEEN["/running/"]
    assert re.search(rf'data-job-id="{job}".*?<progress max="1" value="0.4"', running, re.S)
    assert "40%" in running and "row 40 of 100 &lt;b&gt;" in running
    assert '<progress max="1" value="0.4"' in handlers.SEEN[f"/jobs/{job}"]


def test_the_workflows_list_shows_recent_roots(admin: Session) -> None:
    root, _, _ = _fan(3)
    html = admin.get("/workflows/").get_data(as_text=True)
    assert f'data-workflow="{root}"' in html
    assert re.search(rf'data-workflow="{root}">.*?<td class="num">4</td>', html, re.S)  # 3 children + summary


@pytest.mark.parametrize("path", ["/workflows/1/frobnicate"])
def test_an_unknown_action_is_404(admin: Session, path: str) -> None:
    assert admin.post(path).status_code == 404


def test_why_names_a_waiting_jobs_open_parents(conn: psycopg.Connection) -> None:
    from skiplock.monitor import why

    _, kids, summary = _fan(why.WAITING_SHOWN + 5)
    _run(4)  # the root and three children
    (reason,) = why.for_job(conn, summary) or []
    assert reason.code == "waiting"
    assert reason.facts["open"] == why.WAITING_SHOWN + 2 and reason.facts["total"] == why.WAITING_SHOWN + 5
    assert reason.facts["open_ids"] == kids[3:3 + why.WAITING_SHOWN]
    assert reason.text.startswith(f"It is waiting on {why.WAITING_SHOWN + 2} of {why.WAITING_SHOWN + 5} dependencies")
    assert "and 2 more" in reason.text


def test_every_box_names_its_task_after_the_rows_are_gone_for_sql_producers_too(admin: Session,
                                                                                conn: psycopg.Connection) -> None:
    # a dependent enqueued by the SQL-only producer's function keeps both queues on its edge (migration 048)
    root = skiplock.enqueue("wfc_step", {"n": 0})
    child = scalar(conn, "SELECT skiplock_enqueue_after('wfc_step', '{\"n\": 1}'::jsonb, ARRAY[%s]::bigint[])",
                   (root,))
    assert conn.execute("SELECT parent_queue, child_queue FROM job_deps WHERE child = %s",
                        (child,)).fetchone() == ("wfc_step", "wfc_step")
    assert len(testing.drain(DRAIN)) == 2
    assert scalar(conn, "SELECT count(*) FROM jobs") == 0  # history mode delete: both rows are gone
    html = admin.get(f"/workflows/{root}").get_data(as_text=True)
    assert re.findall(r'class="l2">([^<]*)</text>', html) == ["wfc_step", "wfc_step"]
