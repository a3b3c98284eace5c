"""Recurring jobs against a real PostgreSQL, driven by an injected clock: sync, exactly-once
planning, catch-up after downtime, pause/resume/run-now, the CLI, and slot cleanup."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from skiplock import enqueue
from skiplock.core import state_changes
from skiplock.core.plumbing.db import make_pool
from skiplock.services.recurring_defs import define, list_schedules, pause_schedule, resume_schedule, run_schedule_now
from skiplock.services.recurring_service import RecurringService
from skiplock.services.recurring_store import prune_slots, slot_key
from skiplock.services.schedule import IntervalSchedule
from skiplock.tools.cli import main
from tests.support.helpers import scalar, wait_for

FIVE_MIN = IntervalSchedule(300)


@pytest.fixture
def pool(db_url: str) -> Iterator[ConnectionPool]:
    p = make_pool(db_url, "skiplock-test-recurring", size=6, open_wait=True)
    yield p
    p.close()


def slots(conn: psycopg.Connection, name: str) -> list[tuple[datetime, int | None, bool]]:
    return conn.execute("SELECT fire_at, job_id, manual FROM recurring_slots WHERE name = %s ORDER BY fire_at",
                        (name,)).fetchall()


def jobs(conn: psycopg.Connection, queue: str, status: str = "queued") -> list[tuple[int, datetime, str]]:
    return conn.execute("SELECT id, run_at, unique_key FROM jobs WHERE queue = %s AND status = %s ORDER BY run_at",
                        (queue, status)).fetchall()


def schedule_row(conn: psycopg.Connection, name: str) -> dict:
    return next(r for r in list_schedules(conn) if r["name"] == name)


def test_first_pass_enqueues_exactly_one_future_job_per_definition(conn, pool):
    every = define("every-5m", queue="rq", every="5m", payload={"n": 1})
    nightly = define("nightly", queue="rq2", cron="0 2 * * *", timezone="Europe/Berlin")
    now = datetime.now(UTC)
    service = RecurringService(pool, [every, nightly])
    enqueued = service.run_once(now)
    assert sorted(n for n, _ in enqueued) == ["every-5m", "nightly"]
    for _ in range(3):  # more passes at the same moment change nothing
        assert service.run_once(now) == []
    [(job_id, run_at, key)] = jobs(conn, "rq")
    assert run_at == FIVE_MIN.next_after(now) and key == slot_key("every-5m", run_at)
    assert slots(conn, "every-5m") == [(run_at, job_id, False)]
    assert scalar(conn, "SELECT payload FROM jobs WHERE id = %s", (job_id,)) == {"n": 1}
    [(_, nightly_at, _)] = jobs(conn, "rq2")
    assert nightly_at.astimezone(UTC).hour in (0, 1)  # 02:00 Berlin is 00:00 or 01:00 UTC
    row = schedule_row(conn, "every-5m")
    assert (row["next_fire_at"], row["last_fire_at"], row["enabled"], row["active"]) == (run_at, None, True, True)


def test_next_slot_is_enqueued_after_the_pending_one_fires(conn, pool):
    d = define("every-5m", queue="rq", every="5m")
    service = RecurringService(pool, [d])
    now = datetime.now(UTC)
    service.run_once(now)
    first = FIVE_MIN.next_after(now)
    assert service.run_once(first - timedelta(seconds=1)) == []
    # at the fire time plus the definition's spread offset (< 75 s for 5 minutes) the next one follows
    assert service.run_once(first + timedelta(seconds=75)) == [("every-5m", first + timedelta(minutes=5))]
    assert [s[0] for s in slots(conn, "every-5m")] == [first, first + timedelta(minutes=5)]
    row = schedule_row(conn, "every-5m")
    assert (row["last_fire_at"], row["next_fire_at"]) == (first, first + timedelta(minutes=5))
    # the pass after it is due at that slot plus the same offset, stored with it (what the next pass reads)
    plan_at = scalar(conn, "SELECT plan_at FROM recurring_schedules WHERE name = 'every-5m'")
    assert first + timedelta(minutes=5) <= plan_at < first + timedelta(minutes=5, seconds=75)


def test_concurrent_passes_on_many_connections_enqueue_each_slot_once(conn, pool):
    d = define("shared", queue="rq", every="5m")
    services = [RecurringService(pool, [d]) for _ in range(5)]
    start = datetime.now(UTC)
    moments = [start] + [FIVE_MIN.next_after(start) + timedelta(minutes=5 * k, seconds=80) for k in range(6)]
    errors: list[BaseException] = []
    for moment in moments:
        barrier = threading.Barrier(len(services))

        def one_pass(service: RecurringService, at: datetime = moment, gate: threading.Barrier = barrier) -> None:
            try:
                gate.wait(timeout=10)
                service.run_once(at)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=one_pass, args=(s,)) for s in services]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert not errors
    fire_times = [s[0] for s in slots(conn, "shared")]
    first = FIVE_MIN.next_after(start)
    assert fire_times == [first + timedelta(minutes=5 * k) for k in range(7)]
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE queue = 'rq'") == 7
    assert scalar(conn, "SELECT count(DISTINCT unique_key) FROM jobs WHERE queue = 'rq'") == 7


def test_a_finished_job_is_never_enqueued_again_for_its_slot(conn, pool):
    d = define("fast", queue="rq", every="1s")
    service = RecurringService(pool, [d])
    service.run_once(datetime.now(UTC))
    [(job_id, fire_at, key)] = jobs(conn, "rq")
    wait_for(lambda: scalar(conn, "SELECT now() >= %s", (fire_at,)), timeout=5, message="the slot to fire")
    [claimed] = state_changes.claim(conn, "test-worker", ["rq"], [30.0], 10)
    assert claimed.id == job_id
    assert state_changes.ack_batch(conn, "test-worker", [state_changes.Outcome(job_id, "rq", 1, "ok")],
                                   history="delete") == {job_id}
    assert scalar(conn, "SELECT count(*) FROM jobs") == 0  # finished and gone: the in-flight index forgot the key
    # A pass that plans this slot again (head reset by a resume or a change, on a worker whose
    # clock is behind) finds the durable slot row and enqueues nothing for it.
    conn.execute("UPDATE recurring_schedules SET next_fire_at = NULL WHERE name = 'fast'")
    assert service.run_once(fire_at - timedelta(milliseconds=500)) == []
    assert scalar(conn, "SELECT count(*) FROM jobs") == 0
    # the unique index alone would have let it through: the key is free again
    assert enqueue("rq", {}, unique_key=key) is not None


def test_catch_up_once_runs_one_job_for_all_missed_slots(conn, pool):
    d = define("catchup-once", queue="rq", every="5m", catch_up="once")
    service = RecurringService(pool, [d])
    start = datetime.now(UTC)
    service.run_once(start)
    first = FIVE_MIN.next_after(start)
    back = first + timedelta(hours=3, minutes=2)  # every worker was down for 3 hours: 36 slots missed
    enqueued = service.run_once(back)
    latest_missed = first + timedelta(hours=3)
    assert enqueued == [("catchup-once", latest_missed), ("catchup-once", latest_missed + timedelta(minutes=5))]
    assert [s[0] for s in slots(conn, "catchup-once")] == [first, latest_missed, latest_missed + timedelta(minutes=5)]
    row = schedule_row(conn, "catchup-once")
    assert (row["last_fire_at"], row["next_fire_at"]) == (latest_missed, latest_missed + timedelta(minutes=5))
    assert service.run_once(back + timedelta(seconds=30)) == []  # and no burst on the next passes


def test_catch_up_skip_runs_nothing_missed(conn, pool):
    d = define("catchup-skip", queue="rq", cron="*/5 * * * *", catch_up="skip")
    service = RecurringService(pool, [d])
    start = datetime.now(UTC)
    service.run_once(start)
    first = FIVE_MIN.next_after(start)
    back = first + timedelta(hours=3, minutes=2)
    assert service.run_once(back) == [("catchup-skip", first + timedelta(hours=3, minutes=5))]
    assert len(slots(conn, "catchup-skip")) == 2
    # no pass ran until a slot was 4 s late (a slow pass, a quick deploy): that is not "missed",
    # it still runs, then the next future slot
    head = first + timedelta(hours=3, minutes=5)
    late = head + timedelta(minutes=5, seconds=4)
    assert service.run_once(late) == [("catchup-skip", head + timedelta(minutes=5)),
                                      ("catchup-skip", head + timedelta(minutes=10))]


def test_pause_stops_instances_resume_continues_and_run_now_adds_one(conn, pool):
    d = define("pausable", queue="rq", every="1h", payload={"p": 1})
    service = RecurringService(pool, [d])
    service.run_once(datetime.now(UTC))
    [(pending_id, pending_at, _)] = jobs(conn, "rq")

    assert pause_schedule(conn, "pausable") is True
    assert pause_schedule(conn, "pausable") is False
    assert scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (pending_id,)) == "failed"  # cancelled
    assert slots(conn, "pausable") == []  # it never ran, so the slot may be planned again
    row = schedule_row(conn, "pausable")
    assert (row["enabled"], row["next_fire_at"]) == (False, None)
    assert service.run_once(pending_at + timedelta(hours=5)) == []  # paused: nothing, however late
    assert jobs(conn, "rq") == []

    assert resume_schedule(conn, "pausable") is True
    assert resume_schedule(conn, "pausable") is False
    [(resumed_id, resumed_at, _)] = jobs(conn, "rq")  # the next slot from now, nothing caught up
    assert resumed_at == pending_at and resumed_id != pending_id

    manual_ids = [run_schedule_now(conn, "pausable") for _ in range(2)]
    assert None not in manual_ids and len(set(manual_ids)) == 2
    manual = conn.execute("SELECT unique_key, run_at <= now(), payload FROM jobs WHERE id = ANY(%s)",
                          (manual_ids,)).fetchall()
    assert all(":manual:" in key and ready and payload == {"p": 1} for key, ready, payload in manual)
    assert [m for _, _, m in slots(conn, "pausable")].count(True) == 2
    assert len(jobs(conn, "rq")) == 3  # the scheduled one is untouched
    assert schedule_row(conn, "pausable")["next_fire_at"] == resumed_at
    assert run_schedule_now(conn, "no-such-schedule") is None


def test_sync_deactivates_missing_and_replans_changed_definitions(conn, pool):
    a = define("a", queue="rq", every="5m")
    b = define("b", queue="rq", every="1h")
    foreign = define("foreign", queue="other-pool", every="1h")
    RecurringService(pool, [foreign]).run_once()
    RecurringService(pool, [a, b]).run_once()
    old_a = jobs(conn, "rq")
    assert len(old_a) == 2

    a2 = define("a", queue="rq", every="10m", payload={"v": 2})
    result = RecurringService(pool, [a2]).sync()
    assert (result.added, result.changed, result.deactivated) == ([], ["a"], ["b"])
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE queue = 'rq' AND status = 'failed'") == 2
    rows = {r["name"]: r for r in list_schedules(conn)}
    assert (rows["a"]["schedule"], rows["a"]["payload"], rows["a"]["active"]) == ("10m", {"v": 2}, True)
    assert rows["b"]["active"] is False
    assert rows["foreign"]["active"] is True  # another worker pool's definition is left alone

    service = RecurringService(pool, [a2])
    now = datetime.now(UTC)
    assert service.run_once(now) == [("a", IntervalSchedule(600).next_after(now))]
    assert len(jobs(conn, "other-pool")) == 1


def test_schedules_cli(conn, pool, capsys):
    RecurringService(pool, [define("cli-def", queue="rq", cron="0 3 * * *")]).run_once()
    assert main(["schedules", "list"]) == 0
    out = capsys.readouterr().out
    assert "cli-def" in out and "0 3 * * *" in out and "enabled" in out
    assert main(["schedules", "pause", "cli-def"]) == 0
    assert "paused cli-def" in capsys.readouterr().out
    assert main(["schedules", "list"]) == 0 and "paused" in capsys.readouterr().out
    assert main(["schedules", "resume", "cli-def"]) == 0
    assert main(["schedules", "run", "cli-def"]) == 0
    job_id = int(capsys.readouterr().out.strip().splitlines()[-1])
    assert scalar(conn, "SELECT queue FROM jobs WHERE id = %s", (job_id,)) == "rq"
    assert main(["schedules", "pause", "nope"]) == 2
    assert "no schedule named 'nope'" in capsys.readouterr().err
    assert main(["schedules", "run"]) == 2
    # each CLI action is in the audit trail, like the console's
    trail = conn.execute("SELECT role, action, count, detail->>'schedule' FROM audit_log ORDER BY id").fetchall()
    assert trail == [("cli", "pause schedule", 0, "cli-def"), ("cli", "resume schedule", 0, "cli-def"),
                     ("cli", "run schedule now", 1, "cli-def")]


def test_slot_cleanup_keeps_recent_and_latest_slots(conn, pool):
    RecurringService(pool, [define("old", queue="rq", every="1h")]).run_once()
    now = datetime.now(UTC)
    three_days = now - timedelta(days=3)
    conn.execute("UPDATE recurring_schedules SET last_fire_at = %s WHERE name = 'old'", (three_days,))
    for fire_at, manual in ((three_days - timedelta(hours=1), False), (three_days, False),
                            (three_days - timedelta(hours=5), True), (now - timedelta(hours=1), True)):
        conn.execute("INSERT INTO recurring_slots (name, fire_at, manual) VALUES ('old', %s, %s)", (fire_at, manual))
    assert prune_slots(conn, timedelta(days=2), limit=1) == 1
    assert prune_slots(conn, timedelta(days=2)) == 1
    assert prune_slots(conn, timedelta(days=2)) == 0
    kept = [s[0] for s in slots(conn, "old")]
    # the last fired slot (even if old), a recent manual one, and the pending one stay
    assert three_days in kept and now - timedelta(hours=1) in kept and len(kept) == 3


def test_a_broken_row_does_not_stop_other_definitions(conn, pool, caplog):
    service = RecurringService(pool, [define("good", queue="rq", every="5m"), define("bad", queue="rq", every="5m")])
    service.sync()
    conn.execute("UPDATE recurring_schedules SET schedule = 'every now and then' WHERE name = 'bad'")
    assert [name for name, _ in service.run_once()] == ["good"]
    assert "recurring bad: planning failed" in caplog.text


def test_definitions_sharing_a_fire_time_enqueue_their_next_slots_spread_out(conn, pool):
    hourly = [define(f"hourly-{i:02d}", queue="rq", cron="0 * * * *") for i in range(60)]
    service = RecurringService(pool, hourly)
    start = datetime.now(UTC)
    assert len(service.run_once(start)) == 60  # start-up: each definition's first slot
    fired = build_hourly_next(start)
    early = service.run_once(fired + timedelta(seconds=1))
    assert len(early) < 15  # offsets spread over 30 s: only a few are due one second after 02:00
    assert len(early) + len(service.run_once(fired + timedelta(seconds=30))) == 60


def build_hourly_next(moment: datetime) -> datetime:
    return (moment + timedelta(hours=1)).replace(minute=0, second=0, microsecond=0)


def test_tick_arms_one_wake_timer_at_the_soonest_fire_time_of_this_workers_queues(conn, pool):
    from skiplock.services.maintenance import build_scheduler
    from skiplock.services.recurring_service import WAKE_DELAY, WakeTimers

    scheduler = build_scheduler()  # never started: the test only looks at what was armed
    woken: list[int] = []
    definitions = [define("mine", queue="rq", every="1h"), define("mine-later", queue="rq", every="1d"),
                   define("theirs", queue="elsewhere", every="1m")]
    service = RecurringService(pool, definitions,
                               timers=WakeTimers(scheduler, wake=lambda: woken.append(1), wake_queues=["rq"]))
    service.tick()
    fire_at = min(run_at for _, run_at, _ in jobs(conn, "rq"))
    # one timer, at the soonest slot of a queue this worker claims ("theirs" fires sooner, elsewhere)
    [wake] = [j for j in scheduler.get_jobs() if j.id.startswith("recurring-wake")]
    assert wake.trigger.run_date == fire_at + WAKE_DELAY


def test_every_worker_gets_the_recurring_pruner_and_slot_cleanup_services(pool):
    import tests.support.handlers  # noqa: F401  (registers queue t1)
    from skiplock.core.plumbing.config import load_settings
    from skiplock.runtime.runner import Worker
    from skiplock.services.reaper import Reaper

    w = Worker(load_settings(), queues=["t1"])  # starts no thread until run(): nothing to shut down
    w.pool = pool
    w.reaper = Reaper(pool)
    w._start_services()  # the one explicit list of the worker's services
    assert {"reaper", "worker-registry", "latency-fold", "recurring", "pruner",
            "recurring-slots-prune"} <= {job.id for job in w.scheduler.get_jobs()}


def test_a_database_without_the_recurring_tables_gets_one_clear_error(fresh_db_url, caplog):
    with psycopg.connect(fresh_db_url, autocommit=True) as c:
        c.execute("DROP TABLE recurring_slots, recurring_schedules")
    p = make_pool(fresh_db_url, "skiplock-test-unmigrated", size=2, open_wait=True)
    try:
        service = RecurringService(p, [define("x", queue="rq", every="1m")])
        for _ in range(3):
            service.tick()
        assert service.prune_slots() == 0
    finally:
        p.close()
    assert caplog.text.count("run `skiplock migrate`") == 1
