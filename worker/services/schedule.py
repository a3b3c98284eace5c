"""Pure time math for recurring jobs: when slots fire, which ones to enqueue, and load spreading.

Nothing here touches the database or reads the clock: every function takes `now`, so tests
drive catch-up and lateness with plain datetimes.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from apscheduler.triggers.cron import CronTrigger

# Interval slots are multiples of the interval counted from this instant, so every worker, on
# every restart, computes the same slot times (APScheduler's IntervalTrigger would anchor at
# the moment it was built, which differs per process).
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# A slot less than this late is "late", not "missed": it is still enqueued, whatever the
# catch-up policy (a slow scheduler pass, a quick deploy). Older slots are missed slots.
LATE_GRACE = timedelta(seconds=10)

# The enqueue of a definition's next slot waits hash(name) * min(this, period / 4) after the
# current slot fired, so definitions that share fire times insert at different moments.
SPREAD_MAX = timedelta(seconds=30)

_INTERVAL_PART = re.compile(r"(\d+)\s*([smhd])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_ONE_US = timedelta(microseconds=1)


class Schedule(Protocol):
    """When a definition fires."""

    def next_after(self, moment: datetime) -> datetime:
        """The first fire time strictly after `moment`."""
        ...


@dataclass(frozen=True)
class IntervalSchedule:
    """Every `seconds`, aligned to multiples since the Unix epoch (UTC)."""

    seconds: int

    def next_after(self, moment: datetime) -> datetime:
        """The first multiple of the interval strictly after `moment`."""
        step = timedelta(seconds=self.seconds)
        count = (moment - EPOCH) // step
        return EPOCH + (count + 1) * step


@dataclass(frozen=True)
class CronSchedule:
    """A 5-field crontab expression read in a time zone (APScheduler CronTriggers, see cron_triggers).

    The triggers run on wall-clock time written as UTC (a zone without DST), and the real zone is
    attached to the result: APScheduler 3 steps cron fields on zone-aware datetimes and lands an
    hour off when a DST change lies between "now" and the fire time (found by the property test:
    '* * * 1 *' in Australia/Sydney from October gave 01:00 on 1 January instead of 00:00).
    """

    triggers: tuple[CronTrigger, ...]
    zone: ZoneInfo

    def next_after(self, moment: datetime) -> datetime:
        """The first cron fire time strictly after `moment`, in UTC."""
        wall = moment.astimezone(self.zone).replace(tzinfo=UTC)
        # A wall time in the repeated hour of a DST fall-back maps to its first occurrence, which
        # can be before `moment`; cron fires once per wall time, so move on to the next one.
        for _ in range(4):
            fires = [t.get_next_fire_time(None, wall + _ONE_US) for t in self.triggers]
            found = [f for f in fires if f is not None]
            if not found:  # a crontab has no end date; this guards a future APScheduler change
                raise ValueError("cron expression has no further fire time")
            wall = min(found)
            # a wall time skipped by a DST spring-forward resolves with the earlier offset, i.e.
            # just after the jump, as cron does
            fire = wall.replace(tzinfo=self.zone).astimezone(UTC)
            if fire > moment:
                return fire
        raise ValueError("cron expression has no fire time after a DST change")


_WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")  # crontab numbering: 0 (and 7) = Sunday


def _weekday(token: str) -> int:
    token = token.strip().lower()
    if token[:3] in _WEEKDAYS and len(token) >= 3:
        return _WEEKDAYS.index(token[:3])
    value = int(token)  # ValueError for anything else
    if not 0 <= value <= 7:
        raise ValueError(f"day of week {token!r} is outside 0-7")
    return value


def _cron_weekdays(field: str) -> str:
    """A crontab day-of-week field as APScheduler weekday names.

    APScheduler 3 numbers weekdays from Monday = 0 and its from_crontab passes the field through
    unchanged, so '1-5' would mean Tuesday-Saturday there. Expanding to names keeps crontab's
    meaning (0/7 = Sunday), including steps like '*/2' (Sun, Tue, Thu, Sat).
    """
    days: set[int] = set()
    for item in field.split(","):
        base, _, step_text = item.partition("/")
        step = int(step_text) if step_text else 1
        if step < 1:
            raise ValueError(f"step in day of week {item!r} must be >= 1")
        if base == "*":
            low, high = 0, 6
        elif "-" in base:
            first, last = base.split("-", 1)
            low, high = _weekday(first), _weekday(last)
            if low > high:
                raise ValueError(f"day-of-week range {base!r} runs backwards")
        else:
            low = _weekday(base)
            high = 6 if step_text else low
        days |= {day % 7 for day in range(low, high + 1, step)}
    if len(days) == 7:
        return "*"
    return ",".join(_WEEKDAYS[day] for day in sorted(days))


def cron_triggers(expression: str) -> tuple[CronTrigger, ...]:
    """The CronTriggers that together fire exactly when the crontab `expression` does.

    Crontab runs a job when day-of-month OR day-of-week matches if both are restricted;
    APScheduler requires both, so that case becomes two triggers whose earliest fire wins.
    """
    fields = expression.split()
    if len(fields) != 5:
        raise ValueError(f"Wrong number of fields; got {len(fields)}, expected 5")
    minute, hour, day, month, weekday = fields
    try:
        weekdays = _cron_weekdays(weekday)
    except ValueError as exc:
        raise ValueError(f"Error validating day of week {weekday!r}: {exc}") from None
    # UTC on purpose: CronSchedule evaluates on wall-clock time and attaches its zone itself
    common = {"minute": minute, "hour": hour, "month": month, "timezone": UTC}
    if not day.startswith("*") and not weekday.startswith("*"):
        return (CronTrigger(day=day, **common), CronTrigger(day_of_week=weekdays, **common))
    return (CronTrigger(day=day, day_of_week=weekdays, **common),)


def parse_interval(text: str) -> int:
    """'30s', '5m', '1h', '1d' or '1h30m' -> seconds; ValueError if it is not one of these.

    >>> parse_interval("1h30m")
    5400
    """
    cleaned = text.strip().lower()
    parts = _INTERVAL_PART.findall(cleaned)
    if not parts or _INTERVAL_PART.sub("", cleaned).strip():
        raise ValueError(f"interval {text!r} must look like '30s', '5m', '1h', '1d' or '1h30m'")
    seconds = sum(int(n) * _UNIT_SECONDS[unit] for n, unit in parts)
    if seconds < 1:
        raise ValueError(f"interval {text!r} must be at least 1 second")
    return seconds


def load_zone(name: str) -> ZoneInfo:
    """The IANA time zone `name`; ValueError naming it when it does not exist."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {name!r} (use an IANA name like 'Europe/Berlin')") from None


@lru_cache(maxsize=1024)
def build_schedule(kind: str, schedule: str, timezone: str) -> Schedule:
    """A Schedule from a stored (kind, schedule, timezone); ValueError if any part is invalid.

    Cached: the scheduler rebuilds schedules from table rows on every pass.
    """
    zone = load_zone(timezone)
    if kind == "interval":
        return IntervalSchedule(parse_interval(schedule))
    if kind == "cron":
        return CronSchedule(cron_triggers(schedule), zone)
    raise ValueError(f"schedule kind must be 'cron' or 'interval', got {kind!r}")


def latest_at_or_before(schedule: Schedule, moment: datetime, after: datetime) -> datetime | None:
    """The last fire time in (after, moment], or None if there is none.

    Schedules only answer "next after", so probe backwards from `moment` with a doubling step
    and walk forward from the first hit: a few calls even after months of downtime.
    """
    if moment <= after:
        return None
    step = timedelta(seconds=1)
    while True:
        probe = max(moment - step, after)
        fire = schedule.next_after(probe)
        if fire <= moment:
            while (following := schedule.next_after(fire)) <= moment:
                fire = following
            return fire
        if probe == after:
            return None
        step *= 2


def plan_slots(schedule: Schedule, head: datetime | None, now: datetime, catch_up: str,
               grace: timedelta = LATE_GRACE) -> list[datetime]:
    """The slots to enqueue now, oldest first; the last one is always the next future slot.

    `head` is the latest slot already enqueued (None: nothing pending, plan from `now`). While
    the head is still in the future there is nothing to do. Slots missed by more than `grace`
    follow `catch_up`: 'once' enqueues only the most recent of them, 'skip' none; late slots
    within `grace` are each enqueued (bounded by grace / period), then the next future slot.
    """
    if head is None:
        return [schedule.next_after(now)]
    if head > now:
        return []
    slots: list[datetime] = []
    start = head
    missed = latest_at_or_before(schedule, now - grace, after=head)
    if missed is not None:
        if catch_up == "once":
            slots.append(missed)
        start = missed
    upcoming = schedule.next_after(start)
    while upcoming <= now:
        slots.append(upcoming)
        upcoming = schedule.next_after(upcoming)
    slots.append(upcoming)
    return slots


def spread_offset(name: str, period: timedelta) -> timedelta:
    """How long after its slot fires a definition waits before enqueueing the next one.

    A stable fraction (CRC32 of the name) of min(SPREAD_MAX, period / 4), so a thousand
    definitions firing at 02:00 insert their next slots over half a minute, not in one burst,
    and the next slot is still enqueued well ahead of its time.
    """
    fraction = zlib.crc32(name.encode()) / 2**32
    return min(SPREAD_MAX, period / 4) * fraction


def plan_time(name: str, kind: str, schedule: str, timezone: str, head: datetime) -> datetime:
    """When the slot after `head` should be enqueued: head + the definition's spread offset.

    Not cached: it is asked once per planned slot, and a cache keyed by name would grow with the number of
    schedules (the compiled schedule it needs is cached by build_schedule, per distinct schedule).
    """
    compiled = build_schedule(kind, schedule, timezone)
    return head + spread_offset(name, compiled.next_after(head) - head)
