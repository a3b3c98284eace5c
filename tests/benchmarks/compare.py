"""Side-by-side benchmark: skiplock, PgQueuer, Procrastinate, Celery+Redis and the raw-SQL ceiling, one run.

    python -m tests.benchmarks.compare [--quick] [--reps 3] [--out tests/benchmarks/results]
    python -m tests.benchmarks.compare --only curve    (latency against load: tests/benchmarks/curve.py)
    python -m tests.benchmarks.compare --only bursts   (one batch at a time: tests/benchmarks/bursts.py)

Needs the `bench` extra (pgqueuer + asyncpg, procrastinate, celery[redis], matplotlib), pgbench and a
Redis on 127.0.0.1:6379 (tests/benchmarks/celery_peer.py says which database it flushes). Every
(workload, repetition, system) gets its own fresh database on DATABASE_URL's server (default
postgresql://postgres@127.0.0.1:5432/postgres); systems alternate within each repetition and the
order rotates between repetitions, so a drift of the shared machine hits all of them alike.
Writes results.md, results.json, throughput.png and steady.png to --out.
Not collected by pytest (no test_ prefix); tests/bench_smoke/test_bench_smoke.py covers `skiplock bench`.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psycopg

from skiplock.tools import bench
from skiplock.tools.bench import (
    ProbeReceiver,
    percentile,
    scratch_database,
    steady_payload,
    stop_processes,
    wait_empty,
    wait_for_steady_probes,
    wait_until,
)
from tests.benchmarks import flow as flow_bench
from tests.benchmarks import growth as growth_bench
from tests.benchmarks.peers import ASYNC_SLOTS, procrastinate_app

REPO = Path(__file__).resolve().parents[2]


# ---- sizes -----------------------------------------------------------------------------------

FULL = {"single": 2000, "bulk": 20_000, "drain": 20_000, "drain_slow": 500, "latency": 300,
        "recipe": 100_000, "steady_seconds": 60.0, "drain_async": 20_000, "producers_seconds": 5.0}
QUICK = {"single": 300, "bulk": 5000, "drain": 5000, "drain_slow": 300, "latency": 40,
         "recipe": 10_000, "steady_seconds": 8.0, "drain_async": 2000, "producers_seconds": 2.0}


# ---- peer helpers ----------------------------------------------------------------------------


def peer_procs(system: str, url: str, n: int, size: int, port: int = 0) -> list[subprocess.Popen[bytes]]:
    """Start `n` worker processes of a peer system."""
    cmd = [sys.executable, "-m", "tests.benchmarks.peers", system, as_url(url), str(size), str(port)]
    return [subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(n)]


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM, then SIGKILL whatever is still there after 15 s."""
    stop_processes(procs, grace=15.0)


def wait_backends(url: str, count: int, procs: list[subprocess.Popen[bytes]]) -> None:
    """Wait until `count` other sessions are connected to this database, then let them settle."""
    with psycopg.connect(url, autocommit=True) as conn:
        def ready() -> bool:
            if any(p.poll() is not None for p in procs):
                raise RuntimeError("a peer worker exited during start-up")
            row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                               "AND pid <> pg_backend_pid()").fetchone()
            return row is not None and row[0] >= count
        wait_until(ready, 30, "peer workers to connect")
    time.sleep(0.5)  # their first dequeue/LISTEN happens right after connecting


def peer_drain(peer: str, url: str, processes: int, batch: int, fill: Callable[[], object], jobs: int,
               table: str, timeout: float) -> dict[str, Any]:
    """Workload 3 for a peer: idle workers first, then `fill()` enqueues `jobs`; time until `table` is empty."""
    procs = peer_procs(peer, url, processes, batch)
    try:
        wait_backends(url, processes, procs)
        fill()
        committed = time.monotonic()
        done = wait_empty(url, timeout=timeout, table=table)
    finally:
        stop(procs)
    return _rate(jobs, done - committed)


def as_url(conninfo: str) -> str:
    """A libpq key=value string as a postgresql:// URL (asyncpg only reads URLs)."""
    from urllib.parse import quote

    d = psycopg.conninfo.conninfo_to_dict(conninfo)
    auth = quote(str(d.get("user", "postgres"))) + (f":{quote(str(d['password']))}" if d.get("password") else "")
    return f"postgresql://{auth}@{d.get('host', '127.0.0.1')}:{d.get('port', 5432)}/{quote(str(d['dbname']))}"


async def _pgq_queries(url: str) -> tuple[Any, Any]:
    import asyncpg
    from pgqueuer import AsyncpgDriver, Queries

    conn = await asyncpg.connect(as_url(url))
    return conn, Queries(AsyncpgDriver(conn))


async def _pgq_install(url: str) -> None:
    conn, q = await _pgq_queries(url)
    await q.install()
    await conn.close()


async def _pgq_single(url: str, jobs: int, producers: int) -> float:
    opened = [await _pgq_queries(url) for _ in range(producers)]

    async def produce(q: Any, n: int) -> None:
        for i in range(n):
            await q.enqueue("bench", json.dumps({"n": i}).encode())

    started = time.perf_counter()
    await asyncio.gather(*(produce(q, n) for (_c, q), n in zip(opened, bench._split(jobs, producers), strict=True)))
    elapsed = time.perf_counter() - started
    for c, _q in opened:
        await c.close()
    return elapsed


async def _pgq_bulk(url: str, jobs: int, payload: Callable[[int], bytes] | None = None) -> float:
    conn, q = await _pgq_queries(url)
    started = time.perf_counter()
    await q.enqueue(["bench"] * jobs, [(payload or (lambda i: json.dumps({"n": i}).encode()))(i)
                                       for i in range(jobs)], [0] * jobs)
    elapsed = time.perf_counter() - started
    await conn.close()
    return elapsed


async def _pgq_paced(url: str, jobs: int, gap: float) -> tuple[dict[int, float], dict[int, float]]:
    """(each enqueue's return, each enqueue's start): see bench.latency_summary."""
    conn, q = await _pgq_queries(url)
    committed, called = {}, {}
    for seq in range(jobs):
        called[seq] = time.time()
        await q.enqueue("bench", json.dumps({"p": seq, "t": 0}).encode())
        committed[seq] = time.time()
        await asyncio.sleep(gap)
    await conn.close()
    return committed, called


async def _proc_run(url: str, body: Callable[[Any], Any]) -> Any:
    app = procrastinate_app(url)
    async with app.open_async():
        return await body(app)


# ---- systems: each returns one repetition's figures for a workload, or None if not applicable -


class System:
    """One contender: name, a fresh-database set-up, and its way of running each workload."""

    name = ""
    migrate_skiplock = True  # raw systems reuse skiplock's table so the SQL is the same

    def setup(self, url: str) -> None:
        """Install this system's schema into a fresh database."""

    def run(self, workload: str, url: str, sizes: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any] | None:
        method = getattr(self, workload, None)
        return method(url, sizes, ctx) if method else None


class Skiplock(System):
    name = "skiplock"

    def enqueue_p1(self, url: str, s: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        return bench.enqueue_single(url, s["single"], 1)

    def enqueue_p4(self, url: str, s: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        return bench.enqueue_single(url, s["single"], 4)

    def enqueue_sqlalchemy(self, url: str, s: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        from tests.benchmarks.sqlalchemy_enqueue import skiplock_via_session

        return skiplock_via_session(url, s["single"])

    def bulk(self, url: str, s: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        return bench.enqueue_bulk(url, s["bulk"])

    def drain_w1(self, url: str, s: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        return bench.drain(url, s["drain"], 1)

    def drain_w2(self, url: str, s: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        return bench.drain(url, s["drain"], 2)

    def latency(self, url: str, s: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        return bench.pickup_latency(url, s["latency"])

    def recipe(self, url: str, s: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        return bench.recipe(url, s["recipe"])

    def steady(self, url: str, s: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        return bench.steady(url, ctx["rate"], s["steady_seconds"])

    def _producers(self, url: str, clients: int, seconds: float) -> dict[str, Any]:
        """Issue 19 part 1 (tests/benchmarks/producers.py): with nobody waiting, and with 2 workers keeping up."""
        from tests.benchmarks.producers import measure

        result: dict[str, Any] = {f"w{w}": measure(url, clients, seconds, workers=w) for w in (0, 2)}
        result["jobs_per_s"] = result["w2"]["enqueue"]
        return result

    def producers_16(self, url: str, s: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        return self._producers(url, 16, s["producers_seconds"])

    def producers_64(self, url: str, s: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        return self._producers(url, 64, s["producers_seconds"])

    def drain_async(self, url: str, s: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        """1 process, `async def` handlers awaiting 10 ms (tests/benchmarks/async_tasks.py), 200 at once."""
        jobs = s["drain_async"]
        with bench.skiplock_workers(url, 1, tasks="tests.benchmarks.async_tasks",
                                    async_concurrency=ASYNC_SLOTS, batch_size=50):
            committed = bench.seed_jobs(url, jobs)
            done = bench.wait_acked(url, jobs, timeout=max(60.0, jobs / 50))
        return _rate(jobs, done - committed)


class PgQueuer(System):
    migrate_skiplock = False

    def __init__(self, batch: int, with_enqueue: bool) -> None:
        self.batch = batch
        self.with_enqueue = with_enqueue  # enqueue does not depend on the batch: measure it once
        self.name = f"pgqueuer-b{batch}"

    def setup(self, url: str) -> None:
        asyncio.run(_pgq_install(url))

    def enqueue_p1(self, url: str, s: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any] | None:
        return _rate(s["single"], asyncio.run(_pgq_single(url, s["single"], 1))) if self.with_enqueue else None

    def enqueue_p4(self, url: str, s: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any] | None:
        return _rate(s["single"], asyncio.run(_pgq_single(url, s["single"], 4))) if self.with_enqueue else None

    def bulk(self, url: str, s: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any] | None:
        return _rate(s["bulk"], asyncio.run(_pgq_bulk(url, s["bulk"]))) if self.with_enqueue else None

    def _drain(self, url: str, jobs: int, processes: int) -> dict[str, Any]:
        return peer_drain("pgqueuer", url, processes, self.batch, lambda: asyncio.run(_pgq_bulk(url, jobs)),
                          jobs, "pgqueuer", timeout=max(60.0, jobs / 100))

    def drain_w1(self, url: str, s: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        return self._drain(url, s["drain"], 1)

    def drain_w2(self, url: str, s: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        return self._drain(url, s["drain"], 2)

    def drain_async(self, url: str, s: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        jobs = s["drain_async"]
        return peer_drain("pgqueuer-sleep", url, 1, self.batch, lambda: asyncio.run(_pgq_bulk(url, jobs)),
                          jobs, "pgqueuer", timeout=max(60.0, jobs / 50))

    def latency(self, url: str, s: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        probe = ProbeReceiver()
        procs = peer_procs("pgqueuer", url, 1, self.batch, probe.port)
        try:
            wait_backends(url, 1, procs)
            committed, called = asyncio.run(_pgq_paced(url, s["latency"], 0.05))
            wait_until(lambda: len(probe.samples) >= len(committed), 10, "every probe")
        finally:
            stop(procs)
            probe.close()
        return _latency(committed, probe.samples, called)

    def steady(self, url: str, s: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any] | None:
        if self.batch != 50:
            return None
        probe = ProbeReceiver()
        procs = peer_procs("pgqueuer", url, 2, self.batch, probe.port)
        try:
            wait_backends(url, 2, procs)
            result = asyncio.run(_pgq_steady(url, ctx["rate"], s["steady_seconds"], probe))
        finally:
            stop(procs)
            probe.close()
        return result


async def _pgq_steady(url: str, rate: float, seconds: float, probe: ProbeReceiver) -> dict[str, Any]:
    conn, q = await _pgq_queries(url)
    mon, _ = await _pgq_queries(url)
    depth: list[tuple[float, int]] = []
    sent = 0
    start = time.monotonic()
    next_sample = start
    while (now := time.monotonic()) - start < seconds:
        due = int(rate * (now - start)) - sent
        if due > 0:
            stamp = time.time()
            await q.enqueue(["bench"] * due, [json.dumps(steady_payload(sent + i, stamp)).encode() for i in range(due)],
                            [0] * due)
            sent += due
        if now >= next_sample:
            count = await mon.fetchval("SELECT count(*) FROM pgqueuer WHERE status = 'queued'")
            depth.append((round(now - start, 2), int(count)))
            next_sample += 0.5
        await asyncio.sleep(max(0.0, 0.02 - (time.monotonic() - now)))
    await conn.close()
    await mon.close()
    missing = wait_for_steady_probes(probe, sent, max(30.0, seconds))
    lat = [(st - enq) * 1000 for enq, st in probe.samples.values()]
    return {"rate": rate, "seconds": seconds, "sent": sent, "received": len(lat), "missing": missing,
            "p50_ms": percentile(lat, 50), "p99_ms": percentile(lat, 99), "depth": depth}


class Procrastinate(System):
    name = "procrastinate"
    migrate_skiplock = False

    def setup(self, url: str) -> None:
        async def apply(app: Any) -> None:
            await app.schema_manager.apply_schema_async()
        asyncio.run(_proc_run(url, apply))

    def _single(self, url: str, jobs: int, producers: int) -> dict[str, Any]:
        async def body(app: Any) -> float:
            task = app.tasks["bench"]

            async def produce(n: int) -> None:
                for i in range(n):
                    await task.defer_async(n=i)
            started = time.perf_counter()
            await asyncio.gather(*(produce(n) for n in bench._split(jobs, producers)))
            return time.perf_counter() - started
        return _rate(jobs, asyncio.run(_proc_run(url, body)))

    def enqueue_p1(self, url: str, s: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        return self._single(url, s["single"], 1)

    def enqueue_p4(self, url: str, s: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        return self._single(url, s["single"], 4)

    def _bulk(self, url: str, jobs: int) -> float:
        async def body(app: Any) -> float:
            started = time.perf_counter()
            await app.tasks["bench"].batch_defer_async(*({"n": i} for i in range(jobs)))
            return time.perf_counter() - started
        return asyncio.run(_proc_run(url, body))

    def bulk(self, url: str, s: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        return _rate(s["bulk"], self._bulk(url, s["bulk"]))

    def _drain(self, url: str, jobs: int, processes: int) -> dict[str, Any]:
        return peer_drain("procrastinate", url, processes, 10, lambda: self._bulk(url, jobs), jobs,
                          "procrastinate_jobs", timeout=max(60.0, jobs / 20))

    def drain_w1(self, url: str, s: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        return self._drain(url, s["drain_slow"], 1)

    def drain_w2(self, url: str, s: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        return self._drain(url, s["drain_slow"], 2)

    def drain_async(self, url: str, s: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        jobs = s["drain_async"]
        return peer_drain("procrastinate-sleep", url, 1, ASYNC_SLOTS, lambda: self._bulk(url, jobs), jobs,
                          "procrastinate_jobs", timeout=max(120.0, jobs / 20))

    def latency(self, url: str, s: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        probe = ProbeReceiver()
        procs = peer_procs("procrastinate", url, 1, 10, probe.port)
        try:
            wait_backends(url, 1, procs)

            async def body(app: Any) -> dict[int, float]:
                committed = {}
                for seq in range(s["latency"]):
                    await app.tasks["bench"].defer_async(p=seq, t=0)
                    committed[seq] = time.time()
                    await asyncio.sleep(0.05)
                return committed
            committed = asyncio.run(_proc_run(url, body))
            wait_until(lambda: len(probe.samples) >= len(committed), 10, "every probe")
        finally:
            stop(procs)
            probe.close()
        return _latency(committed, probe.samples)


class RawPsycopg(System):
    """The minimal psycopg programs: INSERT per transaction, one unnest INSERT, claim-50-then-delete."""

    name = "raw-psycopg"

    def enqueue_p1(self, url: str, s: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        return bench.raw_insert_single(url, s["single"], 1)

    def enqueue_p4(self, url: str, s: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        return bench.raw_insert_single(url, s["single"], 4)

    def enqueue_sqlalchemy(self, url: str, s: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        from tests.benchmarks.sqlalchemy_enqueue import raw_insert_via_session

        return raw_insert_via_session(url, s["single"])

    def bulk(self, url: str, s: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        jobs = s["bulk"]
        with psycopg.connect(url, autocommit=True) as conn:
            started = time.perf_counter()
            conn.execute("INSERT INTO jobs (queue, payload) "
                         "SELECT 'skiplock_bench', p::jsonb FROM unnest(%s::text[]) p",
                         ([json.dumps({"n": i}) for i in range(jobs)],))
            return _rate(jobs, time.perf_counter() - started)

    def _drain(self, url: str, jobs: int, processes: int) -> dict[str, Any]:
        procs = [subprocess.Popen([sys.executable, "-m", "tests.benchmarks.peers", "rawloop", url, "50"], cwd=REPO,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE) for _ in range(processes)]
        try:
            for p in procs:
                assert p.stdout is not None
                p.stdout.readline()  # "ready": connected
            bench.seed_jobs(url, jobs)
            started = time.monotonic()
            for p in procs:
                assert p.stdin is not None
                p.stdin.write(b"go\n")
                p.stdin.flush()
            for p in procs:
                p.wait(timeout=300)
            elapsed = time.monotonic() - started
        finally:
            stop(procs)
        _check_empty(url)
        return _rate(jobs, elapsed)

    def drain_w1(self, url: str, s: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        return self._drain(url, s["drain"], 1)

    def drain_w2(self, url: str, s: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        return self._drain(url, s["drain"], 2)



class CeleryRedis(System):
    """Celery 5 on the Redis broker, no result backend, `--pool=solo` (tests/benchmarks/celery_peer.py).

    One single-threaded worker process per process of the workload. Redis is not PostgreSQL: the
    fresh database run_one makes goes unused; each workload flushes its own Redis database instead.
    """

    name = "celery-redis"
    migrate_skiplock = False

    def enqueue_p1(self, url: str, s: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        return celery_peer().enqueue_single(s["single"], 1)

    def enqueue_p4(self, url: str, s: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        return celery_peer().enqueue_single(s["single"], 4)

    def bulk(self, url: str, s: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        return celery_peer().enqueue_bulk(s["bulk"])

    def drain_w1(self, url: str, s: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        return celery_peer().drain(s["drain"], 1)

    def drain_w2(self, url: str, s: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        return celery_peer().drain(s["drain"], 2)

    def latency(self, url: str, s: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        return celery_peer().pickup_latency(s["latency"])


class CeleryRedisPrefork(System):
    """Celery's default pool for the 2-process drain: one worker, `--pool=prefork -c 2`."""

    name = "celery-redis-prefork"
    migrate_skiplock = False

    def drain_w2(self, url: str, s: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        return celery_peer().drain(s["drain"], 1, "prefork", concurrency=2)


def celery_peer() -> Any:
    """tests.benchmarks.celery_peer, imported on first use: a run without Celery systems needs no Celery."""
    from tests.benchmarks import celery_peer as module

    return module


# RAW_CLAIM and RAW_DELETE in pgbench's dialect: the claimed ids travel as one array variable.
PGBENCH_SCRIPT = (
    "WITH c AS (SELECT id FROM jobs WHERE queue = 'skiplock_bench' AND status = 'queued' AND run_at <= now() "
    "ORDER BY priority DESC, run_at, id LIMIT 50 FOR UPDATE SKIP LOCKED), "
    "u AS (UPDATE jobs j SET status = 'running', attempts = j.attempts + 1, started_at = now(), "
    "lease_until = now() + interval '30 seconds', worker_id = 'raw' FROM c WHERE j.id = c.id RETURNING j.id) "
    "SELECT coalesce(array_agg(id), '{}') AS ids FROM u\n\\gset\n"
    "DELETE FROM jobs WHERE id = ANY(:ids::bigint[]) AND worker_id = 'raw' AND status = 'running';\n"
)


class PgBench(System):
    """pgbench running the same two statements: the ceiling without any client-side Python."""

    name = "pgbench"

    def _drain(self, url: str, jobs: int, clients: int) -> dict[str, Any]:
        binary = shutil.which("pgbench") or str(Path(subprocess.check_output(
            ["pg_config", "--bindir"], text=True).strip()) / "pgbench")
        with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
            f.write(PGBENCH_SCRIPT)
        bench.seed_jobs(url, jobs)
        started = time.monotonic()
        out = subprocess.run([binary, "-n", "-M", "prepared", "-c", str(clients), "-j", str(clients),
                              "-t", str(jobs // 50 // clients), "-f", f.name, url],
                             capture_output=True, text=True, check=True)
        elapsed = time.monotonic() - started
        os.unlink(f.name)
        left = _check_empty(url, strict=False)
        result = _rate(jobs - left, elapsed)
        result["left"] = left
        result["pgbench_tps"] = next((line for line in out.stdout.splitlines() if line.startswith("tps")), "")
        return result

    def drain_w1(self, url: str, s: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        return self._drain(url, s["drain"], 1)

    def drain_w2(self, url: str, s: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
        return self._drain(url, s["drain"], 2)


def _rate(jobs: int, seconds: float) -> dict[str, Any]:
    return {"jobs": jobs, "seconds": seconds, "jobs_per_s": jobs / seconds}


def _latency(committed: dict[int, float], samples: dict[int, tuple[float, float]],
             called: dict[int, float] | None = None) -> dict[str, Any]:
    return bench.latency_summary(SimpleNamespace(samples=samples), committed, len(committed), called)


def _check_empty(url: str, strict: bool = True) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        left = int(conn.execute("SELECT count(*) FROM jobs").fetchone()[0])  # type: ignore[index]
    if strict and left:
        raise RuntimeError(f"{left} jobs left after the drain")
    return left


# ---- the run ---------------------------------------------------------------------------------

WORKLOADS = ["enqueue_p1", "enqueue_p4", "enqueue_sqlalchemy", "bulk", "drain_w1", "drain_w2", "latency", "recipe",
             "drain_async", "producers_16", "producers_64"]
TITLES = {
    "enqueue_p1": "1. enqueue, 1 job/transaction, 1 producer (jobs/s)",
    "enqueue_p4": "1. enqueue, 1 job/transaction, 4 producers (jobs/s)",
    "enqueue_sqlalchemy": "1. enqueue, 1 job/transaction, SQLAlchemy Session on psycopg2 (jobs/s)",
    "bulk": "2. bulk enqueue (jobs/s)",
    "drain_w1": "3. drain no-op jobs, 1 process (jobs/s)",
    "drain_w2": "3. drain no-op jobs, 2 processes (jobs/s)",
    "latency": "4. idle pickup latency, producer's call returns -> handler start (ms)",
    "recipe": "5. seed recipe: 32 slots, batch 50, 2-5 ms handlers (jobs/s)",
    "steady": "6. steady state at half capacity, end-to-end (ms)",
    "drain_async": "7. async drain, handlers await 10 ms, 200 in flight, 1 process (jobs/s)",
    "producers_16": "8. enqueue() from 16 concurrent producers, 2 workers keeping up (jobs/s)",
    "producers_64": "8. enqueue() from 64 concurrent producers, 2 workers keeping up (jobs/s)",
}


def run_one(system: System, workload: str, admin_url: str, sizes: dict[str, Any],
            ctx: dict[str, Any], errors: list[str] | None = None) -> dict[str, Any] | None:
    """One repetition of one workload for one system, in a fresh database.

    A failure is printed and added to `errors` (the report lists them) and the run goes on:
    one system's crash must not throw away every other figure of a 15-minute run.
    """
    if getattr(system, workload, None) is None:
        return None
    try:
        with scratch_database(admin_url, prefix=f"cmp_{system.name.replace('-', '_')}",
                              migrate=system.migrate_skiplock) as url:
            system.setup(url)
            return system.run(workload, url, sizes, ctx)
    except Exception as exc:
        message = f"{system.name} / {workload}: {type(exc).__name__}: {exc}"
        print(f"FAILED {message}", file=sys.stderr, flush=True)
        if errors is not None:
            errors.append(message)
        return None


def summarize(reps: list[dict[str, Any]], key: str) -> dict[str, float]:
    """Median and range of one figure over the repetitions."""
    values = [r[key] for r in reps]
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def main(argv: list[str] | None = None) -> int:
    """Run every workload on every system; write the table, JSON and charts."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, 1 repetition: a smoke run")
    parser.add_argument("--reps", type=int, default=None, help="repetitions (default 3, 1 with --quick)")
    parser.add_argument("--out", default=str(REPO / "tests/benchmarks/results"), help="output folder")
    parser.add_argument("--only", default="", help="comma-separated workloads to run (default all)")
    parser.add_argument("--systems", default="", help="comma-separated system names (default all)")
    parser.add_argument("--drain", type=int, default=None,
                        help="jobs per drain (default 20,000): a larger drain measures a rate, not a start-up")
    args = parser.parse_args(argv)
    # Issue 19 part 2's latency against load (~50 min) and its batches alone run on a private cluster
    # of their own (autovacuum on), not on DATABASE_URL's server; only when asked for by name.
    own_cluster = [name for name in ("curve", "bursts") if name in args.only.split(",")]
    for name in own_cluster:
        benchmark = importlib.import_module(f"tests.benchmarks.{name}")
        benchmark.main(["--out", args.out, *(["--quick"] if args.quick else [])]
                       + (["--systems", args.systems] if args.systems else []))
    if own_cluster and set(args.only.split(",")) <= set(own_cluster):
        return 0
    sizes = dict(QUICK if args.quick else FULL)
    if args.drain:
        sizes["drain"] = args.drain
    reps = args.reps or (1 if args.quick else 3)
    admin_url = os.environ.get("DATABASE_URL") or "postgresql://postgres@127.0.0.1:5432/postgres"
    systems: list[System] = [Skiplock(), PgQueuer(10, with_enqueue=True), PgQueuer(50, with_enqueue=False),
                             Procrastinate(), RawPsycopg(), PgBench(), CeleryRedis(),
                             CeleryRedisPrefork()]
    if args.systems:
        systems = [s for s in systems if s.name in args.systems.split(",")]
    workloads = [w for w in WORKLOADS if not args.only or w in args.only.split(",")]
    results: dict[str, dict[str, list[dict[str, Any]]]] = {}
    errors: list[str] = []
    started = time.monotonic()
    for workload in workloads:
        results[workload] = {}
        for rep in range(reps):
            order = systems[rep % len(systems):] + systems[:rep % len(systems)]
            for system in order:
                print(f"[{time.monotonic() - started:6.0f}s] {workload} rep {rep + 1}/{reps}: {system.name}",
                      file=sys.stderr, flush=True)
                result = run_one(system, workload, admin_url, sizes, {}, errors)
                if result is not None:
                    results[workload].setdefault(system.name, []).append(result)
    if not args.only or "steady" in args.only.split(","):
        results["steady"] = {}
        for system in systems:
            drained = results.get("drain_w2", {}).get(system.name)
            if not drained or getattr(system, "steady", None) is None:
                continue
            rate = round(statistics.median(r["jobs_per_s"] for r in drained) / 2)
            print(f"[{time.monotonic() - started:6.0f}s] steady at {rate}/s: {system.name}", file=sys.stderr)
            result = run_one(system, "steady", admin_url, sizes, {"rate": rate}, errors)
            if result is not None:
                results["steady"][system.name] = [result]
    flow_bench.compare_hook(Path(args.out), admin_url, args.quick, reps, args.only)  # issue 15: flow.md
    # issue 19 part 3 (growth.md): only with --only growth, as it builds a private cluster of 5M rows
    growth_bench.compare_hook(Path(args.out), args.quick, reps, args.only)
    with scratch_database(admin_url, prefix="cmp_facts", migrate=False) as url:
        facts = bench.server_facts(url)
    facts.update(versions())
    facts["date"] = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    facts["sizes"] = sizes
    facts["repetitions"] = reps
    facts["wall_seconds"] = round(time.monotonic() - started)
    facts["errors"] = errors
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps({"facts": facts, "results": results}, indent=1))
    from tests.benchmarks.report import bar_chart, markdown, steady_plot

    (out / "results.md").write_text(markdown(facts, results))
    bar_chart(results, out / "throughput.png")
    steady_plot(results, out / "steady.png")
    print((out / "results.md").read_text())
    return 0


def versions() -> dict[str, str]:
    """Versions of every contender (and pgbench)."""
    from importlib.metadata import version

    found = {name: version(name) for name in ("pgqueuer", "asyncpg", "procrastinate", "psycopg", "matplotlib")}
    found["pgbench"] = subprocess.run(["pgbench", "--version"], capture_output=True, text=True).stdout.strip()
    try:
        from tests.benchmarks import celery_peer

        found.update(celery=version("celery"), kombu=version("kombu"), redis_server=celery_peer.server_version())
    except ImportError:  # the bench extra without Celery: its runs failed and are listed as errors
        found.update(celery="not installed", kombu="-", redis_server="-")
    return found


if __name__ == "__main__":
    sys.exit(main())
