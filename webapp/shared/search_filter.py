"""The search page's filter: parsed from the query string, so a search is a shareable URL.

Each field is checked here and a bad one becomes a message for the form (never a 500). The payload
filter turns a path and a value into one JSON document for `payload @> %s` (jobs_payload_idx,
migration 030): `customer.id` and `42` become {"customer": {"id": 42}}; `items[].sku` and `"A-1"`
become {"items": [{"sku": "A-1"}]} (some element of the array has that sku).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from skiplock.core.status import JobStatus
from skiplock.webapp import filters

# The states a search may ask for: every job_status value (ready and scheduled are both 'queued').
STATES = tuple(s.value for s in JobStatus)
MAX_PATH = 200
MAX_DEPTH = 16
# A trigram index matches substrings of 3 characters or more; a shorter one would read every error.
MIN_ERROR_TEXT = 3
# One path segment: a key (any characters but the separators), optionally "[]" for "an element of this array".
_SEGMENT = re.compile(r"^([^.\[\]]+)(\[\])?$")


class SearchInputError(ValueError):
    """A filter the operator typed that cannot be searched for; the message says what to type instead."""


@dataclass(frozen=True)
class SearchFilter:
    """A search as typed: every field optional; `after` is the keyset cursor (the last id shown)."""

    id: int | None = None
    queue: str | None = None
    state: str | None = None
    path: str | None = None
    value: str | None = None
    unique_key: str | None = None
    lock_key: str | None = None
    tenant: str | None = None
    error: str | None = None
    signal_key: str | None = None  # jobs parked waiting for this signal key
    log: str | None = None  # text in the job's own log lines (worker/runtime/job_logs.py)
    after: int | None = None
    payload: dict[str, Any] | None = field(default=None, compare=False)

    def args(self) -> dict[str, Any]:
        """Query-string arguments that reproduce this search, without the cursor (empty ones left out)."""
        raw = {"id": self.id, "queue": self.queue, "state": self.state, "path": self.path, "value": self.value,
               "unique_key": self.unique_key, "lock_key": self.lock_key, "tenant": self.tenant, "error": self.error,
               "signal_key": self.signal_key, "log": self.log}
        return {k: v for k, v in raw.items() if v not in (None, "")}

    def is_empty(self) -> bool:
        return not self.args()


def read(values: Any) -> tuple[SearchFilter, list[str]]:
    """The filter from a request's values, and the messages for the fields that could not be used.

    A field with a problem is left out of the filter; the page shows the messages and no results,
    so a half-understood search never lists jobs it did not ask for."""
    problems: list[str] = []

    def take(name: str, check: Any, *args: Any) -> Any:
        try:
            return check(values.get(name), *args)
        except SearchInputError as exc:
            problems.append(str(exc))
            return None

    path, value = (values.get("path") or "").strip(), values.get("value") or ""
    flt = SearchFilter(
        id=take("id", _positive_id, "id"), queue=take("queue", _short, "queue", 128),
        state=take("state", _state), path=path or None, value=value.strip() or None,
        unique_key=take("unique_key", _short, "unique key", filters.MAX_TEXT),
        lock_key=take("lock_key", _short, "lock key", filters.MAX_TEXT),
        tenant=take("tenant", _short, "tenant", filters.MAX_TEXT),
        error=take("error", _error_text), signal_key=take("signal_key", _short, "signal key", filters.MAX_TEXT),
        log=take("log", _log_text), after=take("after", _positive_id, "page cursor"),
        payload=None)
    try:
        payload = payload_document(path, value)
    except SearchInputError as exc:
        problems.append(str(exc))
        payload = None
    return SearchFilter(**{**flt.__dict__, "payload": payload}), problems


def _positive_id(raw: str | None, what: str) -> int | None:
    if raw is None or raw.strip() == "":
        return None
    raw = raw.strip()
    # isdigit() alone accepts "²", which int() refuses
    if not (raw.isascii() and raw.isdigit()) or not 0 < int(raw) <= filters.MAX_ID:
        raise SearchInputError(f"{what} must be a positive whole number, got {raw[:40]!r}")
    return int(raw)


def _short(raw: str | None, what: str, limit: int) -> str | None:
    if raw is None or raw.strip() == "":
        return None
    if len(raw) > limit or "\x00" in raw:
        raise SearchInputError(f"{what} must be at most {limit} characters")
    return raw.strip()


def _state(raw: str | None) -> str | None:
    if raw is None or raw == "":
        return None
    if raw not in STATES:
        raise SearchInputError(f"state must be one of {', '.join(STATES)}, got {raw[:40]!r}")
    return raw


def _matched_text(raw: str | None, what: str, where: str) -> str | None:
    """Text matched anywhere in `where`: at least MIN_ERROR_TEXT characters, or it matches nearly everything."""
    text = _short(raw, what, filters.MAX_TEXT)
    if text is not None and len(text) < MIN_ERROR_TEXT:
        raise SearchInputError(f"{what} must be at least {MIN_ERROR_TEXT} characters (it is matched "
                               f"anywhere in {where})")
    return text


def _error_text(raw: str | None) -> str | None:
    return _matched_text(raw, "error text", "the error, and shorter text matches nearly every one")


def _log_text(raw: str | None) -> str | None:
    return _matched_text(raw, "log text", "the job's log lines")


def payload_document(path: str, raw_value: str) -> dict[str, Any] | None:
    """The JSON document `payload @>` is given for a path and a value; None when neither is given.

    The value is JSON when it parses as JSON (42 is a number, "42" a string, true, null, {"a": 1});
    any other text that does not look like JSON is taken as a string, so `alice@example.com` needs no
    quotes. Text that starts like JSON but is not ({"a": ) is refused rather than guessed at."""
    raw_value = raw_value.strip()
    if not path and not raw_value:
        return None
    if not path:
        raise SearchInputError("a payload value needs a JSON path too, e.g. path customer.id with value 42")
    if not raw_value:
        raise SearchInputError(f"the payload path {path[:60]!r} needs a value, e.g. 42, \"abc\", true or null")
    if len(path) > MAX_PATH or len(raw_value) > filters.MAX_TEXT:
        raise SearchInputError(f"the payload path and value must be at most {MAX_PATH} and "
                               f"{filters.MAX_TEXT} characters")
    value = _json_value(raw_value)
    document: Any = value
    for segment in reversed(_segments(path)):
        key, array = segment
        document = {key: [document] if array else document}
    return dict(document)


def _segments(path: str) -> list[tuple[str, bool]]:
    parts = path.split(".")
    if len(parts) > MAX_DEPTH:
        raise SearchInputError(f"the payload path may have at most {MAX_DEPTH} parts")
    segments = []
    for part in parts:
        match = _SEGMENT.match(part.strip())
        if not match or "\x00" in part:
            raise SearchInputError(
                f"bad payload path {path[:60]!r}: write keys separated by dots, e.g. customer.id, and "
                f"add [] for an array whose element must match, e.g. items[].sku")
        segments.append((match.group(1), match.group(2) is not None))
    return segments


def _refuse_constant(name: str) -> Any:
    raise SearchInputError(f"payload value {name} is not JSON (PostgreSQL's jsonb has no NaN or Infinity)")


def _json_value(raw: str) -> Any:
    try:
        value = json.loads(raw, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        if raw[0] in '{["' or raw[0].isdigit() or raw[0] == "-":
            raise SearchInputError(f"payload value {raw[:60]!r} is not valid JSON ({exc.msg} at character "
                                   f"{exc.pos + 1}); put a string in double quotes, e.g. \"abc\"") from None
        value = raw  # a bare word: the string itself
    # jsonb refuses the NUL character (\u0000) in any string
    if "\\u0000" in json.dumps(value):
        raise SearchInputError("payload value must not contain the NUL character")
    return value
