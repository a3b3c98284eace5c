"""Real worker processes run a hundred schedules made at runtime, every 2 s: each slot is enqueued once,
with no gap, through a SIGKILL of one worker and a replacement process."""

from __future__ import annotations

import itertools
from collections import defaultdict
from datetime import datetime, timedelta

import pytest

from skiplock import schedules
from tests.support.helpers import scalar, wait_for

SCHEDULES = 100


@pytest.mark.slow
def test_runtime_schedules_fire_each_slot_once_through_a_sigkill(conn, spawn_worker):
    settings = {"SKIPLOCK_LEASE_SECONDS": "5", "SKIPLOCK_REAPER_INTERVAL": "0.5"}
    workers = [spawn_worker(**settings) for _ in range(2)]
    for n in range(SCHEDULES):
        schedules.create(f"tenant-{n:03}", "t1", {"schedule": n}, every="2s", tenant=f"tenant-{n % 10}")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM test_effects") >= 3 * SCHEDULES, timeout=120,
             message="three slots of each schedule run")
    workers[0].kill()  # in the middle of everything: planning, claiming, running
    workers.append(spawn_worker(**settings))
    killed_at = scalar(conn, "SELECT now()")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM test_effects WHERE at > %s", (killed_at,)) >= 4 * SCHEDULES,
             timeout=120, message="four more slots of each schedule run")
    for name in (s.name for s in schedules.list()):
        schedules.pause(name)  # stop here: withdraws each pending slot
    stop_at: datetime = scalar(conn, "SELECT now()")
    for w in workers[1:]:
        assert w.terminate() == 0

    by_schedule: dict[str, list[datetime]] = defaultdict(list)
    for name, fire_at in conn.execute("SELECT name, fire_at FROM recurring_slots WHERE NOT manual ORDER BY fire_at"):
        by_schedule[name].append(fire_at)
    assert len(by_schedule) == SCHEDULES
    for name, fire_times in by_schedule.items():
        # one slot every 2 s from the first to the last, none missing (the primary key forbids twice)
        assert all(b - a == timedelta(seconds=2) for a, b in itertools.pairwise(fire_times)), name
        assert fire_times[0] < killed_at and fire_times[-1] > stop_at - timedelta(seconds=4), name
    # one job per slot, each with the schedule's tenant; every slot that fired ran (a run the SIGKILL cut
    # short runs again: at-least-once, so a job may have two runs, never two jobs one slot)
    slot_jobs = conn.execute("SELECT s.job_id, j.tenant, j.status::text FROM recurring_slots s "
                             "LEFT JOIN jobs j ON j.id = s.job_id WHERE NOT s.manual").fetchall()
    assert len({job_id for job_id, _, _ in slot_jobs}) == len(slot_jobs)
    ran = dict(conn.execute("SELECT job_id, count(*) FROM test_effects GROUP BY job_id").fetchall())
    fired = conn.execute("SELECT s.job_id FROM recurring_slots s WHERE NOT s.manual AND s.fire_at < %s",
                         (stop_at - timedelta(seconds=3),)).fetchall()
    assert all(ran.get(job_id, 0) >= 1 for (job_id,) in fired)
    # Only what the killed worker held runs twice: its runs the SIGKILL cut short, and those that finished
    # with their ack not yet written (up to its 10 handler slots and its ack batch of 200). A job first
    # run by a surviving worker ran once: so each job's first effect of several is the killed process's.
    twice = [job_id for job_id, n in ran.items() if n > 1]
    first_runs = dict(conn.execute("SELECT DISTINCT ON (job_id) job_id, pid FROM test_effects "
                                   "WHERE job_id = ANY(%s) ORDER BY job_id, at", (twice,)).fetchall())
    assert set(first_runs.values()) <= {workers[0].proc.pid}, first_runs
    assert len(twice) <= 10 + 200
    for w in workers:
        assert "Traceback" not in w.log() and "planning failed" not in w.log(), w.log()
    print(f"slots={sum(len(f) for f in by_schedule.values())} runs={sum(ran.values())}")
