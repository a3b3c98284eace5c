"""Recurring definitions and slot planning without a database: validation, time math, catch-up."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from skiplock import ConfigError, task
from skiplock.core.registry import REGISTRY
from skiplock.services.recurring_defs import DEFINITIONS, define, recurring
from skiplock.services.schedule import (
    IntervalSchedule,
    build_schedule,
    latest_at_or_before,
    parse_interval,
    plan_slots,
    spread_offset,
)

T0 = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


@pytest.fixture
def clean_definitions():
    saved = dict(DEFINITIONS)
    yield
    DEFINITIONS.clear()
    DEFINITIONS.update(saved)


def test_interval_parsing():
    assert [parse_interval(t) for t in ("30s", "5m", "1h", "1d", "1h30m", " 2M ")] == [
        30, 300, 3600, 86400, 5400, 120]
    for bad in ("", "5", "5x", "m5", "0s", "-5m", "5m junk"):
        with pytest.raises(ValueError):
            parse_interval(bad)


def test_invalid_cron_names_the_definition():
    with pytest.raises(ConfigError, match=r"recurring 'nightly-report'.*invalid cron schedule '61 2 \* \* \*'"):
        define("nightly-report", queue="reports", cron="61 2 * * *")
    with pytest.raises(ConfigError, match=r"recurring 'four-fields'.*Wrong number of fields"):
        define("four-fields", queue="reports", cron="0 2 * *")


def test_invalid_time_zone_names_the_definition():
    with pytest.raises(ConfigError, match=r"recurring 'berlin-report'.*unknown time zone 'Europe/Berln'"):
        define("berlin-report", queue="reports", cron="0 2 * * *", timezone="Europe/Berln")


def test_other_invalid_definitions_name_themselves():
    with pytest.raises(ConfigError, match=r"recurring 'both'.*exactly one of cron= or every="):
        define("both", queue="q", cron="* * * * *", every="1m")
    with pytest.raises(ConfigError, match=r"recurring 'neither'.*exactly one"):
        define("neither", queue="q")
    with pytest.raises(ConfigError, match=r"recurring 'bad-every'.*'5 minutes'"):
        define("bad-every", queue="q", every="5 minutes")
    with pytest.raises(ConfigError, match=r"recurring 'policy'.*catch_up"):
        define("policy", queue="q", every="5m", catch_up="all")
    with pytest.raises(ConfigError, match=r"recurring 'payload'.*JSON"):
        define("payload", queue="q", every="5m", payload={"x": object()})


def test_recurring_registers_and_rejects_a_conflicting_twin(clean_definitions):
    d = recurring("sync-crm", queue="crm", every=300, payload={"full": False})
    assert d.kind == "interval" and d.schedule == "300s" and DEFINITIONS["sync-crm"] == d
    assert recurring("sync-crm", queue="crm", every=300, payload={"full": False}) == d  # re-import is fine
    with pytest.raises(ConfigError, match="'sync-crm' is defined twice"):
        recurring("sync-crm", queue="crm", every="10m")


def test_task_every_registers_a_definition_named_after_the_queue(clean_definitions):
    def handler(payload):
        return None

    try:
        task("recurring-unit-q", every="5m", catch_up="skip")(handler)
        d = DEFINITIONS["recurring-unit-q"]
        assert (d.queue, d.kind, d.schedule, d.catch_up) == ("recurring-unit-q", "interval", "5m", "skip")
        with pytest.raises(ConfigError, match=r"recurring 'recurring-unit-bad'.*unknown time zone"):
            task("recurring-unit-bad", cron="0 * * * *", timezone="Nowhere/Land")(handler)
        with pytest.raises(ConfigError, match=r"timezone= and catch_up= need every= or cron="):
            task("recurring-unit-tz", timezone="UTC")(handler)
    finally:
        for q in ("recurring-unit-q", "recurring-unit-bad", "recurring-unit-tz"):
            REGISTRY._tasks.pop(q, None)


def test_interval_slots_are_aligned_to_the_epoch():
    every5 = IntervalSchedule(300)
    assert every5.next_after(T0) == T0 + timedelta(minutes=5)
    assert every5.next_after(T0 - timedelta(microseconds=1)) == T0
    assert every5.next_after(T0 + timedelta(seconds=1)) == T0 + timedelta(minutes=5)


def test_cron_in_a_time_zone_fires_in_local_time_across_dst():
    nightly = build_schedule("cron", "0 2 * * *", "Europe/Berlin")
    # winter: 02:00 CET = 01:00 UTC; summer: 02:00 CEST = 00:00 UTC
    assert nightly.next_after(datetime(2026, 1, 5, 12, tzinfo=UTC)) == datetime(2026, 1, 6, 1, tzinfo=UTC)
    assert nightly.next_after(datetime(2026, 7, 5, 12, tzinfo=UTC)) == datetime(2026, 7, 6, 0, tzinfo=UTC)


def test_latest_at_or_before_finds_the_last_slot_fast_after_long_downtime():
    every_second = IntervalSchedule(1)
    moment = T0 + timedelta(days=30, milliseconds=500)
    assert latest_at_or_before(every_second, moment, after=T0) == T0 + timedelta(days=30)
    assert latest_at_or_before(every_second, T0 + timedelta(milliseconds=500), after=T0) is None
    weekdays = build_schedule("cron", "30 9 * * 1-5", "UTC")
    saturday = datetime(2026, 1, 10, 12, tzinfo=UTC)
    assert latest_at_or_before(weekdays, saturday, after=T0) == datetime(2026, 1, 9, 9, 30, tzinfo=UTC)


def test_plan_first_start_enqueues_only_the_next_slot():
    assert plan_slots(IntervalSchedule(300), None, T0 + timedelta(seconds=1), "once") == [T0 + timedelta(minutes=5)]


def test_plan_nothing_while_the_pending_slot_is_in_the_future():
    assert plan_slots(IntervalSchedule(300), T0 + timedelta(minutes=5), T0 + timedelta(minutes=4), "once") == []


def test_plan_enqueues_the_next_slot_once_the_pending_one_fired():
    every5 = IntervalSchedule(300)
    assert plan_slots(every5, T0, T0 + timedelta(seconds=3), "skip") == [T0 + timedelta(minutes=5)]


def test_plan_a_late_pass_still_enqueues_each_late_slot():
    every_second = IntervalSchedule(1)
    # a pass 3.5 s late (within the grace) loses nothing, whatever the policy
    plan = plan_slots(every_second, T0, T0 + timedelta(seconds=3.5), "skip")
    assert plan == [T0 + timedelta(seconds=s) for s in (1, 2, 3, 4)]


def test_plan_catch_up_once_after_downtime_is_one_run_not_a_burst():
    every5 = IntervalSchedule(300)
    now = T0 + timedelta(hours=3, minutes=2)  # 36 slots missed
    plan = plan_slots(every5, T0, now, "once")
    assert plan == [T0 + timedelta(hours=3), T0 + timedelta(hours=3, minutes=5)]


def test_plan_catch_up_skip_after_downtime_runs_nothing_missed():
    every5 = IntervalSchedule(300)
    now = T0 + timedelta(hours=3, minutes=2)
    assert plan_slots(every5, T0, now, "skip") == [T0 + timedelta(hours=3, minutes=5)]


def test_plan_catch_up_for_a_daily_cron():
    nightly = build_schedule("cron", "0 2 * * *", "UTC")
    head = datetime(2026, 1, 1, 2, tzinfo=UTC)
    now = datetime(2026, 1, 4, 9, tzinfo=UTC)
    assert plan_slots(nightly, head, now, "once") == [datetime(2026, 1, 4, 2, tzinfo=UTC),
                                                      datetime(2026, 1, 5, 2, tzinfo=UTC)]
    assert plan_slots(nightly, head, now, "skip") == [datetime(2026, 1, 5, 2, tzinfo=UTC)]


def test_spread_offset_is_stable_bounded_and_differs_by_name():
    minute = timedelta(minutes=1)
    offsets = {spread_offset(f"def-{i}", timedelta(days=1)) for i in range(200)}
    assert len(offsets) > 150 and all(timedelta(0) <= o < timedelta(seconds=30) for o in offsets)
    assert spread_offset("a", minute) == spread_offset("a", minute)
    assert spread_offset("a", timedelta(seconds=1)) < timedelta(seconds=0.25)


def test_cron_day_of_week_uses_crontab_numbering():
    saturday = datetime(2026, 1, 10, 12, tzinfo=UTC)  # 2026-01-10 is a Saturday
    weekdays = build_schedule("cron", "30 9 * * 1-5", "UTC")
    assert weekdays.next_after(saturday) == datetime(2026, 1, 12, 9, 30, tzinfo=UTC)
    assert build_schedule("cron", "0 8 * * 0", "UTC").next_after(saturday) == datetime(2026, 1, 11, 8, tzinfo=UTC)
    assert build_schedule("cron", "0 8 * * 7", "UTC").next_after(saturday) == datetime(2026, 1, 11, 8, tzinfo=UTC)
    assert build_schedule("cron", "0 8 * * sat", "UTC").next_after(saturday) == datetime(2026, 1, 17, 8, tzinfo=UTC)
    # */2 is Sun, Tue, Thu, Sat in crontab
    every_other = build_schedule("cron", "0 8 * * */2", "UTC")
    assert every_other.next_after(datetime(2026, 1, 11, 9, tzinfo=UTC)) == datetime(2026, 1, 13, 8, tzinfo=UTC)


def test_cron_day_of_month_or_day_of_week_like_crontab():
    # both restricted: the 15th OR any Monday
    either = build_schedule("cron", "0 0 15 * 1", "UTC")
    assert either.next_after(datetime(2026, 1, 10, tzinfo=UTC)) == datetime(2026, 1, 12, tzinfo=UTC)
    assert either.next_after(datetime(2026, 1, 12, 1, tzinfo=UTC)) == datetime(2026, 1, 15, tzinfo=UTC)


def test_a_crontab_that_never_fires_is_rejected():
    with pytest.raises(ConfigError, match=r"recurring 'feb-30'.*no further fire time"):
        define("feb-30", queue="q", cron="0 0 30 2 *")
