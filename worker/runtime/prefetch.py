"""How many jobs a worker claims ahead of its free slots, and when it claims again.

A claim is a round trip plus a durable commit (a WAL flush): milliseconds. Claiming only for
slots that are already free leaves every slot idle for that long after each batch, which with
short handlers costs most of the throughput (seed 000's envelope assumes a slot never waits
for a claim). So the worker keeps a small buffer of claimed jobs waiting for a slot, sized so
that it does not run dry during one claim:

    expected finishes during a claim  E = slots x claim_seconds / handler_seconds
    buffer                            B = 2E + the claim threshold, at most one batch
    claim again when                  slots + B - held >= threshold

Long handlers make E tiny: then B is 0 and the threshold 1, so a worker never holds a job
another worker could start now, and a freed slot is refilled at once (a claim per job is cheap
next to a long job). Both averages are exponentially weighted, so the sizing follows the load.
A fixed `prefetch` (SKIPLOCK_PREFETCH) replaces B and keeps the static threshold.
"""

from __future__ import annotations

import math
import threading

SMOOTHING = 0.2  # weight of the newest sample in the moving averages
# Below this many expected finishes per claim, a buffer would hold jobs for little gain.
MIN_FINISHES_TO_PREFETCH = 0.5


class ClaimSizing:
    """Tracks claim and handler times; says how many jobs to hold and when to claim."""

    def __init__(self, slots: int, batch: int, fixed_prefetch: int | None = None) -> None:
        self.slots = slots
        self.batch = batch
        self.fixed_prefetch = fixed_prefetch
        # Claim again once this many places are open: a round trip per freed slot would spend
        # a commit per job under load. The adaptive rule lowers it for long handlers.
        self.static_threshold = max(1, min(batch, slots) // 2)
        self._claim_seconds: float | None = None
        self._handler_seconds: float | None = None
        self._lock = threading.Lock()

    def observe_claim(self, seconds: float) -> None:
        with self._lock:
            self._claim_seconds = _ewma(self._claim_seconds, seconds)

    def observe_handler(self, seconds: float) -> None:
        with self._lock:
            self._handler_seconds = _ewma(self._handler_seconds, seconds)

    def expected_finishes(self) -> float | None:
        """Jobs this worker's slots finish during one claim, or None before both are measured."""
        with self._lock:
            claim, handler = self._claim_seconds, self._handler_seconds
        if claim is None or handler is None:
            return None
        return self.slots * claim / max(handler, 1e-6)

    def handlers_shorter_than(self, seconds: float) -> bool:
        """True once handlers are measured and take less than `seconds` on average."""
        with self._lock:
            return self._handler_seconds is not None and self._handler_seconds < seconds

    def plan(self) -> tuple[int, int]:
        """(capacity, threshold): hold at most `capacity` claimed jobs; claim once that many are open."""
        if self.fixed_prefetch is not None:
            return self.slots + self.fixed_prefetch, self.static_threshold
        finishes = self.expected_finishes()
        if finishes is None:
            return self.slots, self.static_threshold  # nothing measured yet: no buffer
        if finishes < MIN_FINISHES_TO_PREFETCH:
            return self.slots, 1
        # as many as finish during a claim (the next claim brings at least those back), at most
        # half a batch: fewer, larger claims cost PostgreSQL less than many small ones
        threshold = max(1, min(self.batch // 2, math.ceil(finishes)))
        buffer = min(self.batch, math.ceil(2 * finishes) + threshold)
        return self.slots + buffer, threshold


def _ewma(previous: float | None, sample: float) -> float:
    return sample if previous is None else previous + SMOOTHING * (sample - previous)
