"""Capped counts, as the overview and a queue's page show them: exact up to a cap, "10,000+" above it."""

from __future__ import annotations

# Counts stop here and show as "10,000+": an exact count of a million-row queue would scan it.
COUNT_CAP = 10_000


def capped(n: int, cap: int | None = None) -> str:
    """A count for display: exact up to the cap, "10,000+" above it."""
    cap = COUNT_CAP if cap is None else cap
    return f"{cap:,}+" if n > cap else f"{n:,}"
