"""The worker's event loop for `async def` handlers: one loop, in its own thread, per process.

Claimed jobs of async queues are handed over in batches (one thread-safe call per batch) and
become asyncio tasks. A semaphore of SKIPLOCK_ASYNC_CONCURRENCY places bounds how many handlers
are awaited at once; prefetched jobs wait on it, and those can be taken back untouched when the
worker stops. Everything else (leases, heartbeats, acks, the release at shutdown) stays with the
Worker: this module only runs coroutines and cancels them.

The loop runs in its own thread so that neither side can stall the other: a sync handler that
blocks holds one pool thread, and a coroutine that blocks the loop (a user bug) stops only the
async handlers, never the claim loop, the heartbeat or the acker.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from skiplock.core.state_changes import ClaimedJob

log = logging.getLogger("skiplock.worker")
T = TypeVar("T")


class AsyncHandlerLoop:
    """Awaits `run_job(job)` for each submitted job, at most `limit` at once, on a private loop."""

    def __init__(self, limit: int, run_job: Callable[[ClaimedJob], Awaitable[None]]) -> None:
        self.limit = limit
        self._run_job = run_job
        self.loop = asyncio.new_event_loop()
        self._slots = asyncio.Semaphore(limit)  # bound to self.loop on first use
        self._waiting: dict[int, tuple[ClaimedJob, asyncio.Task[None]]] = {}  # no slot yet
        self._running: dict[int, asyncio.Task[None]] = {}  # handler being awaited
        # a daemon: a coroutine that blocks the loop must not hold the process open at exit
        self._thread = threading.Thread(target=self._serve, name="skiplock-async-loop", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, jobs: list[ClaimedJob]) -> None:
        """Schedule these jobs (from any thread); each starts once a slot is free."""
        self.loop.call_soon_threadsafe(self._spawn, jobs)

    def _spawn(self, jobs: list[ClaimedJob]) -> None:
        for job in jobs:
            self._waiting[job.id] = (job, self.loop.create_task(self._guarded(job)))

    async def _guarded(self, job: ClaimedJob) -> None:
        async with self._slots:
            self._waiting.pop(job.id, None)
            current = asyncio.current_task()
            assert current is not None
            self._running[job.id] = current
            try:
                await self._run_job(job)
            except Exception:  # a bug in our own bookkeeping: keep the loop, the lease will expire
                log.exception("job %d: internal error after its async handler ran", job.id)
            finally:
                self._running.pop(job.id, None)

    def take_waiting(self, timeout: float = 2.0) -> list[ClaimedJob]:
        """Cancel the jobs still waiting for a slot (none of their code ran) and return them."""

        async def take() -> list[ClaimedJob]:
            taken = list(self._waiting.values())
            self._waiting.clear()
            for _, pending in taken:
                pending.cancel()
            return [job for job, _ in taken]

        return self._call(take(), timeout, default=[])

    def cancel_job(self, job_id: int) -> None:
        """Cancel one running handler (an operator asked: worker/core/features/cancel.py); from any thread."""

        def cancel() -> None:
            task = self._running.get(job_id)
            if task is not None:
                task.cancel()

        self.loop.call_soon_threadsafe(cancel)

    def running_count(self) -> int:
        return len(self._running)

    def cancel_running(self, timeout: float) -> int:
        """Cancel every handler still awaited; wait up to `timeout` for them to end. Returns how many."""

        async def cancel() -> int:
            tasks = [*self._running.values(), *(t for _, t in self._waiting.values())]
            for pending in tasks:
                pending.cancel()
            if tasks:
                await asyncio.wait(tasks, timeout=timeout)
            return len(tasks)

        return self._call(cancel(), timeout + 1.0, default=0)

    def stop(self) -> None:
        """Stop the loop after its current step; the daemon thread then ends."""
        self.loop.call_soon_threadsafe(self.loop.stop)

    def _call(self, coro: Coroutine[Any, Any, T], timeout: float, default: T) -> T:
        """Run `coro` on the loop and wait for it; a blocked loop gives `default` after `timeout`."""
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            log.warning("the async handler loop did not answer within %.1fs (a coroutine blocks it?)", timeout)
            return default
