"""A running job's stack, on request: where each run's handler runs, and its stack taken when asked.

`StackHook.before` notes the run's thread (a sync handler's handler thread) or asyncio task (an async
handler's); `after` and `given_back` forget it. `RunningStacks.answer` (the heartbeat calls it, and
in between about once a second while jobs run) reads the open requests for those jobs
(worker/core/features/job_stacks.py) and writes each one's stack: `sys._current_frames()` for a
thread, and for a task the chain of coroutines it awaits (taken on the task's own loop). In the worker's own process:
no ptrace, no extra dependency, and the handler is not stopped or changed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import sys
import threading
import traceback
from typing import Any, NamedTuple

import psycopg

from skiplock.core.features import job_stacks
from skiplock.core.state_changes import ClaimedJob, Outcome
from skiplock.runtime.run_hooks import RunHook

# How long the heartbeat waits for an async handler's loop to take its task's stack.
TASK_STACK_WAIT = 1.0
# The deepest await chain followed (a bound against a cycle through a misbehaving awaitable).
MAX_AWAIT_DEPTH = 200


class Where(NamedTuple):
    """Where one run's handler runs."""

    attempt: int
    thread: int  # threading.get_ident() of the thread that runs it (an async task's: the loop's)
    task: asyncio.Task[Any] | None  # an async handler's task


class RunningStacks:
    """Where each run of this worker runs, for the stacks asked of them."""

    def __init__(self) -> None:
        self.where: dict[int, Where] = {}

    def running(self) -> bool:
        return bool(self.where)

    def answer(self, conn: psycopg.Connection, worker_id: str) -> int:
        """Take and write the stacks asked of this worker's runs; return how many were written."""
        where = self.where.copy()  # one C call: atomic under the GIL against the hooks' set and pop
        if not where:
            return 0
        written = 0
        for job_id in job_stacks.asked_of(conn, list(where)):
            place = where[job_id]
            job_stacks.capture(conn, worker_id, job_id, place.attempt, stack_of(place))
            written += 1
        return written


def stack_of(place: Where) -> str:
    """The formatted stack of a run, most recent call last."""
    if place.task is not None:
        return _task_stack(place.task)
    frame = sys._current_frames().get(place.thread)
    if frame is None:
        return "(the handler's thread has ended)"
    return "".join(traceback.format_stack(frame))


def _task_stack(task: asyncio.Task[Any]) -> str:
    """An async handler's stack, taken on its loop's thread (a coroutine's frames are that thread's)."""
    result: concurrent.futures.Future[str] = concurrent.futures.Future()

    def take() -> None:
        result.set_result(_await_chain(task))

    try:
        task.get_loop().call_soon_threadsafe(take)
        return result.result(timeout=TASK_STACK_WAIT)
    except (RuntimeError, concurrent.futures.TimeoutError):
        return "(the handler's event loop did not answer in time: it is blocked, or stopping)"


def _await_chain(task: asyncio.Task[Any]) -> str:
    """The frames of a suspended task, outermost first, down to what it awaits now.

    Task.get_stack() gives a suspended task's outermost frame only (a suspended coroutine's frame has no
    f_back): the coroutines it awaits hang off cr_await (gi_yieldfrom for a generator-based one)."""
    frames: list[tuple[Any, int]] = []
    awaited: Any = task.get_coro()
    while awaited is not None and len(frames) < MAX_AWAIT_DEPTH:
        frame = getattr(awaited, "cr_frame", None) or getattr(awaited, "gi_frame", None)
        if frame is None:
            break
        frames.append((frame, frame.f_lineno))
        awaited = getattr(awaited, "cr_await", None) or getattr(awaited, "gi_yieldfrom", None)
    if not frames:
        return "(the handler's task has no frame: it is ending)"
    return "".join(traceback.StackSummary.extract(iter(frames)).format())


class StackHook(RunHook):
    """Notes where each run's handler runs, from `before` until `after`."""

    def __init__(self, stacks: RunningStacks) -> None:
        self.stacks = stacks

    def before(self, job: ClaimedJob, payload: Any) -> Any:
        # inside an async handler's task there is a running loop; a sync handler's thread has none
        task = asyncio.current_task() if asyncio._get_running_loop() is not None else None
        # No lock on the run's path: one item set or popped on a dict of int keys is atomic under the
        # GIL, and so is answer()'s copy of the whole dict; a lock here was taken twice per job.
        self.stacks.where[job.id] = Where(job.attempts, threading.get_ident(), task)
        return payload

    def after(self, job: ClaimedJob, outcome: Outcome, seconds: float, exc: BaseException | None) -> Outcome:
        self.stacks.where.pop(job.id, None)
        return outcome

    def given_back(self, job: ClaimedJob, reason: str) -> None:
        self.stacks.where.pop(job.id, None)
