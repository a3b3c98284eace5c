"""Property-based tests (hypothesis): the backoff policy and payload round trips.

Payloads go through the real path: enqueue's JSON text, PostgreSQL's jsonb, and the claim that
hands the handler its payload (state_changes.claim returns exactly what the runner passes to the handler).

What jsonb normalises, and why the strategies are bounded:
- numbers are stored as `numeric`, so a float comes back as the decimal of its shortest repr;
  an integral float at or beyond 2**53 (e.g. 1e23) is printed without a fraction and read back
  as a Python int whose value differs from the float's binary value. Floats are therefore kept
  below 2**53 in magnitude; NaN and infinity are not JSON and enqueue rejects them.
- -0.0 comes back as 0.0 (numeric has no negative zero); equal under ==, so it stays in.
- object keys come back sorted and unique, which dict equality ignores; non-string keys are
  turned into strings by JSON itself, so the strategy uses string keys only.
- U+0000 cannot be stored in jsonb and lone surrogates are not UTF-8: enqueue rejects both
  (tests/integration/test_bad_input.py), so the text strategy leaves them out.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skiplock import enqueue
from skiplock.core import state_changes
from skiplock.core.backoff import JITTER_FRACTION, backoff_seconds
from tests.support.helpers import scalar, wait_for

# ---- backoff ----------------------------------------------------------------------------------


class Fixed:
    """A random source that always returns the same value."""

    def __init__(self, value: float) -> None:
        self.value = value

    def random(self) -> float:
        return self.value


attempts = st.integers(min_value=-5, max_value=10**9)
bases = st.floats(min_value=0.0, max_value=600.0)
caps = st.floats(min_value=0.0, max_value=86400.0 * 7)
unit = st.floats(min_value=0.0, max_value=1.0, exclude_max=True)


@given(attempt=attempts, base=bases, cap=caps, r=unit)
def test_backoff_is_capped_exponential_plus_bounded_jitter(attempt, base, cap, r):
    cap = max(cap, base)
    delay = backoff_seconds(attempt, base=base, cap=cap, rng=Fixed(r))
    floor = min(base * 2.0 ** min(max(attempt, 1) - 1, 62), cap)
    assert math.isfinite(delay)
    assert floor <= delay <= floor * (1 + JITTER_FRACTION)
    assert delay <= cap * (1 + JITTER_FRACTION)  # never beyond the cap plus its jitter


@given(attempt=st.integers(min_value=1, max_value=10**6), base=bases, cap=caps, r=unit)
def test_backoff_never_shrinks_as_attempts_grow(attempt, base, cap, r):
    cap = max(cap, base)
    rng = Fixed(r)
    assert backoff_seconds(attempt, base=base, cap=cap, rng=rng) <= backoff_seconds(
        attempt + 1, base=base, cap=cap, rng=rng)


@given(attempt=st.integers(min_value=1, max_value=64), r1=unit, r2=unit)
def test_backoff_jitter_only_moves_within_the_window(attempt, r1, r2):
    low, high = sorted((r1, r2))
    floor = backoff_seconds(attempt, rng=Fixed(0.0))
    assert floor <= backoff_seconds(attempt, rng=Fixed(low)) <= backoff_seconds(attempt, rng=Fixed(high))
    assert backoff_seconds(attempt, rng=Fixed(high)) <= floor * (1 + JITTER_FRACTION)


# ---- payload round trips ---------------------------------------------------------------------

text = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), max_size=40)
floats = st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: abs(x) < 2.0**53)
scalars = st.none() | st.booleans() | st.integers(min_value=-(10**30), max_value=10**30) | floats | text
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(text, children, max_size=5),
    max_leaves=30,
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(payload=json_values)
def test_payload_round_trips_through_enqueue_jsonb_and_claim(payload, conn):
    job_id = enqueue("t1", payload, conn=conn)
    claimed = state_changes.claim(conn, "property-test", ["t1"], [30.0], 10)
    try:
        assert [j.id for j in claimed] == [job_id]
        assert claimed[0].payload == payload
        assert type(claimed[0].payload) is type(payload)
    finally:
        conn.execute("DELETE FROM jobs")  # each example starts from an empty queue


TRICKY = [
    {"unicode": "zażółć gęślą jaźń — 日本語 — 🙂🚀 — \u200b\u2028\u2029 — ﷽"},
    {"nested": {"a": [1, [2, [3, [4, {"deep": [None, True, False]}]]]]}},
    {"numbers": [0, -0.0, 1.5, -2.25e-10, 2**53 - 1, -(10**30), 1e15, 0.1 + 0.2]},
    {"": "empty key", " ": "space key", "quote\"key": "back\\slash", "tab\tkey": "new\nline"},
    ["top-level list", {"k": []}, {}],
    "a bare string",
    12345678901234567890,
    None,
    {"html": "<script>alert('x')</script>", "sql": "'; DROP TABLE jobs; --"},
]


@pytest.mark.slow
def test_handlers_in_a_real_worker_receive_exactly_what_was_enqueued(conn, spawn_worker):
    ids = {enqueue("t1", p): p for p in TRICKY}
    worker = spawn_worker()
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs") == 0, timeout=60, message="every job done")
    assert worker.terminate() == 0
    got = dict(conn.execute("SELECT job_id, payload FROM test_effects").fetchall())
    assert got == ids
