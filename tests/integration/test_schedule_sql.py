"""Schedules changed from SQL, as a producer in another language would (plain SELECTs of the skiplock_*_schedule
functions): update, pause, resume and backfill do what skiplock.schedules does, and bad input is a clear error
that writes nothing from Python, the CLI and SQL alike."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from skiplock import ConfigError, schedules
from skiplock.core.plumbing.db import make_pool
from skiplock.services.recurring_service import RecurringService
from skiplock.services.recurring_store import slot_key
from skiplock.services.schedule import build_schedule
from skiplock.tools.cli import main
from tests.support.helpers import scalar
from tests.support.workers import REPO


@pytest.fixture
def pool(db_url: str) -> Iterator[ConnectionPool]:
    p = make_pool(db_url, "skiplock-test-schedule-sql", size=2, open_wait=True)
    yield p
    p.close()


def written(conn: psycopg.Connection) -> tuple:
    """Everything a schedule change could write, to compare before and after a refused one."""
    return tuple(conn.execute(
        "SELECT (SELECT coalesce(json_agg(r ORDER BY name), '[]') FROM recurring_schedules r),"
        "       (SELECT count(*) FROM jobs), (SELECT count(*) FROM recurring_slots),"
        "       (SELECT count(*) FROM audit_log)").fetchone() or ())


def pending(conn: psycopg.Connection, name: str) -> list[tuple[int, datetime, str | None]]:
    return conn.execute("SELECT j.id, j.run_at, j.tenant FROM recurring_slots s JOIN jobs j ON j.id = s.job_id "
                        "WHERE s.name = %s AND j.status = 'queued' ORDER BY s.fire_at", (name,)).fetchall()


# (what is wrong, Python's create arguments, the CLI's create arguments, SQL's create call, the message)
BAD_CREATE = [
    ("invalid cron", {"cron": "0 25 * * *"}, ["--cron", "0 25 * * *"],
     "skiplock_create_schedule('bad', 'rq', p_cron => '0 25 * * *')", "invalid cron schedule '0 25 \\* \\* \\*'"),
    ("unknown time zone", {"cron": "0 7 * * *", "timezone": "Mars/Olympus"},
     ["--cron", "0 7 * * *", "--timezone", "Mars/Olympus"],
     "skiplock_create_schedule('bad', 'rq', p_cron => '0 7 * * *', p_timezone => 'Mars/Olympus')",
     "unknown time zone 'Mars/Olympus'"),
    ("duplicate name", {"every": "5m", "name": "taken"}, ["--every", "5m", "--name", "taken"],
     "skiplock_create_schedule('taken', 'rq', p_every => '5m')", "a schedule named 'taken' already exists"),
]


@pytest.mark.parametrize(("what", "kwargs", "cli", "sql", "message"), BAD_CREATE, ids=[b[0] for b in BAD_CREATE])
def test_bad_input_is_one_clear_error_from_python_the_cli_and_sql_and_writes_nothing(conn, capsys, what, kwargs,
                                                                                     cli, sql, message):
    schedules.create("taken", "rq", {"v": 1}, cron="0 7 * * *", timezone="Europe/Berlin")
    before = written(conn)
    kwargs = dict(kwargs)
    name = kwargs.pop("name", "bad")
    with pytest.raises(ConfigError, match=message):
        schedules.create(name, "rq", {}, **kwargs)
    assert written(conn) == before
    cli = list(cli)
    if "--name" in cli:
        name = cli.pop(cli.index("--name") + 1)
        cli.remove("--name")
    assert main(["schedules", "create", name, "--queue", "rq", *cli]) != 0
    assert any(part in capsys.readouterr().err for part in (message.replace("\\", ""),)), what
    assert written(conn) == before
    with pytest.raises(psycopg.Error, match=message):
        conn.execute(f"SELECT {sql}")
    assert written(conn) == before


BAD_UPDATE = [
    ("invalid cron", {"cron": "61 * * * *"}, ["--cron", "61 * * * *"], "p_cron => '61 * * * *'",
     "invalid cron schedule '61 \\* \\* \\* \\*'"),
    ("unknown time zone", {"timezone": "Nowhere/X"}, ["--timezone", "Nowhere/X"], "p_timezone => 'Nowhere/X'",
     "unknown time zone 'Nowhere/X'"),
]


@pytest.mark.parametrize(("what", "kwargs", "cli", "sql", "message"), BAD_UPDATE, ids=[b[0] for b in BAD_UPDATE])
def test_a_bad_change_is_one_clear_error_from_python_the_cli_and_sql_and_changes_nothing(conn, capsys, what, kwargs,
                                                                                         cli, sql, message):
    schedules.create("report", "rq", {"v": 1}, cron="0 7 * * *", timezone="Europe/Berlin", tenant="acme")
    before = written(conn)
    with pytest.raises(ConfigError, match=message):
        schedules.update("report", **kwargs)
    assert written(conn) == before
    assert main(["schedules", "edit", "report", *cli]) != 0
    assert message.replace("\\", "") in capsys.readouterr().err, what
    assert written(conn) == before
    with pytest.raises(psycopg.Error, match=message):
        conn.execute(f"SELECT skiplock_update_schedule('report', {sql})")
    assert written(conn) == before


def test_sql_updates_a_runtime_schedule_withdraws_its_pending_job_and_a_pass_plans_the_new_one(conn, pool):
    conn.execute("SELECT skiplock_create_schedule('sql:sync', 'rq', '{\"v\": 1}', p_every => '1h', "
                 "p_tenant => 'acme')")
    service = RecurringService(pool)
    service.run_once()
    [(old_job, _, _)] = pending(conn, "sql:sync")
    assert scalar(conn, "SELECT skiplock_update_schedule('sql:sync', p_cron => '*/5 * * * *', "
                        "p_payload => '{\"v\": 2}', p_timezone => 'Asia/Tokyo', p_tenant => '')") == "sql:sync"
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE id = %s", (old_job,)) == 0  # withdrawn, never ran
    changed = schedules.get("sql:sync")
    assert changed is not None
    assert (changed.kind, changed.schedule, changed.timezone, changed.payload, changed.tenant, changed.queue) == (
        "cron", "*/5 * * * *", "Asia/Tokyo", {"v": 2}, None, "rq")
    [(name, fire_at)] = service.run_once()  # any worker's next pass plans it again from now
    assert name == "sql:sync" and fire_at.minute % 5 == 0 and fire_at - datetime.now(UTC) <= timedelta(minutes=5)
    [(_, run_at, tenant)] = pending(conn, "sql:sync")
    assert (run_at, tenant) == (fire_at, None)
    # NULL keeps a setting: a new payload alone leaves the crontab, the zone and the queue
    conn.execute("SELECT skiplock_update_schedule('sql:sync', p_payload => '{\"v\": 3}')")
    kept = schedules.get("sql:sync")
    assert kept is not None and (kept.schedule, kept.timezone, kept.payload) == ("*/5 * * * *", "Asia/Tokyo", {"v": 3})


def test_sql_refuses_to_change_a_code_defined_schedule_or_an_unknown_one(conn, pool):
    from skiplock.services.recurring_defs import define

    RecurringService(pool, [define("from-code", queue="rq", every="1h")]).run_once()
    before = written(conn)
    with pytest.raises(psycopg.Error, match="'from-code' is defined in code"):
        conn.execute("SELECT skiplock_update_schedule('from-code', p_every => '5m')")
    with pytest.raises(psycopg.Error, match="no schedule named 'nope'"):
        conn.execute("SELECT skiplock_update_schedule('nope', p_every => '5m')")
    for call in ("skiplock_pause_schedule('nope')", "skiplock_resume_schedule('nope')",
                 "skiplock_backfill_schedule('nope', now() - interval '1 hour', now())"):
        with pytest.raises(psycopg.Error, match="no schedule named 'nope'"):
            conn.execute(f"SELECT {call}")
    assert written(conn) == before


def test_sql_pauses_and_resumes_and_the_next_pass_goes_on_from_now(conn, pool):
    conn.execute("SELECT skiplock_create_schedule('sql:tick', 'rq', p_every => '1m')")
    service = RecurringService(pool)
    service.run_once()
    assert len(pending(conn, "sql:tick")) == 1
    assert scalar(conn, "SELECT skiplock_pause_schedule('sql:tick')") is True
    assert scalar(conn, "SELECT skiplock_pause_schedule('sql:tick')") is False  # already paused
    assert pending(conn, "sql:tick") == [] and scalar(conn, "SELECT count(*) FROM jobs") == 0
    assert schedules.get("sql:tick").enabled is False  # type: ignore[union-attr]
    assert service.run_once() == []  # a paused schedule is not planned
    assert scalar(conn, "SELECT skiplock_resume_schedule('sql:tick')") is True
    assert scalar(conn, "SELECT skiplock_resume_schedule('sql:tick')") is False
    [(name, fire_at)] = service.run_once()
    assert name == "sql:tick" and datetime.now(UTC) < fire_at <= datetime.now(UTC) + timedelta(minutes=1)


def test_sql_backfills_each_missed_slot_once_with_the_keys_the_workers_write(conn):
    conn.execute("SELECT skiplock_create_schedule('sql:report', 'rq', '{\"c\": 1}', p_cron => '30 6 * * 1-5', "
                 "p_timezone => 'Europe/Berlin', p_tenant => 'acme')")
    start, end = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 10, tzinfo=UTC)
    assert scalar(conn, "SELECT skiplock_backfill_schedule('sql:report', %s, %s)", (start, end)) == 7
    assert scalar(conn, "SELECT skiplock_backfill_schedule('sql:report', %s, %s)", (start, end)) == 0  # once each
    # the same slots, keys, payload and tenant that skiplock.schedules.backfill writes
    rows = conn.execute("SELECT s.fire_at, j.unique_key, j.payload, j.tenant, j.run_at FROM recurring_slots s "
                        "JOIN jobs j ON j.id = s.job_id WHERE s.name = 'sql:report' ORDER BY s.fire_at").fetchall()
    compiled = build_schedule("cron", "30 6 * * 1-5", "Europe/Berlin")
    expected: list[datetime] = []
    fire = compiled.next_after(start)
    while fire <= end:
        expected.append(fire)
        fire = compiled.next_after(fire)
    assert [r[0] for r in rows] == expected
    assert [r[1] for r in rows] == [slot_key("sql:report", t) for t in expected]
    assert {(str(r[2]), r[3]) for r in rows} == {("{'c': 1}", "acme")} and all(r[4] == r[0] for r in rows)
    # a range in the future enqueues nothing yet; a backwards one or one of too many slots is refused
    assert scalar(conn, "SELECT skiplock_backfill_schedule('sql:report', now() + interval '1 day', "
                        "now() + interval '9 days')") == 0
    before = written(conn)
    with pytest.raises(psycopg.Error, match="is before its start"):
        conn.execute("SELECT skiplock_backfill_schedule('sql:report', now(), now() - interval '1 day')")
    conn.execute("SELECT skiplock_create_schedule('sql:fast', 'rq', p_every => '1s')")
    before = written(conn)
    with pytest.raises(psycopg.Error, match="more than 10000 slots"):
        conn.execute("SELECT skiplock_backfill_schedule('sql:fast', now() - interval '1 day', now())")
    assert written(conn) == before


SLOTS = [("*/15 9-17 * jan-mar mon-fri", "America/New_York"), ("30 2 * * *", "Europe/Berlin"),
         ("0 0 1 * mon", "UTC"), ("5 4 */2 * sun", "Australia/Sydney"), ("0 12 29 2 *", "Asia/Tokyo"),
         ("45 1 * * 0,7", "America/Santiago")]


@pytest.mark.parametrize(("cron", "zone"), SLOTS)
def test_sql_computes_the_slots_the_workers_compute_across_dst_changes(conn, cron, zone):
    start, end = datetime(2027, 1, 1, tzinfo=UTC), datetime(2029, 1, 1, tzinfo=UTC)
    compiled = build_schedule("cron", cron, zone)
    expected: list[datetime] = []
    fire = compiled.next_after(start - timedelta(microseconds=1))
    while fire <= end and len(expected) < 3000:
        expected.append(fire)
        fire = compiled.next_after(fire)
    got = [r[0] for r in conn.execute("SELECT skiplock_schedule_slots('cron', %s, %s, %s, %s, 3000)",
                                      (cron, zone, start, end))]
    assert got == expected


def test_the_how_tos_sql_lines_run_as_written(conn):
    text = (REPO / "docs" / "howto" / "recurring-jobs.md").read_text()
    block = text.split("From SQL, for producers in other languages", 1)[1].split("```sql\n", 1)[1].split("```", 1)[0]
    statements = [s.strip() for s in re.split(r"\n(?=SELECT)", block) if s.strip()]  # one per SELECT
    results = [conn.execute(statement).fetchone()[0] for statement in statements]
    # 06:30 Berlin on weekdays between 1 and 4 January 2026: Thursday the 1st and Friday the 2nd
    assert results == ["report:acme", "report:acme", True, True, 2, True]
    assert written(conn)[0] == []
