"""The job page's timeline (issue 36): enqueued -> each attempt (worker, start, duration, error) -> the end,
from what real workers recorded; a run whose worker died shows as a run with no record."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from psycopg_pool import ConnectionPool

from skiplock import enqueue
from skiplock.services.reaper import Reaper
from tests.support.helpers import scalar, wait_for

WORKER = {"SKIPLOCK_QUEUES": "t1", "SKIPLOCK_HISTORY_MODE": "keep", "SKIPLOCK_POLL_INTERVAL": "0.05",
          "SKIPLOCK_BACKOFF_BASE": "0.05", "SKIPLOCK_BACKOFF_CAP": "0.05"}
STEP = re.compile(r'<li class="step st-(\w+)" data-kind="(\w+)"(?: data-attempt="(\d+)")?(?: data-worker="([^"]+)")?>'
                  r'(.*?)</li>', re.S)


def _steps(admin: Any, job_id: int) -> list[dict[str, Any]]:
    page = admin.get(f"/jobs/{job_id}").get_data(as_text=True)
    assert '<ol class="timeline"' in page
    out = []
    for state, kind, attempt, worker, body in STEP.findall(page):
        at = re.search(r'<time class="step-at" datetime="([^"]+)"', body)
        out.append({"state": state, "kind": kind, "attempt": int(attempt) if attempt else None, "worker": worker,
                    "at": datetime.fromisoformat(at.group(1)) if at else None, "body": body})
    return out


def test_two_failures_then_a_success_are_three_attempts_in_order(admin: Any, conn: Any, spawn_worker: Any) -> None:
    job = enqueue("t1", {"fail_times": 2}, max_attempts=5)
    spawn_worker(**WORKER)
    wait_for(lambda: scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (job,)) == "succeeded", timeout=60,
             message="the job to succeed on its third attempt")
    worker_id = scalar(conn, "SELECT worker_id FROM jobs WHERE id = %s", (job,))
    recorded = scalar(conn, "SELECT attempt_errors FROM jobs WHERE id = %s", (job,))
    assert all(e.get("started") for e in recorded), "a failed run records its start (claim) time"

    steps = _steps(admin, job)
    assert [(s["kind"], s["state"], s["attempt"]) for s in steps] == [
        ("enqueued", "neutral", None), ("attempt", "failed", 1), ("attempt", "failed", 2), ("attempt", "ok", 3),
        ("final", "ok", None)]
    attempts = [s for s in steps if s["kind"] == "attempt"]
    assert [s["worker"] for s in attempts] == [worker_id] * 3  # one worker ran all three
    times = [s["at"] for s in steps]
    assert all(t is not None for t in times) and times == sorted(times), "steps are in time order"
    for n, step in enumerate(attempts[:2], start=1):
        assert f"RuntimeError: planned failure on attempt {n}" in step["body"]
        assert re.search(r'<span class="step-duration">ran [\d.]+m?s</span>', step["body"]), step["body"]
    assert "step-error" not in attempts[2]["body"] and "succeeded" in attempts[2]["body"]
    # the live refresh's fragment carries the timeline too (it is inside the self-refreshing section)
    fragment = admin.get(f"/jobs/{job}", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert fragment.count('<li class="step ') == len(steps) and "<html" not in fragment


def test_a_run_whose_worker_died_shows_with_no_record(admin: Any, conn: Any, spawn_worker: Any,
                                                      db_url: str) -> None:
    job = enqueue("t1", {"exit_on_attempt_le": 1}, max_attempts=3)
    crashed = spawn_worker(**WORKER)
    wait_for(lambda: crashed.proc.poll() is not None, timeout=60, message="the handler to kill its worker")
    # its lease runs out and the reaper takes the job back (as it would after SKIPLOCK_LEASE_SECONDS)
    conn.execute("UPDATE jobs SET lease_until = now() - interval '1 second' WHERE id = %s", (job,))
    with ConnectionPool(db_url, min_size=1, max_size=1, open=True) as pool:
        assert [r[0] for r in Reaper(pool).run_once()] == [job]
    spawn_worker(**WORKER)
    wait_for(lambda: scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (job,)) == "succeeded", timeout=60,
             message="the second attempt to succeed")

    steps = _steps(admin, job)
    assert [(s["kind"], s["attempt"]) for s in steps] == [("enqueued", None), ("lost", 1), ("attempt", 2),
                                                          ("final", None)]
    assert "no record: its lease expired" in steps[1]["body"]
