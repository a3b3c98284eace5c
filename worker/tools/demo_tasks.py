"""Handlers for `skiplock dev`'s demo workload: a few queues, some retries, one dead letter."""

from __future__ import annotations

import random
import time
from typing import Any

from skiplock import PermanentFailure, enqueue_many, task
from skiplock.core.job_context import JobContext
from skiplock.services.recurring_defs import recurring


@task("emails")
def send_email(payload: dict[str, Any]) -> None:
    """Pretend to send an email."""
    time.sleep(random.uniform(0.01, 0.05))


@task("reports", lease=120)
def build_report(payload: dict[str, Any]) -> None:
    """A slower job, with a longer lease."""
    time.sleep(random.uniform(0.5, 2.0))


@task("webhooks")
def deliver_webhook(payload: dict[str, Any], job: JobContext) -> None:
    """Fails its first attempts when asked to, like a flaky remote endpoint."""
    if job.attempt <= payload.get("fail_times", 0):
        raise ConnectionError(f"POST {payload.get('url', '?')}: 503 Service Unavailable")
    if payload.get("permanent"):
        raise PermanentFailure(f"POST {payload.get('url', '?')}: 410 Gone, will not retry")


# Recurring definitions, so the console's schedules page has something to show in `skiplock dev`.
recurring("hourly-report", queue="reports", cron="0 * * * *", payload={"report": "hourly"})
recurring("digest-email", queue="emails", every="1m", payload={"to": "digest@example.com"})


def demo_jobs() -> list[dict[str, Any]]:
    """The demo workload: normal jobs, retrying jobs, and one that ends dead."""
    jobs: list[dict[str, Any]] = [{"queue": "emails", "payload": {"to": f"user{i}@example.com"}}
                                  for i in range(40)]
    jobs += [{"queue": "reports", "payload": {"report": name}} for name in ("daily", "weekly", "billing")]
    jobs += [{"queue": "webhooks", "payload": {"url": f"https://example.com/hook/{i}", "fail_times": 2},
              "max_attempts": 5} for i in range(5)]
    jobs.append({"queue": "webhooks", "payload": {"url": "https://example.com/gone", "permanent": True}})
    jobs.append({"queue": "emails", "payload": {"to": "later@example.com"}, "delay": 30})
    return jobs


def enqueue_demo(conn: Any = None) -> list[int]:
    """Enqueue the demo workload; return the new ids."""
    return enqueue_many(demo_jobs(), conn=conn)
