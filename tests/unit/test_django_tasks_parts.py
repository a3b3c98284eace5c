"""The django.tasks backend's pure parts: the exception path read from a stored traceback, the OPTIONS
check and their templates, and the console's reading of a Django task's job. The backend end to end,
with a real worker and PostgreSQL, is tests/integration/test_django_tasks_matrix.py."""

from __future__ import annotations

import traceback
from datetime import UTC, datetime

import pytest

from skiplock.core.errors import ConfigError
from skiplock.django import payload
from skiplock.django.options import enqueue_options, extras_for, parse


class Declined(Exception):
    pass


def _formatted(exc: BaseException) -> str:
    try:
        raise exc
    except BaseException as caught:
        return "".join(traceback.format_exception(caught))


def test_the_exception_path_is_read_from_the_traceback_skiplock_stores() -> None:
    pytest.importorskip("django_tasks", reason="the backport (Django < 6) or django.tasks is needed")
    from skiplock.django.results import exception_class_path

    assert exception_class_path(_formatted(ValueError("no stock"))) == "builtins.ValueError"
    assert exception_class_path(_formatted(Declined("card: 4242"))) == f"{__name__}.Declined"
    chained = _formatted(RuntimeError("outer"))
    assert exception_class_path(chained) == "builtins.RuntimeError"
    assert exception_class_path("lease expired: the worker died") == "builtins.Exception"


def test_options_are_checked_and_templates_filled_from_the_call() -> None:
    options = parse({"max_attempts": 4, "tasks": {"shop.tasks.confirm": {"unique_key": "confirm-{order_id}",
                                                                          "lock_key": "{0}"}}})
    assert extras_for(options, "shop.tasks.confirm", [7], {"order_id": 12}) == {
        "max_attempts": 4, "unique_key": "confirm-12", "lock_key": "7"}
    assert extras_for(options, "shop.tasks.other", [], {}) == {"max_attempts": 4}
    with enqueue_options(depends_on=[3, 5], tenant="acme"):
        assert extras_for(options, "shop.tasks.other", [], {}) == {"max_attempts": 4, "depends_on": [3, 5],
                                                                    "tenant": "acme"}
    assert extras_for(options, "shop.tasks.other", [], {}) == {"max_attempts": 4}  # the block ended
    with pytest.raises(ConfigError, match="cannot be filled"):
        extras_for(options, "shop.tasks.confirm", [], {})
    with pytest.raises(ConfigError, match="unknown key 'max_attempt'"):
        parse({"tasks": {"shop.tasks.confirm": {"max_attempt": 3}}})
    with pytest.raises(ConfigError, match="unknown key 'QUEUE'"):
        parse({"QUEUE": "x"})
    with pytest.raises(ConfigError, match="max_attempts"):
        parse({"max_attempts": 0})


def test_the_console_names_a_django_tasks_job_and_no_other() -> None:
    job = {"payload": '{"args": [1], "task": "shop.tasks.confirm", "kwargs": {}, "backend": "default"}',
           "status": "dead", "attempts": 2, "created_at": None, "started_at": None, "finished_at": None,
           "attempt_errors": [{"error": "a"}, {"error": "b"}], "last_error": "b"}
    shown = payload.describe(job)
    assert shown is not None and (shown["name"], shown["status"], shown["errors"]) == ("shop.tasks.confirm",
                                                                                       "FAILED", 2)
    assert payload.describe({**job, "payload": '{"order_id": 1}'}) is None
    assert payload.describe({**job, "payload": '{"task": "x", "args": []}'}) is None
    stored = {"text": '{"task": "shop.tasks.confirm", "return_value": 3, "attempts": 1, '
                      '"started_at": "2026-01-02T03:04:05+00:00"}', "finished_at": None}
    gone = payload.describe_stored("succeeded", stored)
    assert gone is not None and gone["status"] == "SUCCESSFUL"
    assert gone["started_at"] == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert payload.describe_stored("succeeded", {"text": '{"total": 3}'}) is None
