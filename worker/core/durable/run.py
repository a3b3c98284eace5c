"""One run's durable state: the steps and cursors its job stored, read once, and the calls that add to them.

A JobContext makes a DurableRun on the handler's first durable call (job.step, job.cursor, job.sleep,
job.wait_for and their async forms). The model (docs/explanation/durable-jobs.md): a woken or retried job
runs its handler again from the top, and a step, sleep or wait that is stored returns what it stored.
Sync calls use the producer's pool; the async forms run the same calls on a thread, so the event loop is
never blocked by a database round trip.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import Any

import psycopg

from skiplock.core.durable import cursors
from skiplock.core.errors import JobOwnershipLost, Park, WaitTimeout
from skiplock.core.sql import queries

Q = queries("durable")
# Step names the library keeps for itself: a sleep's wake time, a wait's answer and its deadline.
RESERVED_PREFIXES = ("sleep:", "wait_for:", "timeout:")

Connect = Callable[[], AbstractContextManager[psycopg.Connection[Any]]]


def encode(value: Any, what: str) -> str:
    """A step's result or a cursor's value as JSON text, or a TypeError that says which one."""
    try:
        return json.dumps(value, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{what} must be JSON-serialisable: {exc}") from None


def _check_name(name: str, what: str) -> None:
    if not isinstance(name, str) or not name:
        raise ValueError(f"a {what}'s name must be a non-empty string, got {name!r}")


class DurableRun:
    """The stored steps and cursors of one run of a job, and the fenced writes that add to them."""

    def __init__(self, job_id: int, attempt: int, worker_id: str, connect: Connect) -> None:
        self.job_id = job_id
        self.attempt = attempt
        self.worker_id = worker_id
        self._connect = connect
        self._lock = threading.Lock()  # a handler may call steps from its own threads
        self._steps: dict[str, Any] | None = None  # name -> stored result (None until loaded)
        self._cursors: dict[str, Any] = {}
        self._db_now: datetime | None = None  # the database's clock when loaded ...
        self._loaded_at = 0.0  # ... and this process's monotonic clock then

    # ---- reading what is stored ----------------------------------------------------------------

    def load(self) -> dict[str, Any]:
        """The stored steps (read from the database on the first call of the run)."""
        with self._lock:
            if self._steps is not None:
                return self._steps
        with self._connect() as conn:
            rows = conn.execute(Q.load_state, {"job": self.job_id}).fetchall()
        steps: dict[str, Any] = {}
        found: dict[str, Any] = {}
        now: datetime | None = None
        for kind, name, value, at in rows:
            now = at
            if kind == "step":
                steps[name] = value
            elif kind == "cursor":
                found[name] = value
        with self._lock:
            if self._steps is None:
                self._steps, self._cursors = steps, found
                self._db_now, self._loaded_at = now, time.monotonic()
            return self._steps

    def database_now(self) -> datetime:
        """The database's clock now, as seen from its reading at load time."""
        self.load()
        assert self._db_now is not None
        return self._db_now + timedelta(seconds=time.monotonic() - self._loaded_at)

    # ---- steps -------------------------------------------------------------------------------

    def stored(self, name: str) -> tuple[bool, Any]:
        """(True, result) when step `name` is stored, else (False, None)."""
        steps = self.load()
        with self._lock:
            return (True, steps[name]) if name in steps else (False, None)

    def store(self, name: str, result: Any) -> Any:
        """Store a finished step's result, fenced, before the handler goes on; returns what a later run
        will see (the JSON round trip of `result`)."""
        text = encode(result, f"step {name!r}'s result")
        with self._connect() as conn:
            conn.execute(Q.save_step, {"job": self.job_id, "worker_id": self.worker_id, "attempt": self.attempt,
                                       "name": name, "result": text})
        # no row back: the run lost its job (its ack will be dropped too), or another run stored the step
        # first; either way this run goes on with its own result, as an at-least-once step may
        value = json.loads(text)
        with self._lock:
            assert self._steps is not None
            self._steps.setdefault(name, value)
        return value

    def step(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """job.step: the stored result of step `name`, or fn(*args, **kwargs) called, stored and returned."""
        _check_name(name, "step")
        if name.startswith(RESERVED_PREFIXES):
            raise ValueError(f"step names starting with {', '.join(RESERVED_PREFIXES)} are skiplock's own")
        done, result = self.stored(name)
        if done:
            return result
        result = fn(*args, **kwargs)
        if inspect.isawaitable(result):
            raise TypeError(f"step {name!r}: {fn!r} returned an awaitable: use `await job.step_async(...)`")
        return self.store(name, result)

    async def step_async(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """job.step_async: as step, for an `async def` fn (a plain function is called as is)."""
        _check_name(name, "step")
        if name.startswith(RESERVED_PREFIXES):
            raise ValueError(f"step names starting with {', '.join(RESERVED_PREFIXES)} are skiplock's own")
        if self._steps is None:
            await asyncio.to_thread(self.load)
        done, result = self.stored(name)
        if done:
            return result
        result = fn(*args, **kwargs)
        if inspect.isawaitable(result):
            result = await result
        return await asyncio.to_thread(self.store, name, result)

    # ---- cursors -----------------------------------------------------------------------------

    def cursor(self, name: str) -> Any:
        """The last value saved for cursor `name` (by this run, or stored by an earlier one), or None."""
        _check_name(name, "cursor")
        text = cursors.latest(self.worker_id, self.job_id, name)
        if text is not None:
            return json.loads(text)
        self.load()
        with self._lock:
            return self._cursors.get(name)

    def save_cursor(self, name: str, value: Any) -> None:
        """Hold cursor `name`'s new value in memory; the worker writes it (see core/durable/cursors.py)."""
        _check_name(name, "cursor")
        cursors.save(self.worker_id, self.job_id, self.attempt, name, encode(value, f"cursor {name!r}'s value"))

    # ---- sleeps and waits: parking -----------------------------------------------------------

    def sleep_outcome(self, name: str, *, seconds: float | None = None, until: datetime | None = None) -> str:
        """Sleep `name`'s database call: 'passed' (go on) or 'parked' (unwind). Stored times are
        compared with the database's clock, never this process's."""
        _check_name(name, "sleep")
        if seconds is not None and not seconds >= 0:  # also refuses NaN
            raise ValueError(f"job.sleep needs seconds >= 0, got {seconds!r}")
        if until is not None and until.tzinfo is None:
            raise ValueError("job.sleep_until needs an aware datetime (with a timezone)")
        done, stored = self.stored("sleep:" + name)
        if done and datetime.fromisoformat(stored) <= self.database_now():
            return "passed"
        return self._park(step="sleep:" + name, key=None, until=until, seconds=seconds)[0]

    def wait_outcome(self, key: str, timeout: float | None) -> tuple[str, Any]:
        """wait_for's database call: ('signal', payload), ('timeout', None) or ('parked', None)."""
        if not isinstance(key, str) or not key:
            raise ValueError(f"a signal key must be a non-empty string, got {key!r}")
        if timeout is not None and not timeout >= 0:
            raise ValueError(f"job.wait_for needs timeout >= 0 seconds or None, got {timeout!r}")
        done, stored = self.stored("wait_for:" + key)
        if done:
            return ("timeout", None) if stored.get("timeout") else ("signal", stored.get("payload"))
        outcome, value = self._park(step=None, key=key, until=None, seconds=timeout)
        if outcome in ("signal", "timeout"):
            with self._lock:
                assert self._steps is not None
                self._steps.setdefault("wait_for:" + key,
                                       {"timeout": True} if outcome == "timeout" else {"payload": value})
        return outcome, value

    def _park(self, *, step: str | None, key: str | None, until: datetime | None,
              seconds: float | None) -> tuple[str, Any]:
        """One call of skiplock_park, with this run's unwritten cursors."""
        saved = cursors.take_job(self.worker_id, self.job_id)
        with self._connect() as conn:
            row = conn.execute(Q.park, {"job": self.job_id, "worker_id": self.worker_id, "attempt": self.attempt,
                                        "step": step, "key": key, "until": until, "seconds": seconds,
                                        "cursor_names": list(saved), "cursor_values": list(saved.values())}
                               ).fetchone()
        assert row is not None
        outcome, value = row
        if outcome == "lost":
            raise JobOwnershipLost(f"job {self.job_id}: attempt {self.attempt} on worker {self.worker_id} no longer "
                                   "owns it (lease lost); it was not parked")
        return outcome, value


def unwind(outcome: str) -> None:
    """Raise Park when the database call parked the job: the handler must stop here."""
    if outcome == "parked":
        raise Park()


def answer(key: str, outcome: str, value: Any) -> Any:
    """What wait_for returns for an outcome that did not park: the payload, or WaitTimeout raised."""
    if outcome == "timeout":
        raise WaitTimeout(key)
    unwind(outcome)
    return value
