"""skiplock, PgQueuer and Celery+Redis across a network of 0, 0.5, 1, 2 and 5 ms RTT (issue 38, part 1).

    python -m tests.benchmarks.network [--reps 3] [--rtts 0,0.5,1,2,5] [--out tests/benchmarks/results]

Each system's worker process reaches its broker (PostgreSQL, or Redis) through the same delay proxy
(tests/benchmarks/delay_proxy.py, RTT/2 each way); producers, fills and "done?" polls go direct,
so only the worker's traffic crosses the delayed link. RTT 0 is plain loopback, without the proxy;
"proxy+0" is the proxy with no delay (its own cost). Per RTT and repetition, in rotating order:

- drain: one worker process with its defaults (skiplock: 10 threads, batch 50; PgQueuer: batch 50,
  its faster setting in compare.py; Celery: --pool=solo, prefetch 4, early acks) drains no-op jobs
  committed at once; jobs/s, and round trips per job (the proxy's count of request turns / jobs);
- pickup (skiplock): one idle worker, one job every 50 ms; producer's commit -> handler start.

Needs the `bench` extra and a `redis-server` binary (a private one is started on a free port).
PostgreSQL: DATABASE_URL's server (default 127.0.0.1:5432). Writes network.json and network.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from skiplock.tools import bench
from tests.benchmarks.compare import _pgq_bulk, _pgq_install, peer_procs, stop, wait_backends
from tests.support.pgcluster import free_port

REPO = Path(__file__).resolve().parents[2]
SIZES = {"skiplock": 20_000, "pgqueuer": 10_000, "celery": 1_000, "pickup": 100}


class Proxy:
    """A delay_proxy subprocess: `.port`, `.stats()`, `.reset()`."""

    def __init__(self, upstream: str, rtt_ms: float) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.benchmarks.delay_proxy", "--upstream", upstream,
                                      "--delay-ms", str(rtt_ms / 2)], cwd=REPO, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline().split()[1])

    def _ask(self, word: str) -> dict[str, int]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(word + "\n")
        self.proc.stdin.flush()
        return dict(json.loads(self.proc.stdout.readline()))

    def stats(self) -> dict[str, int]:
        return self._ask("stats")

    def reset(self) -> None:
        self._ask("reset")

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


@contextlib.contextmanager
def private_redis() -> Iterator[str]:
    """A redis-server of this run's own on a free loopback port (no other run shares its databases)."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError("redis-server is not installed")
    port = free_port()
    folder = tempfile.mkdtemp(prefix="skiplock-redis-")
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", folder], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        import redis

        bench.wait_until(lambda: _pings(redis.Redis(port=port)), 10, "redis-server to start")
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(folder, ignore_errors=True)


def _pings(client: Any) -> bool:
    try:
        return bool(client.ping())
    except Exception:  # not up yet
        return False


def via(url: str, port: int) -> str:
    """`url` (libpq or redis) pointed at the proxy's port on loopback."""
    if url.startswith("redis://"):
        return f"redis://127.0.0.1:{port}/0"
    return make_conninfo(url, host="127.0.0.1", port=str(port))


def upstream_of(url: str) -> str:
    if url.startswith("redis://"):
        return url.split("//", 1)[1].split("/", 1)[0]
    params = conninfo_to_dict(url)
    return f"{params.get('host', '127.0.0.1')}:{params.get('port', 5432)}"


def median_rtt_ms(url: str, samples: int = 200) -> float:
    """SELECT 1 round trips on one connection to `url`: the RTT the workers saw (proxy and load included)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT 1")
        taken = []
        for _ in range(samples):
            began = time.perf_counter()
            conn.execute("SELECT 1")
            taken.append((time.perf_counter() - began) * 1000)
    return statistics.median(taken)


# ---- one measurement each ---------------------------------------------------------------------


def skiplock_drain(direct: str, worker_url: str, proxy: Proxy | None) -> dict[str, Any]:
    jobs = SIZES["skiplock"]
    with bench.skiplock_workers(worker_url, 1):
        if proxy:
            proxy.reset()
        committed = bench.seed_jobs(direct, jobs)
        done = bench.wait_acked(direct, jobs, timeout=max(120.0, jobs / 50))
        turns = proxy.stats()["turns"] if proxy else None
    return _result(jobs, done - committed, turns)


def skiplock_pickup(direct: str, worker_url: str, proxy: Proxy | None) -> dict[str, Any]:
    from skiplock.core.producer import enqueue

    jobs = SIZES["pickup"]
    probe = bench.ProbeReceiver()
    committed: dict[int, float] = {}
    try:
        with bench.skiplock_workers(worker_url, 1, probe.port), psycopg.connect(direct, autocommit=True) as conn:
            for seq in range(jobs):
                enqueue(bench.BENCH_QUEUE, {"p": seq, "t": 0}, conn=conn)
                committed[seq] = time.time()
                time.sleep(0.05)  # pacing the producer, not synchronisation
            bench.wait_until(lambda: len(probe.samples) >= jobs, 20, "every probe")
    finally:
        probe.close()
    return bench.latency_summary(probe, committed, jobs)


def pgqueuer_drain(direct: str, worker_url: str, proxy: Proxy | None) -> dict[str, Any]:
    jobs = SIZES["pgqueuer"]
    asyncio.run(_pgq_install(direct))
    procs = peer_procs("pgqueuer", worker_url, 1, 50)
    try:
        wait_backends(direct, 1, procs)
        if proxy:
            proxy.reset()
        asyncio.run(_pgq_bulk(direct, jobs))
        committed = time.monotonic()
        done = bench.wait_empty(direct, timeout=max(120.0, jobs / 20), table="pgqueuer")
        turns = proxy.stats()["turns"] if proxy else None
    finally:
        stop(procs)
    return _result(jobs, done - committed, turns)


def celery_drain(redis_direct: str, redis_worker: str, proxy: Proxy | None) -> dict[str, Any]:
    jobs = SIZES["celery"]
    env = {**os.environ, "BENCH_CELERY_BROKER": redis_worker}
    proc = subprocess.Popen([sys.executable, "-m", "tests.benchmarks.network_celery", redis_direct, str(jobs)],
                            cwd=REPO, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        if proc.stdout.readline().strip() != "ready":
            raise RuntimeError("the Celery drain did not start")
        if proxy:
            proxy.reset()
        proc.stdin.write("go\n")
        proc.stdin.flush()
        result = dict(json.loads(proc.stdout.readline()))
        turns = proxy.stats()["turns"] if proxy else None
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return _result(jobs, float(result["seconds"]), turns)


def _result(jobs: int, seconds: float, turns: int | None) -> dict[str, Any]:
    return {"jobs": jobs, "seconds": seconds, "jobs_per_s": jobs / seconds,
            "round_trips_per_job": None if turns is None else turns / jobs}


# ---- the run ----------------------------------------------------------------------------------

Measure = Callable[[str, str, "Proxy | None"], dict[str, Any]]
SYSTEMS: list[tuple[str, str, Measure]] = [  # (row name, broker, measurement)
    ("skiplock", "pg", skiplock_drain), ("pgqueuer-b50", "pg", pgqueuer_drain),
    ("celery-redis", "redis", celery_drain), ("skiplock pickup", "pg", skiplock_pickup)]


def run(admin_url: str, redis_url: str, rtts: list[str], reps: int) -> dict[str, Any]:
    results: dict[str, dict[str, list[dict[str, Any]]]] = {}
    began = time.monotonic()
    for rep in range(reps):
        for rtt in rtts:
            delay = 0.0 if rtt in ("0", "proxy+0") else float(rtt)
            pg_proxy = None if rtt == "0" else Proxy(upstream_of(admin_url), delay)
            redis_proxy = None if rtt == "0" else Proxy(upstream_of(redis_url), delay)
            try:
                order = SYSTEMS[rep % len(SYSTEMS):] + SYSTEMS[:rep % len(SYSTEMS)]
                for name, broker, measure in order:
                    proxy = pg_proxy if broker == "pg" else redis_proxy
                    print(f"[{time.monotonic() - began:5.0f}s] rep {rep + 1} rtt {rtt}: {name}", file=sys.stderr,
                          flush=True)
                    try:
                        if broker == "redis":
                            figures = measure(redis_url, via(redis_url, proxy.port) if proxy else redis_url, proxy)
                        else:
                            with bench.scratch_database(admin_url, prefix="net", migrate=name.startswith("skiplock")
                                                        ) as url:
                                worker_url = via(url, proxy.port) if proxy else url
                                figures = measure(url, worker_url, proxy)
                                figures["rtt_ms"] = median_rtt_ms(worker_url, 100)
                    except Exception as exc:  # one failure must not lose a 20-minute run
                        print(f"FAILED {name} rtt {rtt}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
                        continue
                    results.setdefault(rtt, {}).setdefault(name, []).append(figures)
            finally:
                for p in (pg_proxy, redis_proxy):
                    if p:
                        p.close()
    return results


def spread(values: list[float]) -> str:
    if not values:
        return "-"
    med = statistics.median(values)
    fmt = (lambda v: f"{v:,.0f}") if med >= 100 else (lambda v: f"{v:.2f}")
    return f"{fmt(med)} ({fmt(min(values))}-{fmt(max(values))})"


def _values(systems: dict[str, list[dict[str, Any]]], name: str, key: str) -> list[float]:
    return [r[key] for r in systems.get(name, []) if r.get(key) is not None]


def markdown(facts: dict[str, Any], results: dict[str, Any]) -> str:
    lines = [f"# Network: drain and pickup against RTT ({facts['date']})", "",
             f"Machine: {facts['machine']}; load (uptime) at start: {facts['load_start']}, at end: "
             f"{facts['load_end']}. Command: `{facts['command']}`. Median (min-max) of {facts['reps']} runs.", "",
             "| RTT (ms) | measured RTT | skiplock drain (jobs/s) | rt/job | PgQueuer b50 drain | rt/job | "
             "Celery+Redis drain | rt/job | skiplock / PgQueuer | skiplock / loopback | skiplock pickup p50 (ms) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    base = results.get("0", {}).get("skiplock", [])
    base_rate = statistics.median(r["jobs_per_s"] for r in base) if base else None
    for rtt, systems in results.items():
        sk, pq = _values(systems, "skiplock", "jobs_per_s"), _values(systems, "pgqueuer-b50", "jobs_per_s")
        ratio = f"{statistics.median(sk) / statistics.median(pq):.1f}" if sk and pq else "-"
        own = f"{statistics.median(sk) / base_rate:.2f}" if sk and base_rate else "-"
        cells = [spread(_values(systems, "skiplock", "rtt_ms")), spread(sk),
                 spread(_values(systems, "skiplock", "round_trips_per_job")), spread(pq),
                 spread(_values(systems, "pgqueuer-b50", "round_trips_per_job")),
                 spread(_values(systems, "celery-redis", "jobs_per_s")),
                 spread(_values(systems, "celery-redis", "round_trips_per_job")), ratio, own,
                 spread(_values(systems, "skiplock pickup", "p50_ms"))]
        lines.append(f"| {rtt} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--rtts", default="0,proxy+0,0.5,1,2,5")
    parser.add_argument("--out", default=str(REPO / "tests/benchmarks/results"))
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    args = parser.parse_args(argv)
    if args.quick:
        SIZES.update(skiplock=2000, pgqueuer=1000, celery=300, pickup=20)
    admin_url = os.environ.get("DATABASE_URL") or "postgresql://postgres@127.0.0.1:5432/postgres"
    facts: dict[str, Any] = {"date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), "load_start": _load(),
                             "machine": f"{os.cpu_count()} CPUs, {os.uname().release}",
                             "command": "python -m tests.benchmarks.network " + " ".join(argv or sys.argv[1:]),
                             "reps": args.reps, "sizes": dict(SIZES)}
    with private_redis() as redis_url:
        results = run(admin_url, redis_url, args.rtts.split(","), args.reps)
    facts["load_end"] = _load()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = "network_quick" if args.quick else "network"
    (out / f"{name}.json").write_text(json.dumps({"facts": facts, "results": results}, indent=1))
    (out / f"{name}.md").write_text(markdown(facts, results))
    print((out / f"{name}.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
