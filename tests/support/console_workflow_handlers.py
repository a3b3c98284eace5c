"""Handlers for the console's workflow tests (tests/console/test_workflow_pages.py).

`wfc_progress` looks at the console while it runs: it reports progress, has it written by the
worker's own progress statement (what the heartbeat does about once a second), and fetches the
pages a test names in PAGES_TO_READ with the test client the test put in CONSOLE.
"""

from __future__ import annotations

from typing import Any

from skiplock import task

CONSOLE: dict[str, Any] = {}  # "client": a logged-in test client, "pages": [paths]; filled by the test
SEEN: dict[str, str] = {}  # path -> HTML, as the running handler saw it


@task("wfc_step")
def step(payload: dict, job: Any) -> dict:
    return {"n": payload.get("n"), "note": payload.get("note")}


@task("wfc_big")
def big(payload: dict, job: Any) -> dict:
    return {"items": list(range(payload["items"])), "tag": "<script>alert(1)</script>"}


@task("wfc_fail", max_attempts=1)
def fail(payload: dict, job: Any) -> None:
    raise ValueError(f"wfc_fail {payload.get('n')}")


@task("wfc_progress")
def progress(payload: dict, job: Any) -> str:
    from skiplock.core import state_changes
    from skiplock.core.features import progress as board

    job.progress(0.4, "row 40 of 100 <b>")
    client = CONSOLE["client"]
    import psycopg

    with psycopg.connect(CONSOLE["url"], autocommit=True) as conn:
        state_changes.write_progress(conn, job.worker_id, board.take())  # the heartbeat's write
    for path in CONSOLE["pages"]:
        SEEN[path] = client.get(path).get_data(as_text=True)
    return "done"
