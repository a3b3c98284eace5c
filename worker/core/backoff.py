"""Retry backoff: a pure function of (attempt, random source)."""

from __future__ import annotations

import random as _random
from typing import Protocol


class RandomSource(Protocol):
    def random(self) -> float: ...


BASE_SECONDS = 1.0
CAP_SECONDS = 3600.0
JITTER_FRACTION = 0.25


def backoff_seconds(
    attempt: int,
    *,
    base: float = BASE_SECONDS,
    cap: float = CAP_SECONDS,
    rng: RandomSource = _random,
) -> float:
    """Delay before the retry that follows failed run number `attempt` (1-based).

    Capped exponential growth, base * 2^(attempt-1) up to `cap`, plus up to 25% random jitter
    so that jobs failing together do not retry together (seed 000's "synchronised storms").

    >>> class Fixed:
    ...     def __init__(self, x): self.x = x
    ...     def random(self): return self.x
    >>> [backoff_seconds(n, rng=Fixed(0.0)) for n in (1, 2, 3, 4)]
    [1.0, 2.0, 4.0, 8.0]
    >>> backoff_seconds(3, rng=Fixed(1.0))
    5.0
    >>> backoff_seconds(40, rng=Fixed(0.0))
    3600.0
    """
    exponent = max(attempt, 1) - 1
    # min() before the power keeps huge attempt counts from overflowing float math
    raw = base * (2.0 ** min(exponent, 62))
    delay = min(raw, cap)
    return delay * (1.0 + JITTER_FRACTION * rng.random())
