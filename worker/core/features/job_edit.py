"""Edit a queued (ready or scheduled) job: its queue, payload, priority and run_at.

The new values are checked by the producer's own validation (producer.build_spec, what `enqueue` runs), so
an edit can store nothing an enqueue would refuse. The edit is a compare-and-set on what the operator saw:
one transaction locks the row, checks that the job is still queued and that each field still has the value
the form showed, and only then writes it (state_changes.edit_queued). A worker's claim skips the locked row
(SKIP LOCKED), and a job it claimed first is no longer queued: either way the edit never races a run. The
job keeps its lock key, tenant, payload version, attempts and max_attempts. Every refusal raises
JobEditRefused with a sentence for the operator, and changes nothing. The caller writes the audit row with
`changes` in the same transaction.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row

from skiplock.core import state_changes
from skiplock.core.errors import EnqueueError, SkiplockError
from skiplock.core.features.payload_edit import diff
from skiplock.core.plumbing.config import load_settings
from skiplock.core.producer import JobSpec, build_spec
from skiplock.core.sql import queries
from skiplock.core.status import JobStatus

SQL = queries("jobs_edit")


class JobEditRefused(SkiplockError):
    """The edit was not made; the message says why, in the operator's words."""


class JobEditConflict(JobEditRefused):
    """The job is not the one the operator saw any more (gone, claimed, cancelled, or changed)."""


@dataclass(frozen=True)
class Fields:
    """A queued job's editable fields: as the form showed them (`digest` of the payload), or as asked for."""

    queue: str
    priority: int
    run_at: datetime | None  # None: now
    payload: Any = None
    digest: str = ""
    attempts: int = 0


def current(conn: psycopg.Connection, job_id: int) -> dict[str, Any] | None:
    """The job's editable fields now (status, queue, priority, run_at, attempts, payload, digest ...), or None."""
    return conn.cursor(row_factory=dict_row).execute(SQL.queued_as_seen, {"id": job_id}).fetchone()


def validate(job: dict[str, Any], wanted: Fields) -> JobSpec:
    """The new values through enqueue's checks (queue name, JSON payload and its size, priority, an aware
    run_at), keeping what the edit does not change; EnqueueError says what is wrong."""
    return build_spec(wanted.queue, wanted.payload, priority=wanted.priority, run_at=wanted.run_at,
                      max_attempts=job["max_attempts"], max_payload_bytes=load_settings().max_payload_bytes,
                      lock_key=job["lock_key"], tenant=job["tenant"], version=job["version"])


def preview(conn: psycopg.Connection, job_id: int, seen: Fields, wanted: Fields) -> list[dict[str, Any]]:
    """The changes the edit would make now (what its confirmation lists); JobEditRefused as edit_queued."""
    _, changes = _check(job_id, current(conn, job_id), seen, wanted)
    return changes


def edit_queued(conn: psycopg.Connection, job_id: int, seen: Fields, wanted: Fields) -> list[dict[str, Any]]:
    """Write `wanted` over the queued job if it still is what `seen` says; the changes (for the audit).
    Call inside the caller's transaction; JobEditRefused (nothing changed) otherwise."""
    job = conn.cursor(row_factory=dict_row).execute(SQL.lock_as_seen, {"id": job_id}).fetchone()
    spec, changes = _check(job_id, job, seen, wanted)
    if not state_changes.edit_queued(conn, job_id, spec.queue, spec.payload_json, spec.priority, spec.run_at):
        raise JobEditConflict(f"Job {job_id} could not be edited; nothing was changed.")  # not under the row lock
    return changes


def _check(job_id: int, job: dict[str, Any] | None, seen: Fields,
           wanted: Fields) -> tuple[JobSpec, list[dict[str, Any]]]:
    if job is None:
        raise JobEditConflict(f"Job {job_id} is gone (it ran, or was purged); nothing was changed.")
    if job["status"] != JobStatus.QUEUED:
        raise JobEditConflict(f"Job {job_id} is no longer queued: it is {job['status']} now (a worker claimed it, "
                              "or another operator changed it, since you opened it); nothing was changed.")
    shown = {"queue": seen.queue, "priority": seen.priority, "run_at": seen.run_at, "payload": seen.digest,
             "attempts": seen.attempts}
    stored = {"queue": job["queue"], "priority": job["priority"], "run_at": job["run_at"], "payload": job["digest"],
              "attempts": job["attempts"]}
    moved = [name for name in shown if shown[name] != stored[name]]
    if moved:
        raise JobEditConflict(f"Job {job_id} changed since you opened it (its {', '.join(moved)}); nothing was "
                              "changed. Your text is kept below: reload the job's page to see it as it is now.")
    try:
        spec = validate(job, wanted)
    except EnqueueError as exc:
        raise JobEditRefused(f"Not saved: {exc}.") from None
    changes = _changes(job, spec, wanted)
    if not changes:
        raise JobEditRefused(f"Nothing to save: job {job_id} already has these values.")
    return spec, changes


def _changes(job: dict[str, Any], spec: JobSpec, wanted: Fields) -> list[dict[str, Any]]:
    """What the edit changes: each field's old and new value, then the payload's own diff ($.path)."""
    out: list[dict[str, Any]] = []
    if spec.queue != job["queue"]:
        out.append({"path": "queue", "old": job["queue"], "new": spec.queue})
    if spec.priority != job["priority"]:
        out.append({"path": "priority", "old": job["priority"], "new": spec.priority})
    if spec.run_at is None or spec.run_at != job["run_at"]:
        out.append({"path": "run_at", "old": job["run_at"].isoformat(),
                    "new": spec.run_at.isoformat() if spec.run_at else "now"})
    if _canonical(wanted.payload) != _canonical(job["payload"]):  # not ==: Python has True == 1 and 1 == 1.0
        out.extend(diff(job["payload"], wanted.payload))
    return out


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)
