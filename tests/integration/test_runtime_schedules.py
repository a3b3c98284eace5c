"""Schedules made at runtime (skiplock.schedules, `skiplock schedules`, SQL) against a real PostgreSQL: they
share the table and the scheduler with code definitions, fire once per slot, refuse bad input without
writing, and the scheduler's pass reads only what is due."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from skiplock import ConfigError, schedules
from skiplock.core.plumbing.db import make_pool
from skiplock.services.recurring_defs import define
from skiplock.services.recurring_service import PASS_LIMIT, RecurringService
from skiplock.services.recurring_store import slot_key
from skiplock.services.schedule import IntervalSchedule
from skiplock.tools.cli import main
from tests.support.helpers import scalar
from tests.support.workers import REPO

MINUTE = IntervalSchedule(60)


@pytest.fixture
def pool(db_url: str) -> Iterator[ConnectionPool]:
    p = make_pool(db_url, "skiplock-test-runtime-schedules", size=4, open_wait=True)
    yield p
    p.close()


def written(conn: psycopg.Connection) -> tuple[int, int, int]:
    return (scalar(conn, "SELECT count(*) FROM recurring_schedules"), scalar(conn, "SELECT count(*) FROM jobs"),
            scalar(conn, "SELECT count(*) FROM recurring_slots"))


def queued(conn: psycopg.Connection, name: str) -> list[tuple[int, datetime, str | None, str]]:
    return conn.execute("SELECT j.id, j.run_at, j.tenant, j.status::text FROM recurring_slots s "
                        "JOIN jobs j ON j.id = s.job_id WHERE s.name = %s ORDER BY s.fire_at", (name,)).fetchall()


def test_create_enqueues_the_first_slot_with_the_tenant_and_get_and_list_show_it(conn):
    made = schedules.create("report:acme", "reports", {"customer": "acme"}, cron="0 7 * * *",
                            timezone="Europe/Berlin", tenant="acme")
    assert (made.origin, made.kind, made.schedule, made.timezone, made.enabled) == (
        "runtime", "cron", "0 7 * * *", "Europe/Berlin", True)
    [(job_id, run_at, tenant, status)] = queued(conn, "report:acme")
    assert (run_at, tenant, status) == (made.next_fire_at, "acme", "queued")
    assert run_at.astimezone(UTC).hour in (5, 6)  # 07:00 in Berlin
    assert scalar(conn, "SELECT payload FROM jobs WHERE id = %s", (job_id,)) == {"customer": "acme"}
    assert schedules.get("report:acme") == made
    assert [s.name for s in schedules.list(origin="runtime")] == ["report:acme"]
    assert schedules.list(queue="other") == []


BAD = [
    ({"cron": "0 25 * * *"}, "invalid cron schedule"),
    ({"cron": "0 0 30 2 *"}, "invalid cron schedule"),
    ({"cron": "* * *"}, "invalid cron schedule"),
    ({"every": "5 parsecs"}, "must look like"),
    ({"cron": "0 7 * * *", "timezone": "Mars/Olympus"}, "unknown time zone"),
    ({"cron": "0 7 * * *", "every": "5m"}, "exactly one of cron= or every="),
    ({}, "exactly one of cron= or every="),
    ({"every": "5m", "catch_up": "all"}, "catch_up"),
    ({"every": "5m", "tenant": ""}, "tenant"),
]


@pytest.mark.parametrize(("kwargs", "message"), BAD)
def test_bad_input_is_a_clear_error_and_writes_nothing(conn, kwargs, message):
    with pytest.raises(ConfigError, match=message):
        schedules.create("bad", "reports", {}, **kwargs)
    assert written(conn) == (0, 0, 0)


def test_a_taken_name_is_refused_whoever_took_it_and_nothing_is_written(conn, pool):
    schedules.create("daily", "reports", {}, every="1d")
    RecurringService(pool, [define("from-code", queue="rq", every="1h")]).run_once()
    before = written(conn)
    for name in ("daily", "from-code"):
        with pytest.raises(ConfigError, match=f"a schedule named '{name}' already exists"):
            schedules.create(name, "elsewhere", {"x": 1}, every="5m")
    assert written(conn) == before
    assert schedules.get("daily").queue == "reports"  # type: ignore[union-attr]


def test_update_withdraws_the_pending_job_and_plans_the_new_schedule(conn):
    schedules.create("sync", "rq", {"v": 1}, every="1h")
    [(old_job, _, _, _)] = queued(conn, "sync")
    changed = schedules.update("sync", every="1m", payload={"v": 2}, tenant="t9")
    assert scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (old_job,)) == "failed"  # cancelled
    [(new_job, run_at, tenant, _status)] = [r for r in queued(conn, "sync") if r[3] == "queued"]
    assert (run_at, tenant, changed.schedule) == (changed.next_fire_at, "t9", "1m")
    assert run_at - datetime.now(UTC) <= timedelta(minutes=1)
    assert scalar(conn, "SELECT payload FROM jobs WHERE id = %s", (new_job,)) == {"v": 2}
    with pytest.raises(ConfigError, match="invalid cron"):
        schedules.update("sync", cron="61 * * * *")
    assert schedules.get("sync").schedule == "1m"  # type: ignore[union-attr]


def test_pause_resume_and_delete(conn):
    schedules.create("nightly", "rq", {}, cron="0 2 * * *")
    assert schedules.pause("nightly") is True and schedules.get("nightly").enabled is False  # type: ignore[union-attr]
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'queued'") == 0
    assert schedules.resume("nightly") is True
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'queued'") == 1
    assert schedules.delete("nightly") is True
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'queued'") == 0  # its pending job withdrawn
    assert schedules.get("nightly") is None and written(conn)[0] == 0
    assert schedules.delete("nightly") is False
    with pytest.raises(ConfigError, match="no schedule named"):
        schedules.pause("nightly")


def test_code_definitions_are_not_changed_at_runtime_and_the_sync_leaves_runtime_ones_alone(conn, pool):
    schedules.create("runtime-on-rq", "rq", {}, every="1h")
    schedules.create("clash", "rq", {"runtime": True}, every="1h")
    code = RecurringService(pool, [define("coded", queue="rq", every="1h"),
                                   define("clash", queue="rq", every="5m", payload={"code": True})])
    result = code.sync()
    assert result.conflicts == ["clash"] and result.deactivated == []  # rq is this process's queue
    assert {s.name: (s.origin, s.active) for s in schedules.list()} == {
        "clash": ("runtime", True), "coded": ("code", True), "runtime-on-rq": ("runtime", True)}
    assert schedules.get("clash").payload == {"runtime": True}  # type: ignore[union-attr]
    for action in (lambda: schedules.update("coded", every="5m"), lambda: schedules.delete("coded")):
        with pytest.raises(ConfigError, match="defined in code"):
            action()
    assert schedules.pause("coded") is True  # an operator may still pause a code definition


def test_backfill_enqueues_each_missed_slot_once(conn):
    schedules.create("minutely", "rq", {"n": 1}, every="1m", tenant="acme")
    now = datetime.now(UTC)
    start = MINUTE.next_after(now - timedelta(minutes=10))
    ids = schedules.backfill("minutely", start, now)
    fire_times = [start + timedelta(minutes=k) for k in range(10) if start + timedelta(minutes=k) <= now]
    assert len(ids) == len(fire_times) >= 9
    assert [r[0] for r in conn.execute("SELECT unique_key FROM jobs WHERE id = ANY(%s) ORDER BY id", (ids,))] == [
        slot_key("minutely", t) for t in fire_times]
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE id = ANY(%s) AND tenant = 'acme' AND run_at <= now()",
                  (ids,)) == len(ids)
    # again, over a range that overlaps (and ends in the future, which backfill stops at now): only the two
    # slots never enqueued
    again = schedules.backfill("minutely", start - timedelta(minutes=2), now + timedelta(hours=1))
    assert [r[0] for r in conn.execute("SELECT unique_key FROM jobs WHERE id = ANY(%s) ORDER BY id", (again,))] == [
        slot_key("minutely", start - timedelta(minutes=k)) for k in (2, 1)]
    keys = [r[0] for r in conn.execute("SELECT unique_key FROM jobs WHERE queue = 'rq'")]
    assert len(keys) == len(set(keys))  # no slot twice
    with pytest.raises(ConfigError, match="before its start"):
        schedules.backfill("minutely", now, start)
    with pytest.raises(ConfigError, match="more than"):
        schedules.backfill("minutely", now - timedelta(days=30), now)


def test_sql_producers_create_and_delete_schedules(conn, pool):
    assert scalar(conn, "SELECT skiplock_create_schedule('sql:acme', 'reports', '{\"c\": 1}', p_cron => '0 7 * * *',"
                        " p_timezone => 'America/New_York', p_tenant => 'acme')") == "sql:acme"
    for call, message in [
        ("skiplock_create_schedule('x', 'q', p_cron => '0 7 * *')", "5 fields"),
        ("skiplock_create_schedule('x', 'q', p_every => '5 parsecs')", "invalid interval"),
        ("skiplock_create_schedule('x', 'q', p_every => '5m', p_timezone => 'Mars/Olympus')", "unknown time zone"),
        ("skiplock_create_schedule('sql:acme', 'q', p_every => '5m')", "already exists"),
    ]:
        with pytest.raises(psycopg.Error, match=message):
            conn.execute(f"SELECT {call}")
    assert written(conn) == (1, 0, 0)
    [(name, fire_at)] = RecurringService(pool).run_once()  # any worker's next pass plans it
    assert name == "sql:acme" and fire_at.astimezone(UTC).hour in (11, 12)
    assert [r[2] for r in queued(conn, "sql:acme")] == ["acme"]
    assert scalar(conn, "SELECT skiplock_delete_schedule('sql:acme')") is True
    assert written(conn) == (0, 0, 0)


def test_the_cli_creates_edits_backfills_and_deletes_with_an_audit_row_each(conn, capsys):
    assert main(["schedules", "create", "cli:one", "--queue", "rq", "--every", "1m", "--payload", '{"a": 1}',
                 "--tenant", "acme"]) == 0
    assert main(["schedules", "edit", "cli:one", "--cron", "*/5 * * * *", "--timezone", "Asia/Tokyo"]) == 0
    start = (datetime.now(UTC) - timedelta(minutes=20)).isoformat()
    assert main(["schedules", "backfill", "cli:one", "--from", start]) == 0
    assert main(["schedules", "list"]) == 0
    out = capsys.readouterr().out
    assert "created cli:one" in out and re.search(r"backfilled [45] slot\(s\) of cli:one", out)
    assert "*/5 * * * *" in out and "runtime" in out
    assert main(["schedules", "delete", "cli:one"]) == 0
    assert [r[0] for r in conn.execute("SELECT action FROM audit_log ORDER BY id")] == [
        "create schedule", "edit schedule", "backfill schedule", "delete schedule"]
    assert main(["schedules", "create", "cli:two", "--queue", "rq", "--cron", "0 7 * * *",
                 "--timezone", "Nowhere/X"]) != 0
    assert "unknown time zone 'Nowhere/X'" in capsys.readouterr().err
    assert written(conn)[0] == 0 and scalar(conn, "SELECT count(*) FROM audit_log") == 4


def doc_shell_lines() -> list[list[str]]:
    """The `skiplock schedules` lines of the recurring-jobs how-to, continuation lines joined."""
    text = (REPO / "docs" / "howto" / "recurring-jobs.md").read_text()
    block = text.split("From the shell", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    return [shlex.split(line) for line in block.replace("\\\n", " ").splitlines() if line.strip()]


def test_the_how_tos_shell_lines_run_as_written(conn, capsys):
    lines = doc_shell_lines()
    assert [line[:3] for line in lines] == [["skiplock", "schedules", a] for a in ("create", "edit", "backfill",
                                                                                  "delete")]
    for line in lines[:3]:
        assert main(line[1:]) == 0
    out = capsys.readouterr().out
    # 06:30 Berlin on weekdays between 1 and 4 January 2026: Thursday the 1st and Friday the 2nd
    assert "backfilled 2 slot(s) of report:acme" in out
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'queued' AND tenant = 'acme' "
                        "AND payload = '{\"customer\": \"acme\"}'") == 3
    assert main(lines[3][1:]) == 0
    assert written(conn)[0] == 0


def test_a_pass_reads_only_the_due_schedules_through_the_index(conn, pool):
    # many schedules, none due: the pass's read is an index range, and plans nothing
    conn.execute("""INSERT INTO recurring_schedules (name, queue, kind, schedule, origin, next_fire_at, plan_at)
                    SELECT 's' || g, 'rq', 'interval', '1h', 'runtime', now() + interval '1 hour',
                           now() + interval '1 hour' FROM generate_series(1, 20000) g""")
    conn.execute("ANALYZE recurring_schedules")
    plan = "\n".join(r[0] for r in conn.execute(
        "EXPLAIN SELECT name, queue, next_fire_at FROM recurring_schedules WHERE enabled AND active "
        "AND coalesce(plan_at, '-infinity'::timestamptz) <= now() "
        "ORDER BY coalesce(plan_at, '-infinity'::timestamptz) LIMIT 500"))
    assert "recurring_schedules_plan_idx" in plan and "Seq Scan" not in plan
    assert RecurringService(pool).run_once() == []
    # all due at once: one pass plans at most PASS_LIMIT, the next ones the rest
    conn.execute("UPDATE recurring_schedules SET next_fire_at = NULL, plan_at = NULL "
                 "WHERE name IN (SELECT 's' || g FROM generate_series(1, 1200) g)")
    due = scalar(conn, "SELECT count(*) FROM recurring_schedules WHERE plan_at IS NULL")
    service = RecurringService(pool)
    assert len(service.run_once()) == PASS_LIMIT
    total = PASS_LIMIT
    while (planned := len(service.run_once())) > 0:
        total += planned
    assert total == due and scalar(conn, "SELECT count(*) FROM jobs") == due


def test_a_pass_writes_a_batch_of_due_schedules_with_a_few_statements_not_a_few_per_schedule(conn, pool,
                                                                                               monkeypatch):
    # 1,000 schedules due together: the pass's statements do not grow with the number it plans
    conn.execute("SELECT skiplock_create_schedule('s' || g, 'rq', jsonb_build_object('n', g), p_every => '1m', "
                 "p_tenant => 'tenant-' || (g % 7)) FROM generate_series(1, 1000) g")
    service = RecurringService(pool)
    service.sync()
    sent: list[str] = []
    real_execute = psycopg.Cursor.execute

    def counting_execute(self, query, params=None, **kwargs):  # a spy: the real statement runs
        sent.append(str(query))
        return real_execute(self, query, params, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", counting_execute)
    now = datetime.now(UTC)
    assert len(service.run_once(now)) == PASS_LIMIT
    monkeypatch.undo()
    # a read of the due names, then about five statements and a commit per batch (not four per schedule)
    assert len(sent) <= 12, len(sent)
    while service.run_once(now):
        pass
    # and each schedule got exactly its next slot, with its own job carrying its payload and tenant
    assert scalar(conn, "SELECT count(*) FROM recurring_slots s JOIN jobs j ON j.id = s.job_id "
                        "JOIN recurring_schedules r ON r.name = s.name "
                        "WHERE j.payload = r.payload AND j.tenant = r.tenant AND j.run_at = s.fire_at "
                        "AND r.next_fire_at = s.fire_at AND r.plan_at > s.fire_at") == 1000
    assert scalar(conn, "SELECT count(DISTINCT job_id) FROM recurring_slots") == 1000
    # a second pass at the same moment plans nothing; one a minute later plans each next slot once
    assert service.run_once(now) == []
    # half a minute after the slot just planned fires: each schedule's next slot is due to be planned, and
    # the one after it not yet (a fixed 'now + 80 s' planned two when now was late in its minute)
    later = scalar(conn, "SELECT max(next_fire_at) FROM recurring_schedules") + timedelta(seconds=30)
    planned = 0
    while (batch := len(service.run_once(later))) > 0:
        planned += batch
    assert planned == 1000
    assert scalar(conn, "SELECT count(*) FROM recurring_slots") == 2000
    assert scalar(conn, "SELECT count(*) FROM jobs") == 2000
