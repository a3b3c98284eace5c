"""Per-tenant limits and job weights, with real worker processes and racing claims.

Runs record themselves in flow_runs (tests/support/flow_handlers.py). A sampler thread reads the running
jobs of each tenant (their weights summed) in a tight loop, one statement per look, so each look is
one instant of the queue; the recorded starts and ends, swept, are a second witness.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from skiplock import EnqueueError, enqueue, enqueue_async, enqueue_many
from skiplock.core.errors import ConfigError
from skiplock.core.features import limits
from skiplock.core.producer_async import close_default_async_pool
from skiplock.tools.cli import main as cli
from tests.support.flow_handlers import FLOW_RUNS
from tests.support.helpers import race, scalar, wait_for

TASKS = "tests.support.flow_handlers"
RUNNING_BY_TENANT = """
SELECT tenant, sum(weight) FROM jobs WHERE queue = %(q)s AND status = 'running' AND tenant IS NOT NULL GROUP BY tenant
"""


class Sampler:
    """Polls the running weight of each tenant of `queue` until stopped; keeps each tenant's peak."""

    def __init__(self, db_url: str, queue: str) -> None:
        self.db_url, self.queue = db_url, queue
        self.peak: dict[str, int] = {}
        self.looks = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        with psycopg.connect(self.db_url, autocommit=True) as conn:
            while not self._stop.is_set():
                for tenant, weight in conn.execute(RUNNING_BY_TENANT, {"q": self.queue}).fetchall():
                    self.peak[tenant] = max(self.peak.get(tenant, 0), int(weight))
                self.looks += 1


def _peak_overlap_by_tenant(conn: psycopg.Connection, queue: str) -> dict[str, int]:
    """Each tenant's most weight in progress at one moment, from the recorded starts and ends."""
    events = conn.execute("""
        SELECT tenant, t, d FROM (
            SELECT tenant, started AS t, (payload->>'weight')::int AS d FROM flow_runs WHERE queue = %(q)s
            UNION ALL
            SELECT tenant, ended, -(payload->>'weight')::int FROM flow_runs WHERE queue = %(q)s AND ended IS NOT NULL) e
         ORDER BY t, d""", {"q": queue}).fetchall()
    running: dict[str, int] = {}
    peak: dict[str, int] = {}
    for tenant, _, delta in events:
        running[tenant] = running.get(tenant, 0) + delta
        peak[tenant] = max(peak.get(tenant, 0), running[tenant])
    return peak


def _job(queue: str, tenant: str, weight: int = 1, sleep: float = 0.0) -> dict[str, Any]:
    return {"queue": queue, "tenant": tenant, "weight": weight,
            "payload": {"tenant": tenant, "weight": weight, "sleep": sleep}}


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_per_tenant_cap_holds_across_four_workers_and_a_big_tenant_does_not_block_the_rest(
        db_url: str, conn: psycopg.Connection, spawn_worker: Callable[..., Any]) -> None:
    queue, cap = "flow_tenant_capped", 2
    conn.execute(FLOW_RUNS)
    assert cli(["queues", "limit", queue, "--per-tenant-concurrency", str(cap)]) == 0
    # 20 tenants; "big" holds 90% of the backlog, and every tenth of its jobs weighs 2 (runs alone)
    big = [_job(queue, "big", weight=2 if i % 10 == 0 else 1, sleep=0.01) for i in range(540)]
    small = [_job(queue, f"t{n:02d}", weight=2 if i == 0 else 1, sleep=0.01) for n in range(19) for i in range(3)]
    enqueue_many(big + small)
    total = len(big) + len(small)
    with Sampler(db_url, queue) as sampler:
        for _ in range(4):
            spawn_worker(SKIPLOCK_TASKS=TASKS, SKIPLOCK_QUEUES=queue, SKIPLOCK_CONCURRENCY="4")
        wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE queue = %s", (queue,)) == 0,
                 timeout=240, message=f"{total} capped jobs done")
    assert sampler.looks > 100
    # never over the cap, at any instant seen, and the weighted jobs counted as 2
    assert max(sampler.peak.values()) <= cap, sampler.peak
    assert sampler.peak["big"] == cap  # the sampler did see the big tenant at its cap
    assert max(_peak_overlap_by_tenant(conn, queue).values()) <= cap
    # the books: every job ran exactly once, on its first attempt
    assert scalar(conn, "SELECT count(*) FROM flow_runs WHERE queue = %s", (queue,)) == total
    assert scalar(conn, "SELECT count(DISTINCT job_id) FROM flow_runs WHERE queue = %s", (queue,)) == total
    assert scalar(conn, "SELECT max(attempt) FROM flow_runs WHERE queue = %s", (queue,)) == 1
    assert scalar(conn, "SELECT count(DISTINCT pid) FROM flow_runs WHERE queue = %s", (queue,)) >= 2
    # a tenant at its cap does not hold the others back: every small tenant's jobs had all started
    # before the big tenant's 100th run (it can run only 2 at a time; the others took the free slots)
    last_small = scalar(conn, "SELECT max(seq) FROM flow_runs WHERE queue = %s AND tenant <> 'big'", (queue,))
    big_100th = scalar(conn, "SELECT seq FROM flow_runs WHERE queue = %s AND tenant = 'big' ORDER BY seq "
                             "OFFSET 99 LIMIT 1", (queue,))
    assert last_small < big_100th, (last_small, big_100th)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_per_tenant_rate_holds_over_every_one_second_window(
        db_url: str, conn: psycopg.Connection, spawn_worker: Callable[..., Any]) -> None:
    queue = "flow_tenant_rate"
    conn.execute(FLOW_RUNS)
    assert cli(["queues", "limit", queue, "--per-tenant-rate", "10/s", "--per-tenant-burst", "2"]) == 0
    jobs = [_job(queue, tenant, weight=3 if i % 5 == 0 else 1) for tenant in ("a", "b", "c") for i in range(40)]
    enqueue_many(jobs)
    for _ in range(2):
        spawn_worker(SKIPLOCK_TASKS=TASKS, SKIPLOCK_QUEUES=queue, SKIPLOCK_CONCURRENCY="5")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE queue = %s", (queue,)) == 0,
             timeout=120, message="rate-capped jobs done")
    # per tenant, every window of one second that starts at a claim: the weight claimed inside it (a
    # job weighing 3 counts as 2, the queue's smallest limit: the bucket could never hold 3 tokens)
    worst = conn.execute("""
        SELECT a.tenant, max((SELECT sum(least((b.payload->>'weight')::int, 2)) FROM flow_runs b
                               WHERE b.tenant = a.tenant AND b.claimed_at >= a.claimed_at
                                 AND b.claimed_at < a.claimed_at + interval '1 second'))
          FROM flow_runs a WHERE a.queue = %s GROUP BY a.tenant""", (queue,)).fetchall()
    assert len(worst) == 3
    for tenant, weight in worst:
        assert weight <= 10 + 2, (tenant, weight)  # rate and burst
    assert scalar(conn, "SELECT count(DISTINCT job_id) FROM flow_runs WHERE queue = %s", (queue,)) == len(jobs)


def test_racing_claims_keep_each_tenant_under_its_cap_with_weights(
        db_url: str, conn: psycopg.Connection) -> None:
    """8 connections claim a tenant-capped queue as fast as they can and finish what they took, while a
    sampler looks at the running weight per tenant; the claims of the queue serialize on its
    queue_limits row, and each counts (after that lock) what the previous ones started."""
    from skiplock.core import state_changes
    from skiplock.core.status import OutcomeStatus

    queue = "race_tenants"
    limits.set_tenant_limit(conn, queue, concurrency=3, rate=None)
    limits.set_limit(conn, queue, concurrency=10, rate=None)
    jobs = ([_job(queue, "big", weight=1 + (i % 3 == 0)) for i in range(300)]
            + [_job(queue, f"s{n}", weight=1 + (i == 0)) for n in range(9) for i in range(10)])
    enqueue_many(jobs)
    claimed: list[list[int]] = [[] for _ in range(8)]
    over: list[tuple[str, int]] = []

    def claimer(index: int) -> None:
        deadline = time.monotonic() + 120
        with psycopg.connect(db_url, autocommit=True) as own:
            while time.monotonic() < deadline:
                got = state_changes.claim(own, f"racer-{index}", [queue], [60.0], 4, limited={queue})
                if not got and scalar(own, "SELECT count(*) FROM jobs WHERE status = 'queued'") == 0:
                    return
                running = own.execute(RUNNING_BY_TENANT, {"q": queue}).fetchall()
                over.extend((t, w) for t, w in running if w > 3)
                total = sum(w for _, w in running)
                if total > 10:
                    over.append(("queue", total))
                claimed[index].extend(j.id for j in got)
                state_changes.ack_batch(own, f"racer-{index}", [
                    state_changes.Outcome(j.id, j.queue, j.attempts, OutcomeStatus.OK) for j in got])

    with Sampler(db_url, queue) as sampler:
        race(8, claimer)
    assert over == []
    assert max(sampler.peak.values()) <= 3, sampler.peak
    every = [job_id for ids in claimed for job_id in ids]
    assert len(every) == len(set(every)) == len(jobs)
    assert scalar(conn, "SELECT count(*) FROM jobs") == 0


def test_a_job_heavier_than_the_cap_runs_alone(conn: psycopg.Connection) -> None:
    from skiplock.core import state_changes

    limits.set_tenant_limit(conn, "heavy", concurrency=2, rate=None)
    heavy = enqueue("heavy", {}, tenant="acme", weight=5)
    enqueue("heavy", {}, tenant="acme")
    other = enqueue("heavy", {}, tenant="other")
    got = state_changes.claim(conn, "w", ["heavy"], [60.0], 10, limited={"heavy"})
    assert sorted(j.id for j in got) == sorted([heavy, other])  # acme's heavy job alone, other beside it
    assert state_changes.claim(conn, "w", ["heavy"], [60.0], 10, limited={"heavy"}) == []
    assert limits.tenants_at_limit(conn, "heavy")[0].tenant == "acme"


def test_weight_counts_toward_the_queue_concurrency_limit(conn: psycopg.Connection) -> None:
    from skiplock.core import state_changes

    limits.set_limit(conn, "weighed", concurrency=5, rate=None)
    ids = [enqueue("weighed", {}, weight=2) for _ in range(4)]
    got = state_changes.claim(conn, "w", ["weighed"], [60.0], 10, limited={"weighed"})
    assert [j.id for j in got] == ids[:2]  # 2 + 2 of 5; a third would make 6
    [row] = limits.list_limits(conn)
    assert row.running == 4


def test_weight_is_stored_by_every_producer_path_and_checked(db_url: str, conn: psycopg.Connection) -> None:
    one = enqueue("w_paths", {}, weight=3)
    many = enqueue_many([{"queue": "w_paths", "payload": {}, "weight": 4}, ("w_paths", {})])
    big = enqueue_many([{"queue": "w_paths", "payload": {}, "weight": 2} for _ in range(300)])  # the COPY path
    keyed = enqueue("w_paths", {}, weight=6, unique_key="k", unique_for=60)
    linked = enqueue("w_paths", {}, weight=7, depends_on=[one])
    async def enqueue_then_close() -> int:
        try:
            return await enqueue_async("w_paths", {}, weight=8)
        finally:  # as every async test does: the loop's pool is closed before the loop ends
            await close_default_async_pool()

    in_async = asyncio.run(enqueue_then_close())
    conn.execute("INSERT INTO jobs (queue, payload, weight) VALUES ('w_paths', '{}', 9)")  # the SQL producer
    weights: dict[int | None, int] = dict(conn.execute("SELECT id, weight FROM jobs").fetchall())
    assert [weights[i] for i in (one, *many, big[0], keyed, linked, in_async)] == [3, 4, 1, 2, 6, 7, 8]
    assert 9 in weights.values()
    before = scalar(conn, "SELECT count(*) FROM jobs")
    bad: Any
    for bad in (0, -1, True, 2.5, "5"):
        with pytest.raises(EnqueueError, match="weight"):
            enqueue("w_paths", {}, weight=bad)
        with pytest.raises(EnqueueError, match="weight"):
            enqueue_many([{"queue": "w_paths", "payload": {}}, {"queue": "w_paths", "payload": {}, "weight": bad}])
    with pytest.raises(psycopg.errors.CheckViolation):
        conn.execute("INSERT INTO jobs (queue, payload, weight) VALUES ('w_paths', '{}', 0)")
    assert scalar(conn, "SELECT count(*) FROM jobs") == before


def test_per_tenant_limits_cli_sets_keeps_and_refuses_bad_input(
        db_url: str, conn: psycopg.Connection, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["queues", "limit", "imports", "--concurrency", "20", "--per-tenant-concurrency", "3",
                "--per-tenant-rate", "10/s"]) == 0
    assert ("imports: concurrency 20 (0 running), no rate limit; per tenant: concurrency 3, rate 10/s burst 1"
            in capsys.readouterr().out)
    # an option not given keeps its value: the global limit changes, the per-tenant ones stay
    assert cli(["queues", "limit", "imports", "--rate", "100/s"]) == 0
    [row] = limits.list_limits(conn)
    assert (row.concurrency, row.rate, row.tenant_concurrency, row.tenant_rate) == (20, 100.0, 3, 10.0)
    audits = scalar(conn, "SELECT count(*) FROM audit_log WHERE action = 'set queue limits'")
    for bad in (["--per-tenant-concurrency", "0"], ["--per-tenant-concurrency", "x"],
                ["--per-tenant-rate=-1/s"], ["--per-tenant-rate", "10/fortnight"],
                ["--concurrency", "5", "--per-tenant-rate", "nope"], ["--per-tenant-rate", "5/s",
                                                                       "--per-tenant-burst", "0"],
                ["--per-tenant-rate", "none", "--per-tenant-burst", "3"]):
        assert cli(["queues", "limit", "imports", *bad]) == 2, bad
        err = capsys.readouterr().err
        assert "per-tenant" in err or "rate" in err or "burst" in err, (bad, err)
    assert limits.list_limits(conn) == [row]  # nothing written
    assert scalar(conn, "SELECT count(*) FROM audit_log WHERE action = 'set queue limits'") == audits
    # the global limits removed: the per-tenant ones alone still limit the queue
    assert cli(["queues", "limit", "imports", "--concurrency", "none", "--rate", "none"]) == 0
    [row] = limits.list_limits(conn)
    assert (row.concurrency, row.rate, row.tenant_concurrency) == (None, None, 3)
    assert cli(["queues", "limit", "imports", "--per-tenant-concurrency", "none", "--per-tenant-rate", "none"]) == 0
    assert limits.list_limits(conn) == []


def test_python_api_refuses_bad_values_before_writing(conn: psycopg.Connection) -> None:
    kwargs: dict[str, Any]
    for kwargs in ({"concurrency": 0, "rate": None}, {"concurrency": None, "rate": "0/s"},
                   {"concurrency": 2, "rate": "5/s", "burst": 0.5}, {"concurrency": True, "rate": None},
                   {"concurrency": 2, "rate": None, "burst": 3}):
        with pytest.raises(ConfigError):
            limits.set_tenant_limit(conn, "api_q", **kwargs)
    assert limits.list_limits(conn) == []
    limits.set_tenant_limit(conn, "api_q", concurrency=2, rate="30/m")
    [row] = limits.list_limits(conn)
    assert (row.tenant_concurrency, row.tenant_rate, row.tenant_burst) == (2, 0.5, 1.0)
    assert limits.clear_limit(conn, "api_q") is True
    assert limits.list_limits(conn) == []
