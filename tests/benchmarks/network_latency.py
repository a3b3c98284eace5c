"""Enqueue-to-start latency at a fixed arrival rate across 0 to 5 ms of RTT: skiplock, PgQueuer, Celery+Redis.

    python -m tests.benchmarks.network_latency [--reps 3] [--rate 20] [--seconds 20]
        [--rtts 0,proxy+0,0.5,1,2,5] [--out tests/benchmarks/results] [--quick]

The latency half of issue 38's network table (tests/benchmarks/network.py has the drains). Each system's
one worker process, with its defaults, reaches its broker (PostgreSQL, or Redis for Celery) through the
same delay proxy (tests/benchmarks/delay_proxy.py, RTT/2 each way); the producer and the probes go
direct, so only the worker's traffic crosses the delayed link, as in network.py. "0" is plain loopback,
"proxy+0" the proxy without delay (its own cost).

Per RTT and repetition, systems in rotating order, each on a fresh database (Redis: flushed):
a producer sends `--rate` jobs/s for `--seconds`, one job at a time at Poisson arrival times (one
seeded sequence, the same for every system and RTT: bursts happen, so a worker is sometimes busy
when a job arrives, which a fixed gap never shows). Every job reports its start over loopback UDP.
Latency: from the stamp taken just before the enqueue call to the handler's start (p50/p95/p99/max),
and from the enqueue call's return (p50/p95/p99). Also per point: the proxy's round trips per job
(every worker turn in the window: claims, acks, heartbeats, idle polls), the measured RTT and the
1-minute load average (this machine is shared, every figure sits next to its load).

Bounded: each point waits at most PROBE_WAIT s for its last probes (a system that fell behind is
reported with its missing count, not waited for), workers are stopped with SIGTERM then SIGKILL.
Needs the `bench` extra and a `redis-server` binary (network.py's private one is started).
PostgreSQL: DATABASE_URL's server. Writes network_latency.json and network_latency.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

from skiplock.tools import bench
from skiplock.tools.bench import BENCH_QUEUE, ProbeReceiver, percentile
from tests.benchmarks import compare
from tests.benchmarks.network import Proxy, median_rtt_ms, private_redis, upstream_of, via

REPO = Path(__file__).resolve().parents[2]
SYSTEMS = ["skiplock", "pgqueuer-b50", "celery-redis"]
PROBE_WAIT = 30.0  # seconds a point waits for its last probes after the producer stops
SEED = 38  # the arrival sequence's seed: issue 38


def arrivals(rate: float, seconds: float, seed: int = SEED) -> list[float]:
    """Poisson arrival offsets (s from the start) at `rate` per second, up to `seconds`."""
    rng = random.Random(seed)
    times: list[float] = []
    t = 0.0
    while True:
        t += rng.expovariate(rate)
        if t >= seconds:
            return times
        times.append(t)


# ---- producers: each sends one job with payload {"p": seq, "t": stamp} -----------------------------


class Producer:
    """Sends job `seq` stamped `stamp` (the time just before the call), direct to the broker."""

    def send(self, seq: int, stamp: float) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Release the connection."""


class SkiplockProducer(Producer):
    def __init__(self, url: str) -> None:
        self.conn = psycopg.connect(url, autocommit=True)

    def send(self, seq: int, stamp: float) -> None:
        from skiplock.core.producer import enqueue

        enqueue(BENCH_QUEUE, {"p": seq, "t": stamp}, conn=self.conn)

    def close(self) -> None:
        self.conn.close()


class PgQueuerProducer(Producer):
    def __init__(self, url: str) -> None:
        self.loop = asyncio.new_event_loop()  # asyncpg needs one; the producer drives it job by job
        self.conn, self.q = self.loop.run_until_complete(compare._pgq_queries(url))

    def send(self, seq: int, stamp: float) -> None:
        self.loop.run_until_complete(self.q.enqueue("bench", json.dumps({"p": seq, "t": stamp}).encode()))

    def close(self) -> None:
        self.loop.run_until_complete(self.conn.close())
        self.loop.close()


class CeleryProducer(Producer):
    def __init__(self) -> None:
        from tests.benchmarks import celery_peer

        self.peer = celery_peer
        self._cm = celery_peer.app.producer_or_acquire()
        self.producer = self._cm.__enter__()
        self.producer.channel.client.ping()  # connect before the first timed call

    def send(self, seq: int, stamp: float) -> None:
        self.peer.bench.apply_async(kwargs={"p": seq, "t": stamp}, producer=self.producer)

    def close(self) -> None:
        self._cm.__exit__(None, None, None)


# ---- workers through the proxy ---------------------------------------------------------------------


@contextlib.contextmanager
def skiplock_worker(direct: str, worker_url: str, probe_port: int) -> Iterator[Producer]:
    with bench.skiplock_workers(worker_url, 1, probe_port):
        producer = SkiplockProducer(direct)
        try:
            yield producer
        finally:
            producer.close()


@contextlib.contextmanager
def pgqueuer_worker(direct: str, worker_url: str, probe_port: int) -> Iterator[Producer]:
    asyncio.run(compare._pgq_install(direct))
    procs = compare.peer_procs("pgqueuer", worker_url, 1, 50, probe_port)
    try:
        compare.wait_backends(direct, 1, procs)
        producer = PgQueuerProducer(direct)
        try:
            yield producer
        finally:
            producer.close()
    finally:
        compare.stop(procs)


@contextlib.contextmanager
def celery_worker(direct: str, worker_url: str, probe_port: int) -> Iterator[Producer]:
    from tests.benchmarks import celery_peer

    celery_peer.flush()
    with celery_peer.workers(1, "solo", 1, probe_port, broker=worker_url):
        producer = CeleryProducer()
        try:
            yield producer
        finally:
            producer.close()


Workers = Callable[[str, str, int], contextlib.AbstractContextManager[Producer]]
WORKERS: dict[str, tuple[str, Workers]] = {  # name -> (broker, workers)
    "skiplock": ("pg", skiplock_worker), "pgqueuer-b50": ("pg", pgqueuer_worker),
    "celery-redis": ("redis", celery_worker)}


# ---- one point ------------------------------------------------------------------------------------


def offer(producer: Producer, schedule: list[float]) -> tuple[dict[int, float], dict[int, float], int]:
    """Send job i at schedule[i] s from now: (stamps before each call, returns, calls sent late)."""
    called: dict[int, float] = {}
    returned: dict[int, float] = {}
    late = 0
    start = time.monotonic()
    for seq, due in enumerate(schedule):
        wait = start + due - time.monotonic()
        if wait > 0:
            time.sleep(wait)  # pacing the producer, not synchronisation
        else:
            late += wait < -0.005  # more than 5 ms behind its arrival time: the producer itself lagged
        called[seq] = time.time()
        producer.send(seq, called[seq])
        returned[seq] = time.time()
    return called, returned, late


def summarize(probe: ProbeReceiver, called: dict[int, float], returned: dict[int, float]) -> dict[str, Any]:
    from_call = [(probe.samples[s][1] - called[s]) * 1000 for s in called if s in probe.samples]
    from_return = [(probe.samples[s][1] - returned[s]) * 1000 for s in returned if s in probe.samples]
    return {"sent": len(called), "received": len(from_call), "missing": len(called) - len(from_call),
            **{f"p{q}_ms": percentile(from_call, q) for q in (50, 95, 99)},
            "max_ms": max(from_call) if from_call else float("nan"),
            **{f"p{q}_return_ms": percentile(from_return, q) for q in (50, 95, 99)}}


def redis_rtt_ms(url: str, samples: int = 100) -> float:
    """PING round trips on one connection to `url` (the proxy's delay, plus the load)."""
    import redis

    client = redis.Redis.from_url(url)
    client.ping()
    taken = []
    for _ in range(samples):
        began = time.perf_counter()
        client.ping()
        taken.append((time.perf_counter() - began) * 1000)
    client.close()
    return statistics.median(taken)


def run_point(name: str, direct: str, worker_url: str, proxy: Proxy | None, schedule: list[float]) -> dict[str, Any]:
    broker, workers = WORKERS[name]
    probe = ProbeReceiver()
    load = _load()
    try:
        with workers(direct, worker_url, probe.port) as producer:
            rtt = redis_rtt_ms(worker_url) if broker == "redis" else median_rtt_ms(worker_url, 100)
            if proxy:
                proxy.reset()
            called, returned, late = offer(producer, schedule)
            with contextlib.suppress(TimeoutError):  # what never started is reported as missing
                bench.wait_until(lambda: len(probe.samples) >= len(called), PROBE_WAIT, "the last probes")
            turns = proxy.stats()["turns"] if proxy else None
    finally:
        probe.close()
    figures = summarize(probe, called, returned)
    figures.update(rtt_ms=rtt, late_calls=late, load1_start=load, load1_end=_load(),
                   round_trips_per_job=None if turns is None else turns / max(1, len(called)))
    return figures


def run(admin_url: str, redis_url: str, rtts: list[str], reps: int, schedule: list[float]) -> dict[str, Any]:
    results: dict[str, dict[str, list[dict[str, Any]]]] = {}
    began = time.monotonic()
    for rep in range(reps):
        for rtt in rtts:
            delay = 0.0 if rtt in ("0", "proxy+0") else float(rtt)
            pg_proxy = None if rtt == "0" else Proxy(upstream_of(admin_url), delay)
            redis_proxy = None if rtt == "0" else Proxy(upstream_of(redis_url), delay)
            try:
                order = SYSTEMS[rep % len(SYSTEMS):] + SYSTEMS[:rep % len(SYSTEMS)]
                for name in order:
                    broker = WORKERS[name][0]
                    proxy = pg_proxy if broker == "pg" else redis_proxy
                    print(f"[{time.monotonic() - began:5.0f}s] rep {rep + 1} rtt {rtt}: {name} (load {_load():.1f})",
                          file=sys.stderr, flush=True)
                    try:
                        if broker == "redis":
                            figures = run_point(name, redis_url, via(redis_url, proxy.port) if proxy else redis_url,
                                                proxy, schedule)
                        else:
                            with bench.scratch_database(admin_url, prefix="netlat",
                                                        migrate=name == "skiplock") as url:
                                figures = run_point(name, url, via(url, proxy.port) if proxy else url, proxy, schedule)
                    except Exception as exc:  # one failure must not lose the whole run
                        print(f"FAILED {name} rtt {rtt}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
                        continue
                    figures["rep"] = rep
                    results.setdefault(rtt, {}).setdefault(name, []).append(figures)
            finally:
                for p in (pg_proxy, redis_proxy):
                    if p:
                        p.close()
    return results


# ---- the report -----------------------------------------------------------------------------------


def spread(values: list[float], digits: int = 1) -> str:
    if not values:
        return "-"
    med = statistics.median(values)
    return f"{med:.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def _values(systems: dict[str, list[dict[str, Any]]], name: str, key: str) -> list[float]:
    return [r[key] for r in systems.get(name, []) if r.get(key) is not None]


def ratios(systems: dict[str, list[dict[str, Any]]], peer: str, key: str) -> list[float]:
    """peer's `key` / skiplock's, within each repetition (the two ran minutes apart at most, same load)."""
    mine = {r["rep"]: r[key] for r in systems.get("skiplock", [])}
    return [r[key] / mine[r["rep"]] for r in systems.get(peer, []) if mine.get(r["rep"])]


def markdown(facts: dict[str, Any], results: dict[str, Any]) -> str:
    lines = [f"# Network: enqueue-to-start latency against RTT at {facts['rate']:g} jobs/s ({facts['date']})", "",
             f"Machine: {facts['machine']}; load (uptime) at start: {facts['load_start']}, at end: "
             f"{facts['load_end']}. Command: `{facts['command']}`. {facts['sent']} jobs per point (Poisson arrivals, "
             f"{facts['seconds']:g} s). Median (min-max) of {facts['reps']} runs; latency from the stamp before "
             "the enqueue call to the handler's start, in ms.", ""]
    short = {"skiplock": "skiplock", "pgqueuer-b50": "PgQueuer", "celery-redis": "Celery"}
    lines += ["| RTT (ms) | load (1-min) | " + " | ".join(f"{short[n]} p50 | p95 | p99" for n in SYSTEMS) + " |",
              "|" + "---|" * (2 + 3 * len(SYSTEMS))]
    for rtt, systems in results.items():
        cells = [spread([r["load1_start"] for runs in systems.values() for r in runs])]
        cells += [spread(_values(systems, n, f"p{q}_ms")) for n in SYSTEMS for q in (50, 95, 99)]
        lines.append(f"| {rtt} | " + " | ".join(cells) + " |")
    lines += ["", "From the enqueue call's return instead (the producer's own INSERT and commit left out: the "
              "pickup alone), in ms:", "",
              "| RTT (ms) | " + " | ".join(f"{short[n]} p50 | p99" for n in SYSTEMS) + " |",
              "|" + "---|" * (1 + 2 * len(SYSTEMS))]
    for rtt, systems in results.items():
        cells = [spread(_values(systems, n, f"p{q}_return_ms")) for n in SYSTEMS for q in (50, 99)]
        lines.append(f"| {rtt} | " + " | ".join(cells) + " |")
    lines += ["", "Ratios within each run (peer / skiplock), measured RTT (median SELECT 1 or PING through the proxy) "
              "and round trips per job (every worker turn through the proxy during the point):", "",
              "| RTT (ms) | PgQueuer p50 / skiplock | Celery p50 / skiplock | PgQueuer p99 / skiplock | "
              "Celery p99 / skiplock | measured RTT PG | measured RTT Redis | rt/job skiplock | PgQueuer | Celery |",
              "|" + "---|" * 10]
    for rtt, systems in results.items():
        cells = [spread(ratios(systems, p, f"p{q}_ms")) for q in (50, 99) for p in ("pgqueuer-b50", "celery-redis")]
        pg_rtts = _values(systems, "skiplock", "rtt_ms") + _values(systems, "pgqueuer-b50", "rtt_ms")
        cells += [spread(pg_rtts, 2), spread(_values(systems, "celery-redis", "rtt_ms"), 2)]
        cells += [spread(_values(systems, n, "round_trips_per_job"), 2) for n in SYSTEMS]
        lines.append(f"| {rtt} | " + " | ".join(cells) + " |")
    missing = {f"{rtt} {n}": sum(r["missing"] for r in runs) for rtt, s in results.items() for n, runs in s.items()
               if any(r["missing"] for r in runs)}
    lines += ["", f"Jobs that never started within {PROBE_WAIT:g} s of the producer's end: "
              + (", ".join(f"{k}: {v}" for k, v in missing.items()) if missing else "none") + "."]
    return "\n".join(lines) + "\n"


def _load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--rate", type=float, default=20.0, help="jobs per second offered (Poisson arrivals)")
    parser.add_argument("--seconds", type=float, default=20.0, help="how long each point offers jobs")
    parser.add_argument("--rtts", default="0,proxy+0,0.5,1,2,5")
    parser.add_argument("--out", default=str(REPO / "tests/benchmarks/results"))
    parser.add_argument("--quick", action="store_true", help="a smoke run: 3 s per point, one rep")
    parser.add_argument("--name", default="", help="the result files' name (default network_latency, "
                        "network_latency_<rate> when --rate is not 20)")
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds, args.reps = 3.0, 1
    schedule = arrivals(args.rate, args.seconds)
    admin_url = os.environ.get("DATABASE_URL") or "postgresql://postgres@127.0.0.1:5432/postgres"
    facts: dict[str, Any] = {"date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
                             "load_start": " ".join(Path("/proc/loadavg").read_text().split()[:3]),
                             "machine": f"{os.cpu_count()} CPUs, {os.uname().release}",
                             "command": "python -m tests.benchmarks.network_latency " + " ".join(argv or sys.argv[1:]),
                             "reps": args.reps, "rate": args.rate, "seconds": args.seconds, "sent": len(schedule),
                             "seed": SEED}
    with private_redis() as redis_url:
        # celery_peer reads its broker at import: the producer's (direct) one; the worker gets the proxy's
        os.environ["BENCH_CELERY_BROKER"] = redis_url
        results = run(admin_url, redis_url, args.rtts.split(","), args.reps, schedule)
    facts["load_end"] = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = args.name or ("network_latency" + ("_quick" if args.quick else "")
                         + ("" if args.rate == 20 else f"_{args.rate:g}"))
    (out / f"{name}.json").write_text(json.dumps({"facts": facts, "results": results}, indent=1))
    (out / f"{name}.md").write_text(markdown(facts, results))
    print((out / f"{name}.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
