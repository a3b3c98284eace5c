"""Drain against the backlog: skiplock, PgQueuer, oban-py and the raw loop, one run per backlog size.

    python -m tests.benchmarks.backlog --url postgresql://postgres@127.0.0.1:55449/postgres \
        --sizes 10000,40000,100000 [--out tests/benchmarks/results/backlog]

Run it with Python 3.12 (oban 0.7.0 needs it) in a virtualenv holding skiplock, pgqueuer 1.6.0 with
asyncpg, and oban 0.7.0 (docs/benchmarks/peers.md says how), against a private PostgreSQL cluster:
every (size, system) gets a fresh database there. For each, the whole backlog of no-op jobs is
committed first, then 2 worker processes start, and the rows still to do are counted every 20 ms
from a separate connection; the rate is taken over the window where the backlog falls from 95% to 5%
(start-up and the last stragglers left out), by linear interpolation between samples. Each system
gets its best documented configuration: skiplock batch 50 (concurrency 50), PgQueuer batch 50
(continuous mode, asyncpg), oban a queue limit of 50 per process, the raw loop claim-50-then-delete
(tests/benchmarks/peers.py). At the half-way point of each PgQueuer drain, its claim statement is run
once under EXPLAIN (ANALYZE, BUFFERS) in a rolled-back transaction: the plan shows where its time goes.
Not collected by pytest (no test_ prefix).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

from skiplock.tools import bench
from tests.benchmarks.compare import _pgq_bulk, _pgq_install, as_url, peer_procs, stop

REPO = Path(__file__).resolve().parents[2]
PROCESSES = 2
BATCH = 50
SAMPLE_SECONDS = 0.02
SYSTEMS = ("skiplock", "pgqueuer", "oban", "rawloop")

REMAINING = {  # the rows still to do, in each system's own table
    "skiplock": "SELECT count(*) FROM jobs",
    "rawloop": "SELECT count(*) FROM jobs",
    "pgqueuer": "SELECT count(*) FROM pgqueuer",
    "oban": "SELECT count(*) FROM oban_jobs WHERE state IN ('available', 'executing')",
}
OBAN_FILL = ("INSERT INTO oban_jobs (args, queue, worker, state) "
             "SELECT jsonb_build_object('n', g), 'bench', %s, 'available' FROM generate_series(1, %s) g")


class Sampler(threading.Thread):
    """Counts the rows still to do until there are none; calls `halfway` once when half are done."""

    def __init__(self, url: str, query: str, total: int, halfway: Callable[[], None] | None = None) -> None:
        super().__init__(daemon=True)
        self.url, self.query, self.total, self.halfway = url, query, total, halfway
        self.samples: list[tuple[float, int]] = []
        self.stopped = threading.Event()

    def run(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self.stopped.is_set():
                row = conn.execute(self.query).fetchone()
                left = int(row[0]) if row else 0
                self.samples.append((time.monotonic(), left))
                if self.halfway is not None and left <= self.total // 2:
                    self.halfway()
                    self.halfway = None
                if left == 0:
                    return
                time.sleep(SAMPLE_SECONDS)

    def crossing(self, level: float) -> float:
        """When the count first fell to `level` rows, interpolated between the two samples around it."""
        before = self.samples[0]
        for sample in self.samples:
            if sample[1] <= level:
                if sample[1] == before[1]:
                    return sample[0]
                share = (before[1] - level) / (before[1] - sample[1])
                return before[0] + share * (sample[0] - before[0])
            before = sample
        raise RuntimeError(f"the backlog never fell to {level}")


def window_rate(sampler: Sampler, total: int) -> dict[str, Any]:
    """Jobs per second while the backlog fell from 95% to 5%, and the whole drain's seconds."""
    t95, t5 = sampler.crossing(total * 0.95), sampler.crossing(total * 0.05)
    return {"jobs": total, "jobs_per_s": round(total * 0.9 / (t5 - t95)), "window_s": round(t5 - t95, 3),
            "drain_s": round(sampler.samples[-1][0] - sampler.samples[0][0], 3), "samples": len(sampler.samples)}


@contextmanager
def sampling(url: str, system: str, total: int, halfway: Callable[[], None] | None = None) -> Iterator[Sampler]:
    sampler = Sampler(url, REMAINING[system], total, halfway)
    sampler.start()
    try:
        yield sampler
        sampler.join(timeout=max(120.0, total / 200))
        if sampler.is_alive():
            raise RuntimeError(f"{system} did not drain {total} jobs in time")
    finally:
        sampler.stopped.set()


def run_skiplock(url: str, total: int) -> dict[str, Any]:
    bench.seed_jobs(url, total)
    with sampling(url, "skiplock", total) as sampler, \
            bench.skiplock_workers(url, PROCESSES, concurrency=BATCH, batch_size=BATCH):
        sampler.join(timeout=max(120.0, total / 200))
    return window_rate(sampler, total)


def run_rawloop(url: str, total: int) -> dict[str, Any]:
    bench.seed_jobs(url, total)
    procs = [subprocess.Popen([sys.executable, "-m", "tests.benchmarks.peers", "rawloop", url, str(BATCH)], cwd=REPO,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE) for _ in range(PROCESSES)]
    try:
        for p in procs:
            assert p.stdout is not None
            p.stdout.readline()  # "ready": connected
        with sampling(url, "rawloop", total) as sampler:
            for p in procs:
                assert p.stdin is not None
                p.stdin.write(b"go\n")
                p.stdin.flush()
    finally:
        stop(procs)
    return window_rate(sampler, total)


def run_pgqueuer(url: str, total: int, plans: dict[str, Any]) -> dict[str, Any]:
    asyncio.run(_pgq_install(url))
    asyncio.run(_pgq_bulk(url, total))

    def explain() -> None:
        plans[str(total)] = asyncio.run(pgqueuer_plan(url))
    with sampling(url, "pgqueuer", total, halfway=explain) as sampler:
        procs = peer_procs("pgqueuer", url, PROCESSES, BATCH)
        try:
            sampler.join(timeout=max(120.0, total / 200))
        finally:
            stop(procs)
    return window_rate(sampler, total)


def run_oban(url: str, total: int) -> dict[str, Any]:
    from tests.benchmarks import oban_peer

    asyncio.run(oban_peer.install(as_url(url)))
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(OBAN_FILL, (oban_peer.WORKER, total))
    with sampling(url, "oban", total) as sampler:
        procs = [subprocess.Popen([sys.executable, "-m", "tests.benchmarks.oban_peer", as_url(url), str(BATCH)],
                                  cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                 for _ in range(PROCESSES)]
        try:
            sampler.join(timeout=max(120.0, total / 200))
        finally:
            stop(procs)
    return window_rate(sampler, total)


async def pgqueuer_plan(url: str) -> str:
    """PgQueuer's own claim statement (batch 50, its 'bench' entrypoint), under EXPLAIN ANALYZE, rolled back."""
    import uuid
    from datetime import timedelta

    import asyncpg
    from pgqueuer import AsyncpgDriver, Queries

    conn = await asyncpg.connect(as_url(url))
    try:
        queries = Queries(AsyncpgDriver(conn))
        query = queries.qbq.build_dequeue_query(
            batch_size=BATCH, entrypoints=["bench"], concurrency_limits=[0], queue_manager_id=uuid.uuid4(),
            global_concurrency_limit=None, heartbeat_timeout=timedelta(seconds=30))
        tx = conn.transaction()
        await tx.start()
        try:
            rows = await conn.fetch("EXPLAIN (ANALYZE, BUFFERS) " + query.sql, *query.args)
        finally:
            await tx.rollback()
        return "\n".join(r[0] for r in rows)
    finally:
        await conn.close()


def run_size(admin_url: str, total: int, order: list[str], plans: dict[str, Any]) -> dict[str, Any]:
    """One drain of `total` jobs per system, each on a fresh database."""
    results: dict[str, Any] = {}
    for system in order:
        with bench.scratch_database(admin_url, migrate=system in ("skiplock", "rawloop")) as url:
            load_before = os.getloadavg()[0]
            if system == "skiplock":
                result = run_skiplock(url, total)
            elif system == "rawloop":
                result = run_rawloop(url, total)
            elif system == "pgqueuer":
                result = run_pgqueuer(url, total, plans)
            else:
                result = run_oban(url, total)
            result["load_1m"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
        results[system] = result
        print(f"{total:>8} {system:<9} {result['jobs_per_s']:>7} jobs/s  load {result['load_1m']}", flush=True)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="a private server's admin URL (databases are made there)")
    parser.add_argument("--sizes", default="10000,40000,100000", help="comma-separated backlog sizes")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated systems")
    parser.add_argument("--out", default=str(REPO / "tests/benchmarks/results/backlog"), help="output folder")
    args = parser.parse_args(argv)
    systems = [s for s in args.systems.split(",") if s]
    plans: dict[str, Any] = {}
    report: dict[str, Any] = {"date": datetime.now(UTC).isoformat(timespec="seconds"), "cpus": os.cpu_count(),
                              "command": " ".join(["python -m tests.benchmarks.backlog", *(argv or sys.argv[1:])]),
                              "server": bench.server_facts(args.url), "sizes": {}}
    for index, size in enumerate(int(s) for s in args.sizes.split(",")):
        # the order rotates between sizes, so a drift of the shared machine does not always hit one system
        order = systems[index % len(systems):] + systems[:index % len(systems)]
        report["sizes"][str(size)] = run_size(args.url, size, order, plans)
    report["pgqueuer_plans"] = plans
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "backlog.json").write_text(json.dumps(report, indent=2) + "\n")
    for backlog, plan in plans.items():
        (out / f"pgqueuer_plan_{backlog}.txt").write_text(plan + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
