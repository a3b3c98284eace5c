"""Pure parts: backoff policy, handler registry, error formatting."""

from __future__ import annotations

import doctest
import random

import pytest

from skiplock.core import backoff
from skiplock.core.backoff import backoff_seconds
from skiplock.core.errors import ConfigError, RetryAfter
from skiplock.core.registry import Registry, Task
from skiplock.core.task_decorator import task
from skiplock.runtime.runner import format_error


def test_backoff_docstring_examples():
    assert doctest.testmod(backoff).failed == 0


def test_backoff_grows_as_capped_power_of_two_with_bounded_jitter():
    rng = random.Random(7)
    for attempt in range(1, 30):
        expected = min(2.0 ** (attempt - 1), 3600.0)
        delay = backoff_seconds(attempt, rng=rng)
        assert expected <= delay <= expected * 1.25
    # jitter really spreads retries that fail together
    assert len({round(backoff_seconds(5, rng=rng), 6) for _ in range(20)}) > 10


def test_registry_rejects_two_handlers_for_one_queue_and_bad_signatures():
    registry = Registry()
    registry.add(Task("q", print, False))
    with pytest.raises(ConfigError, match="one handler per queue"):
        registry.add(Task("q", len, False))
    with pytest.raises(ConfigError, match="payload as its first argument"):
        task("zz-no-args")(lambda: None)
    with pytest.raises(ConfigError, match="unknown option"):
        task("zz-unknown", colour="red")(lambda payload: None)


def test_retry_after_rejects_negative():
    with pytest.raises(ValueError):
        RetryAfter(-1)


def test_long_tracebacks_keep_both_ends():
    def deep(n: int) -> None:
        if n == 0:
            raise ValueError("the root cause " + "x" * 20000)
        deep(n - 1)

    try:
        deep(50)
    except ValueError as exc:
        text = format_error(exc)
    assert len(text) < 9000 and text.startswith("Traceback") and "characters cut" in text
    assert text.rstrip().endswith("x")
