"""The job's own log lines: what a handler writes through `logging` during a run, kept with its attempt.

`JobLogsHook.before` sets a ContextVar to the run's AttemptLog; `after` (or `given_back`) clears it.
A ContextVar is per thread for a sync handler's thread and per task for an async handler's task, so
the one `JobLogHandler` on the root logger routes each record to the run that emitted it, and drops
the records of any other thread (the worker's own, or a thread the handler started itself).

Bounded per attempt: MAX_LINES records and MAX_BYTES of text; past either, records are counted as
dropped ("N more lines dropped" on the job page). `LiveLogs` holds the attempts with lines not yet
written; the heartbeat writes them (so a killed run keeps what it logged until its last heartbeat)
and the acker writes them in the transaction of its ack (worker/core/features/job_logs.py).

A handler that logs nothing costs one ContextVar set and reset per run, and no database write. The
records are those the logging configuration lets through (SKIPLOCK_LOG_LEVEL on the root logger, or
a logger's own level); skiplock's own loggers are not part of a job's lines.
"""

from __future__ import annotations

import logging
import threading
from contextvars import ContextVar
from typing import Any

import psycopg

from skiplock.core.features import job_logs
from skiplock.core.state_changes import ClaimedJob, Outcome
from skiplock.runtime.run_hooks import RunHook

MAX_LINES = 500  # records kept per attempt
MAX_BYTES = 64 * 1024  # characters of formatted text kept per attempt
LINE_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class AttemptLog:
    """One run's lines so far (appended by its handler's thread or task, taken by the writers)."""

    __slots__ = ("attempt", "dropped", "job_id", "lines", "live", "size")

    def __init__(self, job_id: int, attempt: int, live: LiveLogs) -> None:
        self.job_id = job_id
        self.attempt = attempt
        self.live = live
        self.lines: list[str] = []
        self.size = 0
        self.dropped = 0

    def add(self, text: str) -> None:
        """One formatted record, or one more dropped past the bound."""
        with self.live.lock:
            if len(self.lines) >= MAX_LINES or self.size + len(text) > MAX_BYTES:
                self.dropped += 1
            else:
                self.lines.append(text)
                self.size += len(text) + 1
            self.live.pending[(self.job_id, self.attempt)] = self

    def snapshot(self) -> job_logs.AttemptLines:
        """What to write now (called under the LiveLogs lock)."""
        return job_logs.AttemptLines(self.job_id, self.attempt, "\n".join(self.lines), len(self.lines), self.dropped)


class LiveLogs:
    """One worker's attempts whose lines changed since they were last written."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pending: dict[tuple[int, int], AttemptLog] = {}

    def has_pending(self) -> bool:
        return bool(self.pending)  # a dict's truth is atomic; a line added just after is written next time

    def flush(self, conn: psycopg.Connection, worker_id: str) -> None:
        """Write every changed attempt's lines on `conn` (the caller's transaction). Nothing to write: no
        statement. When the write fails the attempts stay pending, for the next heartbeat or ack."""
        if not self.pending:
            return
        with self.lock:
            taken = dict(self.pending)
            self.pending.clear()
            rows = [log.snapshot() for log in taken.values()]
        try:
            job_logs.write(conn, worker_id, rows)
        except BaseException:
            with self.lock:
                for key, log in taken.items():
                    self.pending.setdefault(key, log)
            raise


_current: ContextVar[AttemptLog | None] = ContextVar("skiplock_job_log", default=None)


class JobLogHandler(logging.Handler):
    """On the root logger: a record emitted inside a run goes to that run's AttemptLog."""

    kept_on_reconfigure = True  # configure_logging (core/plumbing/logs.py) keeps it

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter(LINE_FORMAT))

    def handle(self, record: logging.LogRecord) -> bool:
        # handle, not emit: outside a run there is nothing to do, not even the handler's lock
        log = _current.get()
        if log is None or record.name.startswith("skiplock"):
            return False
        try:
            log.add(self.format(record))
        except Exception:
            self.handleError(record)
        return True

    def emit(self, record: logging.LogRecord) -> None:  # handle() does the work
        return None


_handler_lock = threading.Lock()


def install() -> None:
    """Put the one JobLogHandler on the root logger (once per process, however many workers)."""
    root = logging.getLogger()
    with _handler_lock:
        if not any(isinstance(h, JobLogHandler) for h in root.handlers):
            root.addHandler(JobLogHandler())


class JobLogsHook(RunHook):
    """Routes the run's log records to its AttemptLog, from `before` to `after`.

    Not for the jobs of `batch_queues`: a batch handler's lines belong to no one job of its batch
    (worker/runtime/batch_runner.py), and the handler runs outside its jobs' hooks anyway."""

    def __init__(self, live: LiveLogs, batch_queues: frozenset[str] = frozenset()) -> None:
        self.live = live
        self.batch_queues = batch_queues
        install()

    def before(self, job: ClaimedJob, payload: Any) -> Any:
        if job.queue not in self.batch_queues:
            _current.set(AttemptLog(job.id, job.attempts, self.live))
        return payload

    def keeps_run_in_context(self, queue: str) -> bool:
        return queue not in self.batch_queues

    def after(self, job: ClaimedJob, outcome: Outcome, seconds: float, exc: BaseException | None) -> Outcome:
        if job.queue not in self.batch_queues:
            _current.set(None)
        return outcome

    def given_back(self, job: ClaimedJob, reason: str) -> None:
        current = _current.get()
        if current is not None and current.job_id == job.id:
            _current.set(None)
