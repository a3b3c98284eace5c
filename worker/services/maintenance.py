"""The worker's APScheduler instance: it drives periodic services (reaper, recurring, pruner).

Each service exposes `run_once()`; the scheduler only calls it on a timer, so tests drive the
same code directly. Jobs never overlap themselves and missed runs coalesce into one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from apscheduler.schedulers.background import BackgroundScheduler

from skiplock.core.plumbing.db import is_connection_error

log = logging.getLogger("skiplock.maintenance")


def _guarded(name: str, func: Callable[[], Any]) -> Callable[[], None]:
    """Run one pass; a lost database is logged briefly (the next pass retries), bugs in full."""

    def run() -> None:
        try:
            func()
        except Exception as exc:
            if is_connection_error(exc):
                log.warning("%s pass skipped: database unavailable (%s)", name, str(exc).strip()[:200])
            else:
                log.exception("%s pass failed", name)

    return run


def build_scheduler() -> BackgroundScheduler:
    """A background scheduler with an in-memory job store (the database is the durable record)."""
    return BackgroundScheduler(
        job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
        timezone="UTC",
    )


def add_service(scheduler: BackgroundScheduler, name: str, run_once: Callable[[], Any],
                every_seconds: float) -> None:
    """Call `run_once` every `every_seconds`, never overlapping, starting right away."""
    from datetime import UTC, datetime

    scheduler.add_job(_guarded(name, run_once), "interval", seconds=every_seconds, id=name, name=name,
                      next_run_time=datetime.now(UTC), replace_existing=True)
