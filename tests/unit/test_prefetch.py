"""How many jobs a worker holds beyond its slots, and when it claims again (worker/runtime/prefetch.py)."""

from __future__ import annotations

from skiplock.runtime.prefetch import ClaimSizing


def measured(slots: int, batch: int, claim: float, handler: float, fixed: int | None = None) -> ClaimSizing:
    sizing = ClaimSizing(slots, batch, fixed)
    sizing.observe_claim(claim)
    sizing.observe_handler(handler)
    return sizing


def test_nothing_is_prefetched_before_anything_was_measured():
    assert ClaimSizing(16, 50).plan() == (16, 8)


def test_short_handlers_get_a_buffer_that_outlasts_a_claim():
    # 16 slots, 3.5 ms handlers, 3 ms claims: ~14 jobs finish during one claim
    capacity, threshold = measured(16, 50, claim=0.003, handler=0.0035).plan()
    buffer = capacity - 16
    assert threshold == 14
    # after waiting for `threshold` places, what is left must cover a claim's worth of finishes
    assert buffer - threshold >= 14
    assert buffer <= 50


def test_the_buffer_never_exceeds_one_batch():
    capacity, threshold = measured(50, 50, claim=0.003, handler=0.00001).plan()
    assert capacity == 100
    assert threshold == 25


def test_long_handlers_hold_nothing_extra_and_refill_each_slot_at_once():
    # a 2 s handler and a 3 ms claim: holding a job back would only delay it
    assert measured(10, 50, claim=0.003, handler=2.0).plan() == (10, 1)


def test_a_fixed_prefetch_replaces_the_adaptive_buffer():
    assert measured(16, 50, claim=0.003, handler=2.0, fixed=4).plan() == (20, 8)
    assert measured(16, 50, claim=0.003, handler=0.001, fixed=0).plan() == (16, 8)


def test_the_averages_follow_a_change_of_load():
    sizing = measured(10, 50, claim=0.003, handler=2.0)
    assert sizing.plan() == (10, 1)
    for _ in range(40):  # the handlers became fast
        sizing.observe_handler(0.002)
    capacity, _threshold = sizing.plan()
    assert capacity > 10
