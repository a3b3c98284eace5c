"""Bad input to enqueue: each mistake raises one clear EnqueueError and writes nothing.

Every case counts the jobs rows afterwards, through the same database the producer writes to.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime, timedelta
from typing import Any

import pytest

from skiplock import enqueue, enqueue_many
from skiplock.core.errors import EnqueueError
from tests.conftest import REPO, worker_env
from tests.support.helpers import scalar

LIMIT = 1000


class NotJson:
    """An object json.dumps cannot encode."""


# case -> (enqueue's positional arguments, its keywords, the error it must raise)
BAD_CALLS: dict[str, tuple[tuple[Any, ...], dict[str, Any], str]] = {
    "object payload": (("t1", NotJson()), {}, "not JSON-serialisable"),
    "set payload": (("t1", {1, 2}), {}, "not JSON-serialisable"),
    "bytes payload": (("t1", b"raw"), {}, "not JSON-serialisable"),
    "nested object": (("t1", {"a": [1, {"b": NotJson()}]}), {}, "not JSON-serialisable"),
    "tuple key": (("t1", {(1, 2): 3}), {}, "not JSON-serialisable"),
    "NaN": (("t1", float("nan")), {}, "NaN"),
    "nested Infinity": (("t1", {"x": [float("inf")]}), {}, "JSON"),
    "NUL in payload": (("t1", {"s": "a\x00b"}), {}, "NUL"),
    "lone surrogate payload": (("t1", {"s": "\ud800"}), {}, "not valid Unicode"),
    "huge payload": (("t1", {"blob": "x" * (LIMIT + 1)}), {}, "SKIPLOCK_MAX_PAYLOAD_BYTES"),
    "empty queue": (("", {}), {}, "non-empty"),
    "blank queue": (("   ", {}), {}, "non-empty"),
    "None queue": ((None, {}), {}, "non-empty"),
    "overlong queue": (("q" * 129, {}), {}, "longer than 128"),
    "NUL queue": (("a\x00b", {}), {}, "NUL"),
    "surrogate queue": (("q\udc80", {}), {}, "not valid Unicode"),
    "naive run_at": (("t1", {}), {"run_at": datetime(2030, 1, 1)}, "timezone-aware"),
    "run_at not a datetime": (("t1", {}), {"run_at": "2030-01-01"}, "must be a datetime"),
    "negative delay": (("t1", {}), {"delay": -1}, "must not be negative"),
    "negative timedelta": (("t1", {}), {"delay": timedelta(seconds=-5)}, "must not be negative"),
    "NaN delay": (("t1", {}), {"delay": float("nan")}, "delay must be"),
    "string delay": (("t1", {}), {"delay": "10"}, "delay must be"),
    "both run_at and delay": (("t1", {}), {"delay": 1, "run_at": datetime.now().astimezone()}, "either"),
    "float priority": (("t1", {}), {"priority": 1.5}, "whole number"),
    "huge priority": (("t1", {}), {"priority": 2**31}, "32-bit"),
    "zero max_attempts": (("t1", {}), {"max_attempts": 0}, ">= 1"),
    "bool max_attempts": (("t1", {}), {"max_attempts": True}, "whole number"),
    "empty unique_key": (("t1", {}), {"unique_key": ""}, "unique_key"),
    "overlong unique_key": (("t1", {}), {"unique_key": "k" * 513}, "unique_key"),
}


@pytest.fixture
def small_limit(monkeypatch):
    monkeypatch.setenv("SKIPLOCK_MAX_PAYLOAD_BYTES", str(LIMIT))


def jobs_count(conn) -> int:
    return int(scalar(conn, "SELECT count(*) FROM jobs"))


@pytest.mark.parametrize("case", list(BAD_CALLS))
def test_bad_enqueue_raises_and_writes_nothing(case, conn, small_limit):
    args, kwargs, expected = BAD_CALLS[case]
    with pytest.raises(EnqueueError, match=expected):
        enqueue(*args, **kwargs)
    assert jobs_count(conn) == 0


@pytest.mark.parametrize("case", list(BAD_CALLS))
def test_one_bad_item_in_enqueue_many_writes_nothing(case, conn, small_limit):
    args, kwargs, expected = BAD_CALLS[case]
    bad = {"queue": args[0], "payload": args[1], **kwargs}
    with pytest.raises(EnqueueError, match=r"job #1: .*" + expected):
        enqueue_many([("t1", {"ok": 1}), bad, ("t1", {"ok": 2})])
    assert jobs_count(conn) == 0


def test_payload_exactly_at_the_limit_is_accepted(conn, small_limit):
    payload = "x" * (LIMIT - 2)  # the JSON text is the string plus its two quotes
    assert enqueue("t1", payload) is not None
    assert jobs_count(conn) == 1


def test_malformed_enqueue_many_items_raise_enqueue_error(conn):
    for items in ([("t1",)], [42], [{"queue": "t1", "payload": {}, "colour": "red"}]):
        with pytest.raises(EnqueueError, match="job #0"):
            enqueue_many(items)  # type: ignore[arg-type]
    assert jobs_count(conn) == 0


def test_enqueue_inside_a_rolled_back_transaction_writes_nothing(conn, db_url):
    import psycopg

    with psycopg.connect(db_url) as tx:
        enqueue("t1", {"a": 1}, conn=tx)
        with pytest.raises(EnqueueError):
            enqueue("t1", NotJson(), conn=tx)
        tx.rollback()
    assert jobs_count(conn) == 0


@pytest.mark.parametrize("payload", ["{not json", "", "[1, 2", "NaN"])
def test_cli_enqueue_rejects_non_json_with_one_line(payload, conn, db_url):
    proc = subprocess.run([sys.executable, "-m", "skiplock.tools.cli", "enqueue", "t1", payload], cwd=REPO,
                          env=worker_env(db_url), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(("skiplock: error: payload is not valid JSON", "skiplock: error: payload must be JSON"))
    assert jobs_count(conn) == 0
