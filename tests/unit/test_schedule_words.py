"""Schedules in plain words, their next fires and their fires per hour (pure: plain datetimes)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from skiplock.services.schedule_words import busiest_hours, describe, fires_per_hour, next_fires

START = datetime(2026, 3, 2, 0, 0, tzinfo=UTC)  # a Monday


@pytest.mark.parametrize(("kind", "schedule", "timezone", "words"), [
    ("cron", "* * * * *", "UTC", "every minute"),
    ("cron", "*/5 * * * *", "UTC", "every 5 minutes"),
    ("cron", "17 * * * *", "UTC", "every hour at minute 17"),
    ("cron", "0 7 * * *", "Europe/Berlin", "every day at 07:00 (Europe/Berlin)"),
    ("cron", "30 6 * * 1-5", "UTC", "at 06:30, Monday to Friday"),
    ("cron", "0 9 * * 0,6", "UTC", "at 09:00, Sunday and Saturday"),
    ("cron", "0 2 1 * *", "UTC", "at 02:00 on day 1 of every month"),
    ("cron", "0 0 25 12 *", "UTC", "at 00:00 on 25 December"),
    ("cron", "0 */2 * * *", "UTC", "cron: minute 0, hour */2, day of month *, month *, day of week *"),
    ("interval", "30s", "UTC", "every 30 seconds"),
    ("interval", "1h30m", "UTC", "every 1 hour 30 minutes"),
    ("interval", "1d", "UTC", "every 1 day"),
])
def test_describe(kind, schedule, timezone, words):
    assert describe(kind, schedule, timezone) == words


def test_next_fires_follow_the_schedule_in_its_time_zone():
    assert next_fires("cron", "0 7 * * *", "Europe/Berlin", START, 2) == [
        datetime(2026, 3, 2, 6, 0, tzinfo=UTC), datetime(2026, 3, 3, 6, 0, tzinfo=UTC)]
    assert next_fires("interval", "5m", "UTC", START) == [
        datetime(2026, 3, 2, 0, m, tzinfo=UTC) for m in (5, 10, 15)]


def test_fires_per_hour_counts_each_hour_of_the_next_day():
    assert fires_per_hour("cron", "*/15 * * * *", "UTC", START) == (4,) * 24
    assert fires_per_hour("cron", "0 */6 * * *", "UTC", START) == tuple(1 if h % 6 == 0 else 0 for h in range(24))
    assert fires_per_hour("interval", "1s", "UTC", START) == (3600,) * 24  # counted exactly, not stepped
    assert fires_per_hour("interval", "7m", "UTC", START, 2) == (9, 8)  # multiples of 420 s since the epoch
    assert sum(fires_per_hour("cron", "* * * * *", "UTC", START)) == 1440


def test_busiest_hours_sum_the_schedules():
    lines = [fires_per_hour("cron", "0 7 * * *", "UTC", START), fires_per_hour("cron", "*/30 7,8 * * *", "UTC", START)]
    assert busiest_hours(lines) == [(7, 3), (8, 2)]


def test_fires_per_minute_counts_crons_and_intervals_and_busiest_minutes_adds_them_up():
    from datetime import UTC, datetime

    from skiplock.services.schedule_words import busiest_minutes, fires_per_minute

    start = datetime(2026, 3, 1, 6, tzinfo=UTC)
    daily = fires_per_minute("cron", "0 7 * * *", "UTC", start)
    assert daily == ((60, 1),)
    half_hourly = fires_per_minute("interval", "30m", "UTC", start)
    assert len(half_hourly) == 48 and half_hourly[:3] == ((0, 1), (30, 1), (60, 1))
    twenty_seconds = fires_per_minute("interval", "20s", "UTC", start)
    assert len(twenty_seconds) == 1440 and {n for _, n in twenty_seconds} == {3}
    assert busiest_minutes([("a", daily), ("b", half_hourly), ("c", daily)]) == [
        (60, 3, ["a", "b", "c"]), (0, 1, ["b"]), (30, 1, ["b"])]
