"""Hostile values (hypothesis) for enqueue()'s parameters and the CLI's arguments: a clear error or a
correct job, never a driver error, a traceback or a half-written batch.

Huge, negative, NaN and infinite numbers, wrong types, NUL and other control characters, SQL and
HTML metacharacters, lone surrogates and very long strings in every parameter."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skiplock import EnqueueError, enqueue, enqueue_many
from skiplock.tools.cli import main as cli_main

HOSTILE_TEXT = st.sampled_from(["", " ", "\x00", "a\x00b", "'; DROP TABLE jobs; --", "<script>x</script>",
                                "\ud800", "x" * 100_000, "queue\nname", "%s %(x)s", "$1", "emails"])
TEXTS = st.one_of(HOSTILE_TEXT, st.text(max_size=300))
NUMBERS = st.one_of(st.integers(min_value=-(10**30), max_value=10**30), st.floats(allow_nan=True,
                    allow_infinity=True), st.just(True), st.sampled_from([2**31, -(2**31) - 1, 2**63]))
ANYTHING = st.one_of(TEXTS, NUMBERS, st.none(), st.lists(st.integers(), max_size=3), st.just(object()),
                     st.just(b"bytes"))
PAYLOADS = st.one_of(ANYTHING, st.dictionaries(TEXTS, ANYTHING, max_size=3),
                     st.just({"n": float("nan")}), st.just({"\x00": 1}), st.just({"k": "\x00"}))
ACCEPTED_ERRORS = (EnqueueError, TypeError, ValueError)


def _jobs(conn: Any) -> int:
    return int(conn.execute("SELECT count(*) FROM jobs").fetchone()[0])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(queue=TEXTS, payload=PAYLOADS, priority=st.one_of(st.just(0), NUMBERS, TEXTS),
       delay=st.one_of(st.none(), NUMBERS, TEXTS), unique_key=st.one_of(st.none(), TEXTS),
       max_attempts=st.one_of(st.none(), NUMBERS, TEXTS))
def test_enqueue_with_hostile_values_gives_a_job_or_a_clear_error(conn: Any, queue: Any, payload: Any,
                                                                  priority: Any, delay: Any, unique_key: Any,
                                                                  max_attempts: Any) -> None:
    before = _jobs(conn)
    try:
        job_id = enqueue(queue, payload, conn=conn, priority=priority, delay=delay, unique_key=unique_key,
                         max_attempts=max_attempts)
    except ACCEPTED_ERRORS as exc:
        assert str(exc), "an error must say what is wrong"
        assert _jobs(conn) == before  # nothing written
        return
    if job_id is not None:  # accepted: the row is exactly what was asked for
        row = conn.execute("SELECT queue, priority, max_attempts FROM jobs WHERE id = %s", (job_id,)).fetchone()
        assert row[0] == queue and row[1] == priority
        assert isinstance(max_attempts, int | type(None))
    conn.execute("DELETE FROM jobs")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(items=st.lists(st.one_of(st.tuples(TEXTS, PAYLOADS), st.dictionaries(TEXTS, ANYTHING, max_size=4),
                                ANYTHING), min_size=1, max_size=4))
def test_enqueue_many_with_hostile_items_writes_all_or_nothing(conn: Any, items: list[Any]) -> None:
    before = _jobs(conn)
    try:
        ids = enqueue_many(items, conn=conn)
    except ACCEPTED_ERRORS:
        assert _jobs(conn) == before
        return
    assert _jobs(conn) == before + len(ids)
    conn.execute("DELETE FROM jobs")


CLI_VALUES = st.one_of(st.sampled_from(["", "-1", "1e999", "nan", "0x10", "\x01", "'; DROP TABLE jobs; --",
                                        "{", "[]", "null", '{"a": NaN}', "9" * 40]), st.text(max_size=80))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(queue=CLI_VALUES, payload=CLI_VALUES, option=st.sampled_from(["--priority", "--delay", "--unique-key",
                                                                    "--max-attempts"]), value=CLI_VALUES)
def test_cli_enqueue_with_hostile_arguments_exits_cleanly(conn: Any, db_url: str, capsys: Any,
                                                          monkeypatch: pytest.MonkeyPatch, queue: str, payload: str,
                                                          option: str, value: str) -> None:
    monkeypatch.setenv("DATABASE_URL", db_url)
    if "\x00" in queue + payload + value:
        return  # a NUL cannot reach a real command line (argv strings end at it)
    before = _jobs(conn)
    try:
        code = cli_main(["enqueue", queue, payload, f"{option}={value}"])
    except SystemExit as exc:  # argparse refusing an argument: exit 2 with its usage line
        code = int(exc.code or 0)
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    if code == 0:
        assert _jobs(conn) == before + 1 or "already" in out.out
        conn.execute("DELETE FROM jobs")
    else:
        assert code == 2 and out.err.strip(), out.err
        assert _jobs(conn) == before


def test_nan_is_not_a_delay() -> None:
    """A spot check the properties rely on: NaN and infinity never reach make_interval()."""
    with pytest.raises(ACCEPTED_ERRORS):
        enqueue("t1", {}, delay=math.nan)
    with pytest.raises(ACCEPTED_ERRORS):
        enqueue("t1", {}, delay=math.inf)
