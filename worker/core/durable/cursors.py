"""job.save_cursor(): a run's cursors, held in memory until the worker writes them.

Saving a cursor is cheap enough to call per item: it replaces this process's latest value (a dict
assignment under a lock). The worker writes what changed, fenced on the run, from its heartbeat thread
about once a second (runtime/heartbeat.py), when the job parks (in skiplock_park's transaction), when
its run ends (before its outcome is written) and at a graceful shutdown (before the job is released).
So a SIGKILL loses about a second of saved cursors at most.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import psycopg

from skiplock.core.sql import queries

Q = queries("durable")

# (worker id, job id) -> (attempt, {cursor name: JSON text}): keyed by worker too, since a process may
# hold several workers (tests), and each writes only what its runs saved, fenced on itself.
_PENDING: dict[tuple[str, int], tuple[int, dict[str, str]]] = {}
_LOCK = threading.Lock()
# Runs whose job the worker released at a graceful stop: their handler threads cannot be stopped from
# outside, so their next save_cursor() stops them, instead of doing items the next run will redo.
_RELEASED: set[tuple[str, int]] = set()


class RunReleased(BaseException):
    """The worker released this run's job (a graceful stop wrote its cursors): the handler stops here.
    A BaseException, so a handler's `except Exception` lets it by."""


def release(worker_id: str, job_ids: Sequence[int]) -> None:
    """These runs' jobs are being released: their handlers' next save_cursor() raises RunReleased."""
    with _LOCK:
        _RELEASED.update((worker_id, job_id) for job_id in job_ids)


def save(worker_id: str, job_id: int, attempt: int, name: str, text: str) -> None:
    """Hold cursor `name` of this run as JSON `text` until the next write."""
    with _LOCK:
        if (worker_id, job_id) in _RELEASED:
            raise RunReleased(f"job {job_id} was released by its worker's graceful stop")
        entry = _PENDING.get((worker_id, job_id))
        if entry is None or entry[0] != attempt:
            entry = _PENDING[(worker_id, job_id)] = (attempt, {})
        entry[1][name] = text


def latest(worker_id: str, job_id: int, name: str) -> str | None:
    """This run's saved value of cursor `name` not yet written, or None."""
    with _LOCK:
        entry = _PENDING.get((worker_id, job_id))
        return entry[1].get(name) if entry is not None else None


def take_job(worker_id: str, job_id: int) -> dict[str, str]:
    """The cursors of one run not yet written (skiplock_park writes them); forgets them."""
    with _LOCK:
        entry = _PENDING.pop((worker_id, job_id), None)
    return entry[1] if entry is not None else {}


def pending(worker_id: str) -> bool:
    """Whether this worker's runs saved cursors since the last write."""
    with _LOCK:
        return any(key[0] == worker_id for key in _PENDING)


def pending_for(worker_id: str, job_id: int) -> bool:
    """Whether this run saved cursors since the last write."""
    return (worker_id, job_id) in _PENDING  # a dict lookup: atomic under the GIL


def _take(worker_id: str, job_ids: Sequence[int] | None) -> list[tuple[int, int, str, str]]:
    with _LOCK:
        keys = [k for k in _PENDING if k[0] == worker_id and (job_ids is None or k[1] in job_ids)]
        taken = [(k[1], _PENDING.pop(k)) for k in keys]
    return [(job_id, attempt, name, text) for job_id, (attempt, values) in taken for name, text in values.items()]


def flush(conn: psycopg.Connection, worker_id: str, job_ids: Sequence[int] | None = None) -> int:
    """Write this worker's saved cursors (of `job_ids`, or all), fenced on each run; how many rows were sent.
    A run that lost its job writes nothing: the newer run's cursors are not overwritten by a stale one."""
    rows = _take(worker_id, job_ids)
    if not rows:
        return 0
    conn.execute(Q.save_cursors, {"worker_id": worker_id, "ids": [r[0] for r in rows],
                                  "attempts": [r[1] for r in rows], "names": [r[2] for r in rows],
                                  "values": [r[3] for r in rows]})
    return len(rows)


def forget(worker_id: str, job_id: int) -> None:
    """Drop a run's unwritten cursors (its job is gone from this worker without them being needed)."""
    with _LOCK:
        _PENDING.pop((worker_id, job_id), None)
