"""What a schedule means, for people: its cron in plain words, its next fires, and its fires per hour.

Pure functions of the stored (kind, schedule, timezone) and a moment, like schedule.py below them: the
console's Recurring page shows these, and tests drive them with plain datetimes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime, timedelta
from functools import lru_cache

from skiplock.services.schedule import _WEEKDAYS, build_schedule, parse_interval

_DAY_NAMES = {"sun": "Sunday", "mon": "Monday", "tue": "Tuesday", "wed": "Wednesday", "thu": "Thursday",
              "fri": "Friday", "sat": "Saturday"}
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")
# Fires counted per schedule and day at most: a timeline is for spotting crowded hours, and an every-second
# schedule would otherwise cost 86,400 steps per page view.
MAX_COUNTED = 1440


def _plural(count: int, unit: str) -> str:
    return f"{count} {unit}" if count == 1 else f"{count} {unit}s"


def _duration(seconds: int) -> str:
    parts = []
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1)):
        if seconds >= size:
            parts.append(_plural(seconds // size, unit))
            seconds %= size
    return " ".join(parts)


def _day_name(token: str) -> str:
    token = token.lower()
    if token.isdigit():
        token = _WEEKDAYS[int(token) % 7]
    return _DAY_NAMES.get(token[:3], token)


def _weekdays(field: str) -> str | None:
    """'1-5' -> 'Monday to Friday', '0,6' -> 'Sunday and Saturday'; None for forms with steps."""
    if "/" in field:
        return None
    names = []
    for item in field.split(","):
        if "-" in item:
            first, last = item.split("-", 1)
            names.append(f"{_day_name(first)} to {_day_name(last)}")
        else:
            names.append(_day_name(item))
    return ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]


def describe_cron(expression: str) -> str:
    """A 5-field crontab in plain words.

    >>> describe_cron("0 7 * * *"), describe_cron("*/15 * * * *"), describe_cron("30 6 * * 1-5")
    ('every day at 07:00', 'every 15 minutes', 'at 06:30, Monday to Friday')
    """
    minute, hour, dom, month, dow = expression.split()
    number = re.compile(r"\d+")
    if (hour, dom, month, dow) == ("*", "*", "*", "*"):
        if minute == "*":
            return "every minute"
        if minute.startswith("*/"):
            return f"every {_plural(int(minute[2:]), 'minute')}"
        if number.fullmatch(minute):
            return f"every hour at minute {int(minute)}"
    if number.fullmatch(minute) and number.fullmatch(hour):
        at = f"{int(hour):02}:{int(minute):02}"
        if (dom, month) == ("*", "*"):
            days = None if dow == "*" else _weekdays(dow)
            if dow == "*":
                return f"every day at {at}"
            if days is not None:
                return f"at {at}, {days}"
        if number.fullmatch(dom) and dow == "*":
            if month == "*":
                return f"at {at} on day {int(dom)} of every month"
            if number.fullmatch(month) and 1 <= int(month) <= 12:
                return f"at {at} on {int(dom)} {_MONTHS[int(month) - 1]}"
    return f"cron: minute {minute}, hour {hour}, day of month {dom}, month {month}, day of week {dow}"


def describe(kind: str, schedule: str, timezone: str) -> str:
    """A stored schedule in plain words, with its time zone when cron fields are read in one other than UTC.

    >>> describe("interval", "1h30m", "UTC"), describe("cron", "0 7 * * *", "Europe/Berlin")
    ('every 1 hour 30 minutes', 'every day at 07:00 (Europe/Berlin)')
    """
    if kind == "interval":
        return f"every {_duration(parse_interval(schedule))}"
    words = describe_cron(schedule)
    return words if timezone == "UTC" else f"{words} ({timezone})"


def next_fires(kind: str, schedule: str, timezone: str, after: datetime, count: int = 3) -> list[datetime]:
    """The first `count` fire times strictly after `after`."""
    compiled = build_schedule(kind, schedule, timezone)
    fires: list[datetime] = []
    moment = after
    for _ in range(count):
        moment = compiled.next_after(moment)
        fires.append(moment)
    return fires


@lru_cache(maxsize=4096)
def fires_per_hour(kind: str, schedule: str, timezone: str, start: datetime, hours: int = 24) -> tuple[int, ...]:
    """How many times the schedule fires in each of the `hours` hours from `start` (an hour boundary).

    Cached per hour boundary: schedules that share a cron share the work, and a page view within the
    same hour recomputes nothing. At most MAX_COUNTED fires are counted; an interval is counted exactly.
    """
    counts = [0] * hours
    if kind == "interval":
        step = parse_interval(schedule)
        for h in range(hours):
            low = (start + timedelta(hours=h)).timestamp()
            # multiples of the interval (since the epoch) in [low, low + 3600)
            counts[h] = int(-(-(low + 3600) // step) - -(-low // step))
        return tuple(counts)
    # a cron's fires are enumerated once, by fires_per_minute (cached), and added up per hour here
    for minute, n in fires_per_minute(kind, schedule, timezone, start, hours):
        counts[minute // 60] += n
    return tuple(counts)


# A page of schedules (200) in one hour: an entry holds up to 1,440 minutes, so the cache stays a few MiB.
@lru_cache(maxsize=256)
def fires_per_minute(kind: str, schedule: str, timezone: str, start: datetime,
                     hours: int = 24) -> tuple[tuple[int, int], ...]:
    """(minute offset from `start`, fires in that minute) of the minutes in which the schedule fires, over
    `hours` hours from `start`: what the timeline's busiest minutes add up. Cached like fires_per_hour; at most
    MAX_COUNTED fires of a cron are counted, an interval is counted exactly."""
    minutes = hours * 60
    if kind == "interval":
        step = parse_interval(schedule)
        base = start.timestamp()
        if step < 60:  # every minute fires: count the multiples in each one
            return tuple((m, int(-(-(base + 60 * m + 60) // step) - -(-(base + 60 * m) // step)))
                         for m in range(minutes))
        first = -(-base // step) * step
        return tuple((int((t - base) // 60), 1) for t in range(int(first), int(base) + minutes * 60, step))
    compiled = build_schedule(kind, schedule, timezone)
    end = start + timedelta(hours=hours)
    counts: dict[int, int] = {}
    moment = start - timedelta(microseconds=1)
    for _ in range(MAX_COUNTED):
        moment = compiled.next_after(moment)
        if moment >= end:
            break
        minute = int((moment - start) // timedelta(minutes=1))
        counts[minute] = counts.get(minute, 0) + 1
    return tuple(sorted(counts.items()))


def busiest_minutes(timelines: Iterable[tuple[str, tuple[tuple[int, int], ...]]],
                    top: int = 3) -> list[tuple[int, int, list[str]]]:
    """(minute offset, total fires, the schedules firing then) of the `top` busiest minutes over many schedules'
    fires_per_minute, busiest first: the minute a thousand reports all start in stands out."""
    totals: dict[int, int] = {}
    names: dict[int, list[str]] = {}
    for name, fires in timelines:
        for minute, n in fires:
            totals[minute] = totals.get(minute, 0) + n
            names.setdefault(minute, []).append(name)
    ranked = sorted(totals.items(), key=lambda item: (-item[1], item[0]))[:top]
    return [(minute, total, names[minute]) for minute, total in ranked if total > 0]


def busiest_hours(timelines: Iterable[tuple[int, ...]], top: int = 3) -> list[tuple[int, int]]:
    """(hour offset, total fires) of the `top` busiest hours over many schedules' timelines, busiest first."""
    totals: list[int] = []
    for line in timelines:
        if not totals:
            totals = [0] * len(line)
        totals = [a + b for a, b in zip(totals, line, strict=True)]
    ranked = sorted(enumerate(totals), key=lambda item: (-item[1], item[0]))
    return [(hour, total) for hour, total in ranked[:top] if total > 0]
