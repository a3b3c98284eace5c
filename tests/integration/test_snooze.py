"""`raise Snooze(seconds)`: the job goes back for later without using up an attempt.

Real worker processes run a handler module written to a temporary folder; counts and the job
row are checked at the end. RetryAfter, by contrast, counts (tests/fault/test_worker.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from skiplock import Snooze, enqueue
from skiplock.tools.testing import drain
from tests.conftest import REPO
from tests.support.helpers import scalar, wait_for

SNOOZE_TASKS = '''
from skiplock import Snooze, task
from tests.support.handlers import _conn, record_effect


@task("naps")
def nap(payload, job):
    record_effect(job, payload)
    runs = _conn().execute("SELECT count(*) FROM test_effects WHERE job_id = %s", (job.id,)).fetchone()[0]
    if runs <= payload["snoozes"]:
        raise Snooze(payload["seconds"])
'''


@pytest.mark.slow
def test_snooze_keeps_attempts_and_counts_the_snoozes(conn, spawn_worker, tmp_path: Path) -> None:
    (tmp_path / "snooze_tasks.py").write_text(SNOOZE_TASKS)
    # max_attempts=1: were a snooze an attempt, the first one would make the job dead
    short = enqueue("naps", {"snoozes": 3, "seconds": 0}, max_attempts=1)
    long = enqueue("naps", {"snoozes": 1, "seconds": 3600}, max_attempts=1)
    worker = spawn_worker(SKIPLOCK_TASKS="snooze_tasks", PYTHONPATH=f"{tmp_path}:{REPO}",
                          SKIPLOCK_POLL_INTERVAL="0.1")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE id = %s", (short,)) == 0,
             timeout=60, message="the snoozing job to succeed after its snoozes")
    wait_for(lambda: scalar(conn, "SELECT snooze_count FROM jobs WHERE id = %s", (long,)) == 1,
             timeout=60, message="the long snooze to be written")

    # four runs of the short job (three snoozes, then success), every one of them attempt 1
    assert conn.execute("SELECT attempt FROM test_effects WHERE job_id = %s ORDER BY at",
                        (short,)).fetchall() == [(1,), (1,), (1,), (1,)]
    status, attempts, count, later, error = conn.execute(
        "SELECT status::text, attempts, snooze_count, run_at > now() + interval '3000 s', last_error "
        "FROM jobs WHERE id = %s", (long,)).fetchone()
    assert (status, attempts, count, later, error) == ("queued", 0, 1, True, None)
    assert worker.terminate() == 0
    assert "snoozed for 3600.0s, attempt not counted" in worker.log()


def test_snooze_refuses_a_negative_delay() -> None:
    with pytest.raises(ValueError, match=">= 0"):
        Snooze(-1)
    with pytest.raises(ValueError, match=">= 0"):
        Snooze(float("nan"))


def test_drain_reports_a_snooze(conn) -> None:
    from skiplock.core.registry import Registry, Task

    def always_snooze(payload):
        raise Snooze(600)

    registry = Registry()
    registry.add(Task("dozy", always_snooze, wants_job=False))
    job = enqueue("dozy", {}, max_attempts=1)
    runs = drain("dozy", registry=registry)
    assert [(r.id, r.status, r.retry_in) for r in runs] == [(job, "snoozed", 600.0)]
    assert conn.execute("SELECT status::text, attempts, snooze_count FROM jobs WHERE id = %s",
                        (job,)).fetchone() == ("queued", 0, 1)
