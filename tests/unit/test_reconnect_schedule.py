"""A pool that lost its server tries again at least every RECONNECT_MAX_DELAY seconds, however long the outage."""

from __future__ import annotations

from skiplock.core.plumbing.db import RECONNECT_MAX_DELAY, CappedAttempt


def test_the_wait_between_attempts_never_grows_past_the_cap() -> None:
    attempt = CappedAttempt(timeout=3600)
    now, waits = 0.0, []
    for _ in range(12):  # psycopg_pool's own schedule would be at 1, 2, 4, ... 2048 s by now
        attempt.update_delay(now)
        waits.append(attempt.delay)
        now += attempt.delay
    assert max(waits) <= RECONNECT_MAX_DELAY
    assert waits[0] < RECONNECT_MAX_DELAY  # the first retry comes sooner still
    assert not attempt.time_to_give_up(now)  # and the pool still gives up after its reconnect_timeout


def test_the_hook_the_cap_relies_on_still_exists() -> None:
    """The cap enters through psycopg_pool's private _add_connection(attempt, growing): if a new psycopg_pool
    renames it, this fails instead of the cap silently disappearing."""
    import inspect

    from psycopg_pool import ConnectionPool

    assert list(inspect.signature(ConnectionPool._add_connection).parameters) == ["self", "attempt", "growing"]
