"""Parsing of the console's query strings and forms: strict, with 400 for anything malformed.

Nothing parsed here is ever formatted into SQL; values are bound as parameters.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from flask import abort, request

MAX_ID = 2**63 - 1
MAX_TEXT = 200
# Time windows the dead-letter page offers (None = all time).
WINDOWS: dict[str, timedelta | None] = {
    "1h": timedelta(hours=1), "24h": timedelta(days=1), "7d": timedelta(days=7), "30d": timedelta(days=30),
    "all": None,
}
_CURSOR = re.compile(r"^(?:(-?\d{1,10})_)?(\d{1,19})_(\d{1,19})$")


def job_id(raw: str | None, what: str = "id") -> int | None:
    """A job id from a string of digits; None when empty; 400 otherwise."""
    if raw is None or raw.strip() == "":
        return None
    raw = raw.strip()
    # isdigit() alone accepts "²" and other Unicode digits that int() refuses (a 500, found by hypothesis)
    if not (raw.isascii() and raw.isdigit()) or not 0 < int(raw) <= MAX_ID:
        abort(400, f"{what} must be a positive whole number, got {raw[:40]!r}")
    return int(raw)


def required_job_id(raw: str | None) -> int:
    """A job id from a route's path: job_id(), and 400 when it is empty."""
    jid = job_id(raw)
    if jid is None:
        abort(400, "job id is required")
    return jid


def ids(values: list[str]) -> list[int]:
    """Selected job ids from checkboxes; 400 if any is malformed, or if none was selected."""
    parsed = [job_id(v, "selected id") for v in values]
    chosen = sorted({i for i in parsed if i is not None})
    if not chosen:
        abort(400, "no jobs selected")
    if len(chosen) > 10_000:
        abort(400, "at most 10,000 jobs can be selected at once; use 'all matching' instead")
    return chosen


def text(raw: str | None, what: str = "text") -> str | None:
    """A free-text filter; None when empty; 400 when longer than MAX_TEXT or holding NUL."""
    if raw is None or raw.strip() == "":
        return None
    if len(raw) > MAX_TEXT or "\x00" in raw:
        abort(400, f"{what} filter must be at most {MAX_TEXT} characters")
    return raw.strip()


def queue(raw: str | None) -> str | None:
    """A queue name filter (1..128 characters, as the jobs table allows)."""
    if raw is None or raw == "":
        return None
    if len(raw) > 128 or "\x00" in raw:
        abort(400, "queue name must be 1 to 128 characters")
    return raw


def like(value: str | None) -> str | None:
    """An ILIKE pattern matching `value` literally anywhere (operator's % and _ are not wildcards)."""
    if value is None:
        return None
    return "%" + value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def window(raw: str | None, default: str = "24h") -> tuple[str, timedelta | None]:
    """A time-window name and its length; 400 for an unknown one."""
    name = raw or default
    if name not in WINDOWS:
        abort(400, f"window must be one of {', '.join(WINDOWS)}")
    return name, WINDOWS[name]


def choice(raw: str | None, options: tuple[str, ...], default: str, what: str) -> str:
    """One of `options`; 400 for anything else."""
    value = raw or default
    if value not in options:
        abort(400, f"{what} must be one of {', '.join(options)}")
    return value


def timestamp(raw: str | None, what: str = "as_of") -> datetime | None:
    """A UTC timestamp given as microseconds since the epoch (hidden form fields)."""
    if raw is None or raw == "":
        return None
    if not raw.isdigit() or len(raw) > 19:
        abort(400, f"{what} must be microseconds since the epoch")
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=int(raw))


def micros(value: datetime) -> int:
    """A timestamp as microseconds since the epoch (the cursor and hidden-field format)."""
    delta = value - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds


def cursor(raw: str | None) -> tuple[int | None, datetime | None, int | None]:
    """A keyset cursor "[priority_]micros_id" -> (priority, time, id); all None when absent; 400 if bad."""
    if raw is None or raw == "":
        return None, None, None
    match = _CURSOR.match(raw)
    if not match:
        abort(400, "malformed page cursor")
    prio = int(match.group(1)) if match.group(1) is not None else None
    return prio, timestamp(match.group(2), "cursor"), int(match.group(3))


def make_cursor(when: datetime, last_id: int, priority: int | None = None) -> str:
    """The cursor that continues after a row."""
    head = f"{priority}_" if priority is not None else ""
    return f"{head}{micros(when)}_{last_id}"


def arg(name: str) -> str | None:
    """A query-string or form value."""
    return request.values.get(name)
