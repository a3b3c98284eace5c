"""OpenTelemetry spans (optional extra `skiplock[otel]`): one per enqueue, one per job run.

The enqueue span's context is stored with the job (jobs.trace_context, W3C `traceparent` text
as JSON, migration 012; NULL for jobs from SQL producers or without OpenTelemetry), and the run's
span carries a link to it, so a trace viewer goes from the request that enqueued to the run.

opentelemetry-api is imported lazily, once: without it, or without a tracer provider configured
(the SDK or a vendor's distro), every function here returns at once and the worker makes no extra
query. With one, the worker reads the stored contexts of each claimed
batch in one query; the run's span is made current while the handler runs, so the handler's own
spans are its children.
"""

from __future__ import annotations

import contextvars
import json
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg

from skiplock.core.status import FAILED_RUNS

TRACER_NAME = "skiplock"

# The traced enqueue statements are written out with the others in worker/core/sql/jobs_enqueue.sql.
TRACE_CONTEXTS = "SELECT id, trace_context FROM jobs WHERE id = ANY(%(ids)s) AND trace_context IS NOT NULL"

_otel: Any = None  # the opentelemetry.trace module, False when it is not installed
NO_PROVIDER_RECHECK = 1.0  # seconds between two asks while no real tracer provider is set
_provider_seen = False  # a real provider was found: final (see _active)
_no_provider_until = 0.0  # time.monotonic() before which "no provider" still holds
_stored: dict[int, dict[str, str]] = {}  # job id -> trace context read at claim, taken at run start
# The current run's (span, context token). A context variable, not a thread-local: each handler
# thread has its own context, and so does each asyncio task on the worker's event loop, where many
# async handlers run interleaved on one thread.
_runs: contextvars.ContextVar[tuple[Any, Any] | None] = contextvars.ContextVar("skiplock_run", default=None)


def _api() -> Any:
    global _otel
    if _otel is None:
        try:
            from opentelemetry import trace

            _otel = trace
        except ImportError:
            _otel = False
    return _otel


def _active() -> Any:
    """The trace module when a real tracer provider is configured; None otherwise.

    opentelemetry-api alone (installed by some other library, or our test extra) answers every
    call with a no-op provider: then spans would record nothing, so skip them and the extra query.
    Every run asks, so the answer is kept: a provider, once set, is final (OpenTelemetry refuses to
    replace it), and "none yet" is asked again after NO_PROVIDER_RECHECK seconds, so a provider the
    application sets after the worker started is used from then on. Asking OpenTelemetry reads
    os.environ each time, which cost more than the rest of a no-op job's hooks together.
    """
    global _provider_seen, _no_provider_until
    if _provider_seen:
        return _otel
    if time.monotonic() < _no_provider_until:
        return None
    trace = _api()
    if not trace or isinstance(trace.get_tracer_provider(), (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
        _no_provider_until = time.monotonic() + NO_PROVIDER_RECHECK
        return None
    _provider_seen = True
    return trace


def forget_provider() -> None:
    """Ask OpenTelemetry again at the next run (tests that set and reset a provider call this)."""
    global _provider_seen, _no_provider_until
    _provider_seen, _no_provider_until = False, 0.0


def enabled() -> bool:
    return _active() is not None


@contextmanager
def enqueue_span(queue: str) -> Iterator[str | None]:
    """A PRODUCER span around one enqueue; yields the trace context to store (None: nothing to store)."""
    trace = _active()
    if trace is None:
        yield None
        return
    from opentelemetry import propagate

    tracer = trace.get_tracer(TRACER_NAME)
    with tracer.start_as_current_span(f"enqueue {queue}", kind=trace.SpanKind.PRODUCER,
                                      attributes={"messaging.system": "skiplock",
                                                  "messaging.destination.name": queue}) as span:
        carrier: dict[str, str] = {}
        if span.is_recording():
            propagate.inject(carrier)
        yield json.dumps(carrier) if carrier else None


def remember_contexts(conn: psycopg.Connection, ids: Sequence[int]) -> None:
    """Read the stored trace contexts of a claimed batch (one query; none without OpenTelemetry)."""
    if not ids or _active() is None:
        return
    for job_id, context in conn.execute(TRACE_CONTEXTS, {"ids": list(ids)}).fetchall():
        if isinstance(context, dict):
            _stored[job_id] = context


def start_run(job_id: int, queue: str, attempt: int) -> None:
    """Start the CONSUMER span of a run in this thread or task, linked to the job's enqueue span."""
    trace = _active()
    if trace is None:
        return
    from opentelemetry import context as otel_context
    from opentelemetry import propagate

    links = []
    stored = _stored.pop(job_id, None)
    if stored:
        enqueued = trace.get_current_span(propagate.extract(stored)).get_span_context()
        if enqueued.is_valid:
            links.append(trace.Link(enqueued))
    span = trace.get_tracer(TRACER_NAME).start_span(
        f"run {queue}", kind=trace.SpanKind.CONSUMER, links=links,
        attributes={"messaging.system": "skiplock", "messaging.destination.name": queue,
                    "skiplock.job.id": job_id, "skiplock.job.attempt": attempt})
    _runs.set((span, otel_context.attach(trace.set_span_in_context(span))))


def end_run(status: str, error: str | None = None) -> None:
    """End this thread's run span with the outcome ('ok', 'queued', 'dead', 'failed', 'snoozed')."""
    current = _runs.get()
    if current is None:
        return
    _runs.set(None)
    from opentelemetry import context as otel_context

    span, token = current
    span.set_attribute("skiplock.job.outcome", status)
    if status in FAILED_RUNS:
        from opentelemetry.trace import Status, StatusCode

        span.set_status(Status(StatusCode.ERROR, (error or "").strip().splitlines()[-1][:200] if error else None))
    otel_context.detach(token)
    span.end()
