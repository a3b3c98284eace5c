"""skiplock.testing runs durable jobs in one call: sleeps fast-forwarded, signals sent by the test, a wait's
timeout expired on demand, and a crash simulated after step N (the resumed run skips the stored steps)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

import skiplock
from skiplock import JobContext, WaitTimeout, enqueue
from skiplock.core.registry import REGISTRY
from skiplock.core.task_decorator import task
from skiplock.testing import drain, run_durable
from tests.support.helpers import scalar


@pytest.fixture
def order_flow() -> Iterator[list[Any]]:
    seen: list[Any] = []

    def note(value: Any, result: Any = None) -> Any:
        seen.append(value)
        return value if result is None else result

    @task("td-order")
    def order(payload: dict[str, Any], job: JobContext) -> str:
        job.step("charge", note, "charge", "charged")
        job.sleep("cool-off", 3 * 86400)  # three days, fast-forwarded
        try:
            paid = job.wait_for(f"paid:{payload['id']}", timeout=86400)
        except WaitTimeout:
            seen.append("reminder")
            return "reminded"
        seen.append(("paid", paid))
        return "done"

    @task("td-steps")
    def steps(payload: dict[str, Any], job: JobContext) -> int:
        total = 0
        for i in range(4):
            total += job.step(f"s{i}", note, i)
        return total

    yield seen
    for queue in ("td-order", "td-steps"):
        REGISTRY._tasks.pop(queue, None)  # the registry is process-wide


def test_a_sleep_is_fast_forwarded_and_a_signal_sent_by_the_test_is_received(order_flow, conn) -> None:
    enqueue("td-order", {"id": 1})
    runs = run_durable("td-order", signals={"paid:1": {"amount": 5}})
    assert [r.status for r in runs] == ["parked", "succeeded"]  # parked on the sleep, then done
    assert runs[-1].result == "done"
    assert order_flow == ["charge", ("paid", {"amount": 5})]  # the charge ran once


def test_without_its_signal_a_job_stays_parked_until_the_test_sends_it(order_flow, conn) -> None:
    job_id = enqueue("td-order", {"id": 2})
    runs = run_durable("td-order")
    assert [r.status for r in runs] == ["parked", "parked"]  # the sleep, then the wait for paid:2
    assert scalar(conn, "SELECT key FROM job_waits WHERE job_id = %s", (job_id,)) == "paid:2"
    assert skiplock.signal("paid:2", "ok") == 1
    assert [r.status for r in drain("td-order")] == ["succeeded"]


def test_expire_waits_times_a_wait_out(order_flow, conn) -> None:
    enqueue("td-order", {"id": 3})
    runs = run_durable("td-order", expire_waits=True)
    assert runs[-1].status == "succeeded" and runs[-1].result == "reminded"
    assert order_flow == ["charge", "reminder"]


def test_a_crash_after_step_n_resumes_from_the_stored_steps(order_flow, conn: psycopg.Connection) -> None:
    enqueue("td-steps", {}, max_attempts=3)
    runs = run_durable("td-steps", crash_after_steps=2)
    assert [(r.status, r.attempt) for r in runs] == [("crashed", 1), ("succeeded", 2)]
    assert runs[-1].result == 0 + 1 + 2 + 3
    assert order_flow == [0, 1, 2, 3]  # steps 0 and 1 were stored before the crash: never run again
