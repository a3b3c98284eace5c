"""The "New job" and "Edit job" forms' text, read into Python values for the producer's checks.

Only the reading of text happens here (JSON, a whole number, a time): whether a queue name, a payload, a
priority or a run_at can be enqueued is decided by the producer (core/producer.py build_spec, what `enqueue`
runs), so the console accepts exactly what the API does. A run_at without a zone is UTC, as the console
shows every time.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

# The form's default payload, and the widest the payload box grows (rows).
EMPTY_PAYLOAD = "{}"
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"  # how the form shows a run_at (UTC); what it reads is any ISO 8601 time


class JobFormError(ValueError):
    """A field's text is not a value of its kind; the message says what to type instead."""


@dataclass(frozen=True)
class JobForm:
    """What the form shows: the operator's own text for each field, and why it was refused (if it was)."""

    queue: str = ""
    payload: str = EMPTY_PAYLOAD
    run_at: str = ""
    priority: str = "0"
    error: str | None = None


def from_request(values: Any) -> JobForm:
    """The form as the operator typed it (nothing is parsed yet, so a refusal shows their own text)."""
    return JobForm(queue=values.get("queue", ""), payload=values.get("payload", EMPTY_PAYLOAD),
                   run_at=values.get("run_at", ""), priority=values.get("priority", "0"))


def shown_time(value: datetime | None) -> str:
    """A run_at as the form shows it: UTC, to the second."""
    return value.astimezone(UTC).strftime(TIME_FORMAT) if value else ""


def payload(text: str) -> Any:
    """The payload text as JSON."""
    try:
        return json.loads(text)
    except ValueError as exc:  # json.JSONDecodeError names the line and column
        raise JobFormError(f"The payload is not valid JSON: {exc}.") from None


def priority(text: str) -> int:
    """The priority text as a whole number (its range is the producer's to check)."""
    try:
        return int(text.strip() or "0")
    except ValueError:
        raise JobFormError(f"priority must be a whole number, e.g. 0 or 10, got {text[:40]!r}.") from None


def run_at(text: str) -> datetime | None:
    """The run_at text as an aware time (UTC unless the text gives a zone); None (now) when empty."""
    text = text.strip()
    if not text:
        return None
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise JobFormError(f"run_at must be a time like 2026-12-01 09:30 (UTC) or 2026-12-01T09:30:00+02:00, "
                           f"or empty for now; got {text[:40]!r}.") from None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def pretty(value: Any) -> str:
    """A payload as the form shows it: indented JSON, keys sorted."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def change_words(change: dict[str, Any]) -> str:
    """One change of an edit in words: `priority 0 → 5`, `$.to added "a@x"`."""
    if "added" in change:
        return f"{change['path']} added {change['added']}"
    if "removed" in change:
        return f"{change['path']} removed (was {change['removed']})"
    return f"{change['path']} {change['old']} \u2192 {change['new']}"
