"""`@task(queue, batch_size=..., batch_wait=...)`: what is refused when the module is imported, and
BatchItemsFailed's own checks (the worker side is in tests/fault/test_batch_handlers.py)."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import pytest

from skiplock import BatchItemsFailed, ConfigError, task
from skiplock.core.plumbing.config import load_settings
from skiplock.core.registry import REGISTRY
from skiplock.runtime.lanes import BATCH, SYNC, build_lanes


@pytest.fixture
def queue() -> Iterator[str]:
    name = "batch-options-check"
    yield name
    REGISTRY._tasks.pop(name, None)  # the registry is process-wide


def test_a_batch_handler_registers_with_its_size_and_wait(queue):
    @task(queue, batch_size=500)
    def handle(payloads, jobs):  # pragma: no cover - never run here
        return None

    registered = REGISTRY.get(queue)
    assert registered is not None and registered.is_batch
    assert (registered.batch_size, registered.batch_wait) == (500, 1.0)  # batch_wait defaults to 1 s


@pytest.mark.parametrize(("options", "message"), [
    ({"batch_size": 0}, "batch_size must be a whole number >= 1, got 0"),
    ({"batch_size": 2.5}, "batch_size must be a whole number >= 1"),
    ({"batch_size": True}, "batch_size must be a whole number >= 1"),
    ({"batch_size": 10, "batch_wait": -1}, "batch_wait must be a number of seconds >= 0, got -1"),
    ({"batch_size": 10, "batch_wait": float("nan")}, "batch_wait must be a number of seconds >= 0"),
    ({"batch_size": 10, "batch_wait": "1s"}, "batch_wait must be a number of seconds >= 0"),
    ({"batch_wait": 1.0}, "batch_wait needs batch_size"),
])
def test_bad_batch_options_are_refused_and_nothing_registered(queue, options, message):
    with pytest.raises(ConfigError, match=message):
        task(queue, **options)
    assert REGISTRY.get(queue) is None


@pytest.mark.parametrize("shape", ["one", "three", "keyword_only"])
def test_a_batch_handler_of_the_wrong_signature_is_refused(queue, shape):
    handlers: dict[str, Any] = {
        "one": lambda payload: None,
        "three": lambda payloads, jobs, extra: None,
        "keyword_only": lambda *, payloads, jobs: None,
    }
    with pytest.raises(ConfigError, match=r"cannot be called as .*\(payloads, jobs\)"):
        task(queue, batch_size=10)(handlers[shape])
    assert REGISTRY.get(queue) is None


def test_a_wrapper_that_cannot_take_the_batch_is_refused(queue):
    def handle(payloads, jobs):  # pragma: no cover - never run here
        return None

    @functools.wraps(handle)
    def wrapper(payloads):  # pragma: no cover - never run here
        return handle(payloads, [])

    with pytest.raises(ConfigError, match="cannot be called as"):
        task(queue, batch_size=10)(wrapper)


@pytest.mark.parametrize(("failures", "message"), [
    ({}, "non-empty dict"),
    ([1, 2], "non-empty dict"),
    ({"7": ValueError()}, "the keys are job ids"),
    ({7: "bad"}, "maps to 'bad', not an exception"),
])
def test_batch_items_failed_checks_its_report(failures, message):
    with pytest.raises(TypeError, match=message):
        BatchItemsFailed(failures)


def test_batch_items_failed_names_its_jobs():
    error = BatchItemsFailed({9: ValueError("x"), 3: KeyError("y")})
    assert str(error) == "2 job(s) of the batch failed: 3, 9"
    assert set(error.failures) == {3, 9}


def test_each_batch_queue_has_a_lane_of_its_own(queue):
    @task(queue, batch_size=7, batch_wait=0)
    def handle(payloads, jobs):  # pragma: no cover - never run here
        return None

    @task(queue + "-one")
    def one(payload):  # pragma: no cover - never run here
        return None

    try:
        tasks = {q: REGISTRY.get(q) for q in (queue, queue + "-one")}
        lanes = build_lanes(load_settings({}), tasks, list(tasks), [30.0, 30.0])  # type: ignore[arg-type]
        assert [(lane.kind, lane.queues, lane.most_per_claim) for lane in lanes] == [
            (SYNC, [queue + "-one"], 50), (BATCH, [queue], 7)]
        # room for the running batch and two more; a claim once half a batch's room is free
        assert lanes[1].plan == (21, 3)
    finally:
        REGISTRY._tasks.pop(queue + "-one", None)
