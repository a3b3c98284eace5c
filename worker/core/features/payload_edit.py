"""Edit a dead job's payload, then retry it ("edit before retry").

One transaction: lock the job, check it is still the dead job with the payload the operator saw
(compare-and-set on its status and on a digest of that payload), keep the original payload in
job_edits (migration 032), write the new one, and retry the job through state_changes.retry_finished, the
same statement as the plain Retry (so a dead workflow parent re-opens its dependents, and a
batch counts the job as pending again). The caller writes the audit row on the same connection,
inside the same transaction, so the edit and its audit entry commit together or not at all.

The new payload is checked as an enqueue checks one (JSON, no NUL, SKIPLOCK_MAX_PAYLOAD_BYTES),
and its shape must match the original's: a job that was enqueued with an object is retried with an
object, since its task reads fields from it. Every refusal raises PayloadEditRefused with a
sentence for the operator, and changes nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from skiplock.core import state_changes
from skiplock.core.errors import EnqueueError, SkiplockError
from skiplock.core.producer import serialize_payload
from skiplock.core.status import JobStatus

# The most changes an audit entry lists (a diff of two big payloads could be as big as they are;
# job_edits keeps both in full).
MAX_DIFF_ENTRIES = 50
# Each old and new value in the audit's diff is cut to this many characters of JSON.
DIFF_VALUE_CHARS = 200

# The job as the operator's form saw it. The digest is over PostgreSQL's own text of the jsonb (keys
# sorted and spaced one way), so it does not depend on how a page or a client printed the payload.
SEEN = """
SELECT status::text, payload, encode(sha256(convert_to(payload::text, 'UTF8')), 'hex'), attempts
  FROM jobs WHERE id = %(id)s
"""
LOCK = SEEN + " FOR UPDATE"
KEEP_ORIGINAL = """
INSERT INTO job_edits (job_id, actor, attempts, old_payload, new_payload)
VALUES (%(id)s, %(actor)s, %(attempts)s, %(old)s, %(new)s)
RETURNING id
"""
# A job's edits, oldest first (the job page's timeline and payload history).
EDITS_OF_JOB = """
SELECT id, at, actor, attempts, old_payload, new_payload FROM job_edits WHERE job_id = %(id)s ORDER BY id
"""


class PayloadEditRefused(SkiplockError):
    """The edit was not made; the message says why, in the operator's words."""


class PayloadEditConflict(PayloadEditRefused):
    """The job is not the one the operator saw any more (gone, no longer dead, payload changed)."""


@dataclass(frozen=True)
class Seen:
    """What the operator's form showed: the job's status, its payload and that payload's digest."""

    status: str
    payload: Any
    digest: str
    attempts: int


@dataclass(frozen=True)
class Edit:
    """A done edit: its job_edits row, the original and new payloads, and what changed between them."""

    edit_id: int
    job_id: int
    old: Any
    new: Any
    changes: list[dict[str, Any]]


def seen(conn: psycopg.Connection, job_id: int) -> Seen | None:
    """The job's status, payload and digest now (what the edit form carries), or None when it is gone."""
    row = conn.execute(SEEN, {"id": job_id}).fetchone()
    return None if row is None else Seen(str(row[0]), row[1], str(row[2]), int(row[3]))


def parse(text: str, original: Any, max_bytes: int) -> Any:
    """The operator's JSON text as a payload, or PayloadEditRefused saying what is wrong with it."""
    try:
        value = json.loads(text)
    except ValueError as exc:  # json.JSONDecodeError names the line and column
        raise PayloadEditRefused(f"The payload is not valid JSON: {exc}.") from None
    if isinstance(original, dict) and not isinstance(value, dict):
        raise PayloadEditRefused(f"The payload must be a JSON object ({{...}}), as the job's original was: its task "
                                 f"reads fields from it; this is a {_kind(value)}.")
    try:
        serialize_payload(value, max_bytes)  # the enqueue's own checks: NaN, NUL, the size limit
    except EnqueueError as exc:
        raise PayloadEditRefused(f"The payload cannot be stored: {exc}.") from None
    return value


def edit_and_retry(conn: psycopg.Connection, job_id: int, new_payload: Any, seen_digest: str,
                   actor: str) -> Edit:
    """Replace a dead job's payload with `new_payload` and retry it, if it is still the dead job whose
    payload had `seen_digest`; else PayloadEditRefused. Call inside the caller's transaction."""
    row = conn.execute(LOCK, {"id": job_id}).fetchone()
    if row is None:
        raise PayloadEditConflict(f"Job {job_id} is gone (purged, or deleted by the pruner); nothing was changed.")
    status, old, digest, attempts = str(row[0]), row[1], str(row[2]), int(row[3])
    if status != JobStatus.DEAD:
        raise PayloadEditConflict(f"Job {job_id} is no longer dead (it is {status} now: a worker or another operator "
                                 "changed it meanwhile); nothing was changed.")
    if digest != seen_digest:
        raise PayloadEditConflict(f"Job {job_id}'s payload changed since you opened it (another operator edited it); "
                                 "nothing was changed. Reload the page to edit the current payload.")
    if _canonical(new_payload) == _canonical(old):  # not ==: Python has True == 1 and 1 == 1.0
        raise PayloadEditRefused(f"The payload of job {job_id} is unchanged: use Retry to run it as it is.")
    edit_id = conn.execute(KEEP_ORIGINAL, {"id": job_id, "actor": actor, "attempts": attempts, "old": Jsonb(old),
                                           "new": Jsonb(new_payload)}).fetchone()[0]  # type: ignore[index]
    state_changes.write_dead_payload(conn, job_id, new_payload)
    if state_changes.retry_finished(conn, [job_id]) != [job_id]:  # cannot happen under the row lock taken above
        raise PayloadEditConflict(f"Job {job_id} could not be retried; nothing was changed.")
    return Edit(int(edit_id), job_id, old, new_payload, diff(old, new_payload))


def edits_of(conn: psycopg.Connection, job_id: int) -> list[dict[str, Any]]:
    """Every payload edit of a job, oldest first: id, at, actor, attempts, old_payload, new_payload."""
    cur = conn.execute(EDITS_OF_JOB, {"id": job_id})
    names = [c.name for c in cur.description or ()]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def prune(conn: psycopg.Connection, keep_seconds: float, batch: int) -> int:
    """Delete at most `batch` edits older than `keep_seconds` (the audit trail's retention); return how many."""
    cur = conn.execute("DELETE FROM job_edits WHERE id IN (SELECT id FROM job_edits WHERE at < now() - "
                       "make_interval(secs => %s) ORDER BY id LIMIT %s)", (keep_seconds, batch))
    return cur.rowcount


def diff(old: Any, new: Any, path: str = "$") -> list[dict[str, Any]]:
    """What changed from `old` to `new`, as JSON paths with their values before and after (at most
    MAX_DIFF_ENTRIES, each value's JSON cut to DIFF_VALUE_CHARS).

    >>> diff({"to": "a@x", "n": 1}, {"to": "b@x", "n": 1, "cc": True})
    [{'path': '$.cc', 'added': 'true'}, {'path': '$.to', 'old': '"a@x"', 'new': '"b@x"'}]
    """
    out: list[dict[str, Any]] = []
    _walk(old, new, path, out)
    return out[:MAX_DIFF_ENTRIES]


def _walk(old: Any, new: Any, path: str, out: list[dict[str, Any]]) -> None:
    if len(out) >= MAX_DIFF_ENTRIES:
        return
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            where = f"{path}.{key}" if key.isidentifier() else f"{path}[{json.dumps(key)}]"
            if key not in old:
                out.append({"path": where, "added": _short(new[key])})
            elif key not in new:
                out.append({"path": where, "removed": _short(old[key])})
            else:
                _walk(old[key], new[key], where, out)
        return
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            _walk(a, b, f"{path}[{i}]", out)
        return
    if old != new or type(old) is not type(new):
        out.append({"path": path, "old": _short(old), "new": _short(new)})


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= DIFF_VALUE_CHARS else text[:DIFF_VALUE_CHARS - 1] + "\u2026"


def _kind(value: Any) -> str:
    return {list: "list", str: "string", bool: "boolean", type(None): "null"}.get(type(value), "number")
