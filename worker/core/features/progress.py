"""job.progress(): a running job's latest fraction and message, kept in memory until written.

A handler may report progress per item: `report` only replaces this process's latest value for the
job (a dict assignment under a lock). The worker's heartbeat thread writes what changed, at most
about once a second, in one fenced statement beside the lease extension (runtime/heartbeat.py),
so progress costs the database one row version per job per second at most, whatever the handler's rate.
"""

from __future__ import annotations

import math
import threading

_LATEST: dict[int, tuple[float, str | None]] = {}
_LOCK = threading.Lock()
MAX_MESSAGE_CHARS = 500


def report(job_id: int, fraction: float, message: str | None = None) -> None:
    """Record job `job_id`'s progress: `fraction` in [0, 1], and an optional short message."""
    if isinstance(fraction, bool) or not isinstance(fraction, int | float) or not math.isfinite(fraction):
        raise ValueError(f"progress must be a number between 0 and 1, got {fraction!r}")
    if not 0 <= fraction <= 1:
        raise ValueError(f"progress must be between 0 and 1, got {fraction}")
    if message is not None:
        message = str(message).replace("\x00", "")[:MAX_MESSAGE_CHARS]
    with _LOCK:
        _LATEST[job_id] = (float(fraction), message)


def take() -> dict[int, tuple[float, str | None]]:
    """What was reported since the last take (the heartbeat writes it); empties the board."""
    with _LOCK:
        if not _LATEST:
            return {}
        taken = dict(_LATEST)
        _LATEST.clear()
        return taken


def pending() -> bool:
    """Whether anything waits to be written."""
    return bool(_LATEST)
