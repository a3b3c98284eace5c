"""OpenTelemetry with the SDK's in-memory exporter: enqueue spans, run spans, and the link between
them carried by the job row, through a real Worker (in this process, so its spans are visible)."""

from __future__ import annotations

import threading

import pytest

pytest.importorskip("opentelemetry.sdk")  # in the `test` extra; guards a bare install

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from skiplock import PermanentFailure, enqueue
from skiplock.core.plumbing import tracing
from skiplock.core.plumbing.config import load_settings
from skiplock.core.registry import Registry, Task
from skiplock.runtime.runner import Worker
from tests.support.helpers import scalar, wait_for

_EXPORTER = InMemorySpanExporter()


@pytest.fixture
def spans():
    # the global provider can be set once per process: set it on first use, empty it per test
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        trace.set_tracer_provider(provider)
    tracing.forget_provider()  # an earlier test in this process may have found none a moment ago
    _EXPORTER.clear()
    return _EXPORTER


def test_run_spans_link_to_the_enqueue_spans(spans, conn, db_url, monkeypatch):
    def ok(payload):
        with trace.get_tracer("app").start_as_current_span("inside the handler"):
            pass

    def broken(payload):
        raise PermanentFailure("cannot")

    async def awaited(payload):  # an async handler: its run span lives in its own asyncio task
        with trace.get_tracer("app").start_as_current_span("inside the async handler"):
            pass

    registry = Registry()
    registry.add(Task("traced", ok, wants_job=False))
    registry.add(Task("traced_dead", broken, wants_job=False))
    registry.add(Task("traced_async", awaited, wants_job=False, is_async=True))
    with trace.get_tracer("app").start_as_current_span("POST /signup") as request:
        good = enqueue("traced", {"n": 1})
        bad = enqueue("traced_dead", {"n": 2})
        awaited_job = enqueue("traced_async", {"n": 3})
    # a job from a SQL producer has no trace context: its run span has no link
    sql_job = scalar(conn, "INSERT INTO jobs (queue, payload) VALUES ('traced', '{}') RETURNING id")
    assert scalar(conn, "SELECT trace_context ? 'traceparent' FROM jobs WHERE id = %s", (good,)) is True

    monkeypatch.setenv("SKIPLOCK_POLL_INTERVAL", "0.1")
    worker = Worker(load_settings(), registry=registry, queues=["traced", "traced_dead", "traced_async"])
    thread = threading.Thread(target=worker.run, kwargs={"install_signals": False}, daemon=True)
    thread.start()
    try:
        wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE status IN ('queued', 'running')") == 0,
                 timeout=60, message="the three jobs to finish")
    finally:
        worker.request_stop()
        thread.join(timeout=60)
    assert not thread.is_alive()

    finished = spans.get_finished_spans()
    enqueues = {s.attributes["messaging.destination.name"]: s for s in finished if s.name.startswith("enqueue ")}
    runs = {s.attributes["skiplock.job.id"]: s for s in finished if s.name.startswith("run ")}
    assert set(enqueues) == {"traced", "traced_dead", "traced_async"}
    assert set(runs) == {good, bad, sql_job, awaited_job}
    # the enqueue spans are children of the request that enqueued
    for span in enqueues.values():
        assert span.parent is not None and span.parent.span_id == request.get_span_context().span_id
        assert span.kind == trace.SpanKind.PRODUCER
    # each run links to its own enqueue span, and records queue, id, attempt and outcome
    for job_id, queue, outcome in ((good, "traced", "ok"), (bad, "traced_dead", "dead"),
                                   (awaited_job, "traced_async", "ok")):
        run = runs[job_id]
        assert run.kind == trace.SpanKind.CONSUMER
        assert [link.context.span_id for link in run.links] == [enqueues[queue].context.span_id]
        assert run.links[0].context.trace_id == request.get_span_context().trace_id
        assert dict(run.attributes) == {"messaging.system": "skiplock", "messaging.destination.name": queue,
                                        "skiplock.job.id": job_id, "skiplock.job.attempt": 1,
                                        "skiplock.job.outcome": outcome}
    assert runs[bad].status.status_code == trace.StatusCode.ERROR
    assert list(runs[sql_job].links) == []
    # the handler's own span is a child of its run span
    inner = [s for s in finished if s.name == "inside the handler"]
    assert {s.parent.span_id for s in inner if s.parent} == {runs[good].context.span_id,
                                                              runs[sql_job].context.span_id}
    inner_async = [s for s in finished if s.name == "inside the async handler"]
    assert [s.parent.span_id for s in inner_async if s.parent] == [runs[awaited_job].context.span_id]
