"""Real worker processes run an every-second definition: each slot is enqueued and run once,
through a SIGKILL and a replacement process."""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest

from tests.support.helpers import scalar, wait_for

TASKS = "tests.support.handlers,tests.support.recurring_handlers"


def ran(conn) -> int:
    return scalar(conn, "SELECT count(*) FROM test_effects WHERE queue = 'rtick'")


def quiet_moment(conn) -> bool:
    """The slot that fired last was run and acked, and the next one is > 0.3 s away."""
    return bool(scalar(conn, """
        SELECT NOT EXISTS (SELECT 1 FROM jobs WHERE queue = 'rtick' AND run_at <= now())
           AND EXISTS (SELECT 1 FROM jobs WHERE queue = 'rtick' AND run_at > now() + interval '0.3 s')"""))


@pytest.mark.slow
def test_three_workers_run_every_slot_exactly_once_through_a_sigkill(conn, spawn_worker):
    settings = {"SKIPLOCK_TASKS": TASKS, "SKIPLOCK_LEASE_SECONDS": "5", "SKIPLOCK_REAPER_INTERVAL": "0.5"}
    workers = [spawn_worker(**settings) for _ in range(3)]
    wait_for(lambda: ran(conn) >= 3, timeout=60, message="three slots run")
    # kill one while it holds nothing (a killed run would legitimately run twice: at-least-once)
    wait_for(lambda: quiet_moment(conn), timeout=10, interval=0.01, message="a quiet moment")
    workers[0].kill()
    killed_at = scalar(conn, "SELECT now()")
    workers.append(spawn_worker(**settings))
    wait_for(lambda: ran(conn) >= 10, timeout=60, message="ten slots run")
    stop_at = scalar(conn, "SELECT now()")
    for w in workers[1:]:
        assert w.terminate() == 0

    slots = conn.execute("SELECT fire_at, job_id FROM recurring_slots WHERE name = 'tick' AND NOT manual "
                         "ORDER BY fire_at").fetchall()
    fire_times = [s[0] for s in slots]
    # one slot per second, none missing, none twice (the primary key forbids twice)
    assert all(b - a == timedelta(seconds=1) for a, b in itertools.pairwise(fire_times))
    assert fire_times[0] < killed_at - timedelta(seconds=1) and fire_times[-1] > stop_at
    runs = dict(conn.execute("SELECT job_id, count(*) FROM test_effects WHERE queue = 'rtick' GROUP BY job_id")
                .fetchall())
    assert all(n == 1 for n in runs.values()), runs  # no slot ran twice
    assert set(runs) <= {job_id for _, job_id in slots}  # every run belongs to a recorded slot
    due = [job_id for fire_at, job_id in slots if fire_at <= stop_at - timedelta(seconds=1)]
    assert len(due) >= 9 and all(runs.get(job_id) == 1 for job_id in due)  # every due slot ran
    # the scheduled jobs not run yet (at most the pending slot and one just due) are still queued
    left = conn.execute("SELECT count(*) FROM jobs WHERE queue = 'rtick' AND status = 'queued'").fetchone()[0]
    assert left == len(slots) - len(runs) and left <= 2
    lateness = conn.execute("""
        SELECT percentile_cont(ARRAY[0.5, 0.99]) WITHIN GROUP (ORDER BY extract(epoch FROM e.at - s.fire_at)),
               max(extract(epoch FROM e.at - s.fire_at))
          FROM test_effects e JOIN recurring_slots s ON s.job_id = e.job_id""").fetchone()
    for w in workers:
        assert "Traceback" not in w.log() and "pass failed" not in w.log(), w.log()
    print(f"slots={len(slots)} runs={len(runs)} start lateness p50/p99={lateness[0]} max={lateness[1]}")
