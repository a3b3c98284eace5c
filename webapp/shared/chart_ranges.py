"""The ranges of the console's charts over time (the overview's, a queue's failure rate) and their buckets."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

# Chart ranges: name -> (number of buckets, seconds per bucket). job_stats keeps 8 days by default
# (SKIPLOCK_STATS_RETENTION), so 7 d is the longest.
RANGES = {"1h": (60, 60), "24h": (96, 900), "7d": (84, 7200)}


def buckets_of(now: datetime, span: str) -> list[datetime]:
    """The start of every bucket of the range, oldest first, the last one holding `now`."""
    n, seconds = RANGES[span]
    epoch = now.timestamp()
    last = datetime.fromtimestamp(epoch - epoch % seconds, tz=now.tzinfo or UTC)
    return [last - timedelta(seconds=seconds * (n - 1 - i)) for i in range(n)]
