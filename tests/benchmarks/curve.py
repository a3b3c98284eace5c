"""Latency against load, with autovacuum on (issue 19 part 2).

    python -m tests.benchmarks.curve [--seconds 180] [--quick] [--points 10,25,50,75,90]
        [--systems skiplock,pgqueuer-b50,celery-redis] [--out tests/benchmarks/results] [--name curve]
        [--pg name=value ...] [--jobs-option name=value ...] [--skiplock name=value ...]

Starts a PRIVATE PostgreSQL cluster (initdb + pg_ctl on a free port, data and socket under /tmp,
tests/support/pgcluster.py) with stock settings and autovacuum on; skiplock's databases get every migration,
so jobs carries migration 005's per-table settings. The only server setting added is
log_autovacuum_min_duration = 0: each autovacuum's duration and CPU then come from the server log.
For each system it first measures its own capacity (the 2-process drain of compare.py, DRAIN_JOBS), then offers
10, 25, 50, 75 and 90% of it for --seconds each (a fresh database per point, systems alternating at
each point). Every PROBE_EVERY-th job reports its start over loopback UDP: end-to-end latency is from
the producer's enqueue call (the stamp taken just before it) to the handler's start.

Once a second a sampler thread records: the backlog (jobs queued, not started), the queue table's
pg_stat_user_tables row (dead tuples, HOT updates, autovacuum count), pg_stat_progress_vacuum, the CPU
of each group of processes (this cluster's autovacuum workers, its other backends, the worker
processes, this process, the machine as a whole) and the load average. The cluster is stopped and
removed at the end. Writes <name>.json, <name>.md and <name>.png to --out.

--pg, --jobs-option and --skiplock are for trying levers (a server setting, ALTER TABLE jobs SET
(...) after the migrations, a SKIPLOCK_* worker setting); what was used is written into the results.
Not collected by pytest (no test_ prefix).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import signal
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
import psycopg

from skiplock.tools import bench
from skiplock.tools.bench import BENCH_QUEUE, PROBE_EVERY, ProbeReceiver, percentile, scratch_database, steady_payload
from tests.benchmarks import compare

REPO = Path(__file__).resolve().parents[2]
POINTS = [10, 25, 50, 75, 90]
SYSTEMS = ["skiplock", "pgqueuer-b50", "celery-redis"]
TICK = 0.02  # the producer's pacing: one batch of due jobs every 20 ms, as compare.py's steady state
# 100,000: a 20,000-job drain lasts under a second and measures the start more than the rate
# (skiplock 24,603 jobs/s from 20,000 jobs, 41,540 from 100,000, the raw psycopg loop 40,374).
DRAIN_JOBS = {"full": 100_000, "quick": 5000}
# The capacity is the median of 3 drains, each on a fresh database: one drain on the new cluster
# once gave skiplock 22,575 jobs/s where the comparison runner's three gave 42,779-44,537 (and the run
# before, 41,251), and every point of that run then offered half the load it should have.
CAPACITY_DRAINS = 3
# Celery drains ~10-20x slower here (compare.py): 100,000 jobs outlast celery_peer.drain's timeout
# (jobs / 200 s) on a busy machine, so its capacity drain is smaller.
DRAIN_DIVISOR = {"celery-redis": 4}


# ---- per-system adapters: start workers, send jobs, count the backlog --------------------------


class Adapter:
    """One system under load: its workers, its producer and its backlog query."""

    name = ""
    table = ""  # the queue table whose vacuum is sampled ("" for Redis)
    # job `seq`'s payload, sent at `stamp`: every PROBE_EVERY-th reports its start (bursts.py: every one)
    payload: Callable[[int, float], dict[str, Any]] = staticmethod(steady_payload)

    def __init__(self, url: str, probe_port: int, options: dict[str, str]) -> None:
        self.url, self.probe_port, self.options = url, probe_port, options

    def workers(self) -> contextlib.AbstractContextManager[None]:
        raise NotImplementedError

    def send(self, first: int, n: int, stamp: float) -> None:
        raise NotImplementedError

    def backlog(self, mon: psycopg.Connection[Any] | None) -> int:
        raise NotImplementedError

    def close(self) -> None:
        """Release the producer's connection."""


class SkiplockLoad(Adapter):
    name, table = "skiplock", "jobs"

    def __init__(self, url: str, probe_port: int, options: dict[str, str]) -> None:
        super().__init__(url, probe_port, options)
        self.conn = psycopg.connect(url, autocommit=True)

    def workers(self) -> contextlib.AbstractContextManager[None]:
        settings: dict[str, Any] = {"concurrency": 50, "batch_size": 50, **self.options}
        return bench.skiplock_workers(self.url, 2, self.probe_port, **settings)

    def send(self, first: int, n: int, stamp: float) -> None:
        from skiplock.core.producer import enqueue_many

        enqueue_many([(BENCH_QUEUE, self.payload(first + i, stamp)) for i in range(n)], conn=self.conn)

    def backlog(self, mon: psycopg.Connection[Any] | None) -> int:
        assert mon is not None
        return int(mon.execute("SELECT count(*) FROM jobs WHERE status = 'queued'").fetchone()[0])  # type: ignore[index]

    def close(self) -> None:
        self.conn.close()


class PgQueuerLoad(Adapter):
    name, table = "pgqueuer-b50", "pgqueuer"

    def __init__(self, url: str, probe_port: int, options: dict[str, str]) -> None:
        super().__init__(url, probe_port, options)
        self.loop = asyncio.new_event_loop()  # asyncpg needs one; the producer drives it tick by tick
        self.conn, self.q = self.loop.run_until_complete(compare._pgq_queries(url))

    @contextlib.contextmanager
    def workers(self) -> Iterator[None]:
        procs = compare.peer_procs("pgqueuer", self.url, 2, 50, self.probe_port)
        try:
            compare.wait_backends(self.url, 2, procs)
            yield
        finally:
            compare.stop(procs)

    def send(self, first: int, n: int, stamp: float) -> None:
        payloads = [json.dumps(self.payload(first + i, stamp)).encode() for i in range(n)]
        self.loop.run_until_complete(self.q.enqueue(["bench"] * n, payloads, [0] * n))

    def backlog(self, mon: psycopg.Connection[Any] | None) -> int:
        assert mon is not None
        return int(mon.execute("SELECT count(*) FROM pgqueuer WHERE status = 'queued'").fetchone()[0])  # type: ignore[index]

    def close(self) -> None:
        self.loop.run_until_complete(self.conn.close())
        self.loop.close()


class CeleryLoad(Adapter):
    """Celery on Redis, `--pool=solo` x2 (compare.py's celery-redis); the payload travels as kwargs."""

    name = "celery-redis"

    def __init__(self, url: str, probe_port: int, options: dict[str, str]) -> None:
        super().__init__(url, probe_port, options)
        from tests.benchmarks import celery_peer

        self.peer = celery_peer
        celery_peer.flush()
        self.redis = celery_peer.redis_client()
        self._producer_cm = celery_peer.app.producer_or_acquire()
        self.producer = self._producer_cm.__enter__()
        self.producer.channel.client.ping()

    def workers(self) -> contextlib.AbstractContextManager[None]:
        return self.peer.workers(2, "solo", 1, self.probe_port)

    def send(self, first: int, n: int, stamp: float) -> None:
        with self.producer.batch():
            for i in range(n):
                self.peer.bench.apply_async(kwargs=self.payload(first + i, stamp), producer=self.producer)

    def backlog(self, mon: psycopg.Connection[Any] | None) -> int:
        return int(self.redis.llen(self.peer.QUEUE))

    def close(self) -> None:
        self._producer_cm.__exit__(None, None, None)


ADAPTERS: dict[str, type[Adapter]] = {a.name: a for a in (SkiplockLoad, PgQueuerLoad, CeleryLoad)}
# Any: drain_w2 is defined by each system class of compare.py, not by their base class System.
CAPACITY: dict[str, Any] = {"skiplock": compare.Skiplock(), "pgqueuer-b50": compare.PgQueuer(50, False),
                                       "celery-redis": compare.CeleryRedis()}


# ---- the sampler: backlog, vacuum, CPU, once a second ---------------------------------------------


@dataclass
class CpuGroups:
    """CPU seconds per process group between two samples (psutil), as % of one core."""

    postmaster: int
    last: dict[int, float] = field(default_factory=dict)
    last_machine: float = 0.0
    last_t: float = 0.0

    def _groups(self) -> dict[str, list[psutil.Process]]:
        groups: dict[str, list[psutil.Process]] = {"pg_autovacuum": [], "pg_other": [], "workers": [], "bench": []}
        with contextlib.suppress(psutil.Error):
            for child in psutil.Process(self.postmaster).children():
                try:
                    title = " ".join(child.cmdline())
                except psutil.Error:
                    continue
                groups["pg_autovacuum" if "autovacuum worker" in title else "pg_other"].append(child)
        me = psutil.Process()
        groups["bench"].append(me)
        with contextlib.suppress(psutil.Error):
            groups["workers"].extend(me.children(recursive=True))
        return groups

    def sample(self) -> dict[str, float]:
        now = time.monotonic()
        times = psutil.cpu_times()
        machine = sum(times) - times.idle - getattr(times, "iowait", 0.0)
        out: dict[str, float] = {}
        seen: dict[int, float] = {}
        for name, procs in self._groups().items():
            total = 0.0
            for p in procs:
                try:
                    t = p.cpu_times()
                    created = p.create_time()
                except psutil.Error:
                    continue
                cpu = t.user + t.system
                seen[p.pid] = cpu
                # a process born since the last sample (an autovacuum worker) counts from zero
                base = self.last.get(p.pid, 0.0 if created >= time.time() - (now - self.last_t) else cpu)
                total += cpu - base
            out[name] = total
        span = now - self.last_t if self.last_t else 0.0
        result = {k: round(100 * v / span, 1) for k, v in out.items()} if span else {k: 0.0 for k in out}
        result["machine"] = round(100 * (machine - self.last_machine) / span, 1) if span else 0.0
        mine = sum(v for k, v in result.items() if k != "machine")
        result["others"] = round(max(0.0, result["machine"] - mine), 1)  # other people's work on this machine
        self.last, self.last_machine, self.last_t = seen, machine, now
        return result


STATS = ("SELECT n_live_tup, n_dead_tup, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del, autovacuum_count, "
         "pg_relation_size(relid), pg_indexes_size(relid) FROM pg_stat_user_tables WHERE relname = %s")
PROGRESS = ("SELECT p.pid, coalesce(c.relname, p.relid::text), p.phase, p.heap_blks_total, p.heap_blks_scanned, "
            "p.index_vacuum_count FROM pg_stat_progress_vacuum p LEFT JOIN pg_class c ON c.oid = p.relid")


class Sampler(threading.Thread):
    """Once a second until stopped: one timeline row (see the module docstring)."""

    def __init__(self, adapter: Adapter, url: str, postmaster: int) -> None:
        super().__init__(name="curve-sampler", daemon=True)
        self.adapter, self.url = adapter, url
        self.cpu = CpuGroups(postmaster)
        self.rows: list[dict[str, Any]] = []
        self.stop = threading.Event()
        self.start_t = time.monotonic()

    def run(self) -> None:
        self.cpu.sample()
        with psycopg.connect(self.url, autocommit=True) as mon:
            next_t = time.monotonic() + 1.0
            while not self.stop.wait(max(0.0, next_t - time.monotonic())):
                next_t += 1.0
                row: dict[str, Any] = {"t": round(time.monotonic() - self.start_t, 1)}
                row["backlog"] = self.adapter.backlog(mon)
                if self.adapter.table:
                    stats = mon.execute(STATS, (self.adapter.table,)).fetchone()
                    if stats:
                        keys = ("live", "dead", "ins", "upd", "hot_upd", "del", "autovacuums", "heap_bytes",
                                "index_bytes")
                        row.update(dict(zip(keys, (int(v) for v in stats), strict=True)))
                row["vacuum"] = [dict(zip(("pid", "table", "phase", "heap_blks", "scanned", "index_passes"), r,
                                          strict=True)) for r in mon.execute(PROGRESS)]
                row["cpu"] = self.cpu.sample()
                row["load1"] = os.getloadavg()[0]
                self.rows.append(row)


# ---- the autovacuum log ---------------------------------------------------------------------------

_AV = re.compile(r'^(\S+ \S+) \S+ \[\d+\] LOG:  automatic vacuum of table "([^"]+)": index scans: (\d+)(.*?)'
                 r"system usage: CPU: user: ([\d.]+) s, system: ([\d.]+) s, elapsed: ([\d.]+) s", re.S | re.M)
_REMOVED = re.compile(r"tuples: (\d+) removed, (\d+) remain")


def autovacuums(log: Path, offset: int) -> list[dict[str, Any]]:
    """The autovacuum runs the server logged after byte `offset` (log_autovacuum_min_duration = 0)."""
    with open(log, errors="replace") as f:
        f.seek(offset)
        text = f.read()
    runs = []
    for m in _AV.finditer(text):
        table = m.group(2).rsplit(".", 1)[-1]
        removed = _REMOVED.search(m.group(4))
        runs.append({"at": m.group(1), "table": table, "index_scans": int(m.group(3)),
                     "cpu_s": round(float(m.group(5)) + float(m.group(6)), 2), "elapsed_s": float(m.group(7)),
                     "removed": int(removed.group(1)) if removed else None})
    return runs


# ---- one load point -------------------------------------------------------------------------------


def run_point(name: str, url: str, rate: float, seconds: float, postmaster: int, log: Path,
              skiplock_options: dict[str, str], tick: float = TICK) -> dict[str, Any]:
    """Offer `rate` jobs/s for `seconds` to `name`'s 2 worker processes, the jobs due sent every
    `tick` s; latency, backlog, timeline."""
    probe = ProbeReceiver()
    adapter = ADAPTERS[name](url, probe.port, skiplock_options if name == "skiplock" else {})
    log_offset = log.stat().st_size
    sent = 0
    late_ticks = 0
    try:
        with adapter.workers():
            sampler = Sampler(adapter, url, postmaster)
            sampler.start()
            start = time.monotonic()
            wall_start = time.time()
            while (now := time.monotonic()) - start < seconds:
                due = int(rate * (now - start)) - sent  # catch up if a tick ran late
                if due > 0:
                    adapter.send(sent, due, time.time())
                    sent += due
                spare = tick - (time.monotonic() - now)
                late_ticks += spare < 0
                time.sleep(max(0.0, spare))  # pacing the producer, not synchronisation
            produced_s = time.monotonic() - start
            missing = bench.wait_for_steady_probes(probe, sent, min(120.0, max(30.0, seconds)))
            sampler.stop.set()
            sampler.join(timeout=10)
        top_statements = statements(url)
    finally:
        probe.close()
        adapter.close()
    samples = dict(probe.samples)
    lat = [(st - enq) * 1000 for enq, st in samples.values()]
    # p99 of the probes by the second they were enqueued: when, in the run, the tail happened
    by_second: dict[int, list[float]] = {}
    for enq, st in samples.values():
        by_second.setdefault(int(enq - wall_start), []).append((st - enq) * 1000)
    timeline = sampler.rows
    for row in timeline:
        second = by_second.get(int(row["t"]) - 1, [])
        row["p99_ms"] = round(percentile(second, 99), 1) if second else None
    producing = [r for r in timeline if r["t"] <= seconds + 0.5]
    return {
        "system": name, "rate": rate, "seconds": seconds, "sent": sent, "sent_per_s": sent / produced_s,
        "late_ticks": late_ticks, "probes": len(lat), "missing": missing,
        "p50_ms": percentile(lat, 50), "p99_ms": percentile(lat, 99), "max_ms": max(lat) if lat else float("nan"),
        "peak_backlog": max((r["backlog"] for r in timeline), default=0),
        "load1_mean": statistics.mean(r["load1"] for r in producing) if producing else None,
        "load1_max": max((r["load1"] for r in producing), default=None),
        "cpu_mean": {k: round(statistics.mean(r["cpu"][k] for r in producing), 1)
                     for k in (producing[0]["cpu"] if producing else {})},
        "hot_update_share": _hot_share(timeline),
        "autovacuums": [a for a in autovacuums(log, log_offset) if a["table"] in (adapter.table or "-")],
        "statements": top_statements,
        "timeline": timeline,
    }


# With --pg shared_preload_libraries=pg_stat_statements (and pg_stat_statements.track_planning=on):
# the point's busiest statements, so a lever's effect on planning and execution shows per statement.
TOP_STATEMENTS = """
SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), 80), calls, plans,
       round(total_plan_time::numeric, 1), round(total_exec_time::numeric, 1), shared_blks_hit, shared_blks_read
  FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
 ORDER BY total_plan_time + total_exec_time DESC LIMIT 8
"""


def statements(url: str) -> list[dict[str, Any]]:
    """The point database's top statements by plan + execution time; [] without pg_stat_statements."""
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            rows = conn.execute(TOP_STATEMENTS).fetchall()
    except psycopg.Error:
        return []  # the library is not preloaded on this cluster: nothing to report
    keys = ("query", "calls", "plans", "plan_ms", "exec_ms", "blks_hit", "blks_read")
    return [dict(zip(keys, (float(v) if i in (3, 4) else v for i, v in enumerate(row)), strict=True))
            for row in rows]


def _hot_share(timeline: list[dict[str, Any]]) -> float | None:
    rows = [r for r in timeline if "upd" in r]
    if not rows or not rows[-1]["upd"]:
        return None
    return round(rows[-1]["hot_upd"] / rows[-1]["upd"], 4)


def backlog_drain(cluster_url: str, jobs: int, seconds: float, skiplock_options: dict[str, Any]) -> dict[str, Any]:
    """skiplock's 2 workers facing `jobs` queued no-op jobs (ANALYZEd): how many they finish in `seconds`.

    The situation after a backlog built up: a drain as compare.py's, with the table's statistics
    showing the backlog (autovacuum's ANALYZE would, within a naptime), timed over a fixed window
    so a slow drain ends too.
    """
    with point_database(cluster_url, "skiplock", {}) as url:
        bench.seed_jobs(url, jobs)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ANALYZE jobs")
            with bench.skiplock_workers(url, 2, concurrency=50, batch_size=50, **skiplock_options):
                started = time.monotonic()
                done = 0
                while time.monotonic() - started < seconds:
                    time.sleep(0.5)  # a fixed window: the count at its end is the result
                    done = int(conn.execute("SELECT coalesce(sum(completed), 0) FROM job_stats WHERE queue = %s",
                                            (BENCH_QUEUE,)).fetchone()[0])  # type: ignore[index]
                    if done >= jobs:
                        break
                elapsed = time.monotonic() - started
    return {"backlog": jobs, "seconds": elapsed, "done": done, "jobs_per_s": done / elapsed,
            "load1": os.getloadavg()[0]}


# ---- the run ----------------------------------------------------------------------------------------


def _pairs(items: list[str]) -> dict[str, str]:
    return dict(item.split("=", 1) for item in items)


@contextlib.contextmanager
def private_cluster(pg_settings: dict[str, str]) -> Iterator[Any]:
    """A throwaway cluster with stock settings, autovacuum on, every autovacuum logged, plus `pg_settings`."""
    from tests.support.pgcluster import ThrowawayCluster

    cluster = ThrowawayCluster()
    try:
        cluster.reconfigure(pg_settings, "autovacuum = on\nlog_autovacuum_min_duration = 0\n")
        yield cluster
    finally:
        cluster.destroy()


def postmaster_pid(cluster: Any) -> int:
    return int((cluster.datadir / "postmaster.pid").read_text().split()[0])


@contextlib.contextmanager
def point_database(cluster_url: str, name: str, jobs_options: dict[str, str]) -> Iterator[str]:
    """A fresh database for one point: skiplock's migrations (plus `jobs_options`), or PgQueuer's schema."""
    with scratch_database(cluster_url, prefix=f"curve_{name.replace('-', '_')}", migrate=name == "skiplock") as url:
        if name == "skiplock" and jobs_options:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("ALTER TABLE jobs SET (" + ", ".join(f"{k} = {v}" for k, v in jobs_options.items()) + ")")
        CAPACITY[name].setup(url)
        yield url


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=180.0, help="seconds of offered load per point")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 5 s per point, a 5,000-job capacity drain")
    parser.add_argument("--points", default=",".join(map(str, POINTS)), help="offered load, %% of capacity")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--out", default=str(REPO / "tests/benchmarks/results"))
    parser.add_argument("--name", default="curve", help="file name stem of the results")
    parser.add_argument("--pg", action="append", default=[], help="server setting name=value (a lever)")
    parser.add_argument("--jobs-option", action="append", default=[], help="ALTER TABLE jobs SET name=value")
    parser.add_argument("--skiplock", action="append", default=[], help="SKIPLOCK_<NAME> worker setting name=value")
    parser.add_argument("--capacity", action="append", default=[],
                        help="system=jobs_per_s: skip that system's capacity drain and use this figure")
    parser.add_argument("--tick", type=float, default=TICK * 1000,
                        help="ms between the producer's sends (each sends the jobs due since the last)")
    parser.add_argument("--backlog", type=int, default=0,
                        help="instead of the curve: skiplock's drain of this many queued jobs over --seconds")
    args = parser.parse_args(argv)
    # SIGTERM (kill, nohup runs) unwinds like Ctrl-C: the private cluster and the workers are stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    seconds = 5.0 if args.quick else args.seconds
    points = [int(p) for p in args.points.split(",")]
    systems = [s for s in args.systems.split(",") if s]
    pg_settings, jobs_options, skiplock_options = _pairs(args.pg), _pairs(args.jobs_option), _pairs(args.skiplock)
    given = {k: float(v) for k, v in _pairs(args.capacity).items()}
    began = time.monotonic()

    def say(text: str) -> None:
        print(f"[{time.monotonic() - began:6.0f}s load {os.getloadavg()[0]:.1f}] {text}", file=sys.stderr, flush=True)

    results: dict[str, Any] = {"capacity": {}, "points": []}
    errors: list[str] = []
    with private_cluster(pg_settings) as cluster:
        postmaster = postmaster_pid(cluster)
        log = cluster.root / "log"
        facts = bench.server_facts(cluster.url)
        with psycopg.connect(cluster.url, autocommit=True) as conn:
            for setting in ("autovacuum", "autovacuum_naptime", "autovacuum_vacuum_cost_delay",
                            "autovacuum_vacuum_cost_limit", "autovacuum_max_workers", *pg_settings):
                facts[setting] = conn.execute(f"SHOW {setting}").fetchone()[0]  # type: ignore[index]
        if args.backlog:
            say(f"skiplock: a backlog of {args.backlog:,} jobs, {seconds:.0f} s")
            result = backlog_drain(cluster.url, args.backlog, seconds, skiplock_options)
            say(f"  {result['done']:,} done in {result['seconds']:.1f} s: {result['jobs_per_s']:,.0f} jobs/s")
            facts.update(compare.versions(), date=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
                         skiplock_module=bench.__file__)
            out = Path(args.out)
            out.mkdir(parents=True, exist_ok=True)
            (out / f"{args.name}.json").write_text(json.dumps({"facts": facts, "backlog": result}, indent=1))
            return 0
        for name in systems:
            if name in given:
                results["capacity"][name] = {"jobs_per_s": given[name], "given": True}
                continue
            say(f"capacity: {name}")
            jobs = DRAIN_JOBS["quick" if args.quick else "full"] // DRAIN_DIVISOR.get(name, 1)
            try:
                drains = []
                for _ in range(CAPACITY_DRAINS):
                    with point_database(cluster.url, name, jobs_options) as url:
                        drains.append(CAPACITY[name].drain_w2(url, {"drain": jobs}, {}))
                drains.sort(key=lambda d: d["jobs_per_s"])
                results["capacity"][name] = {**drains[len(drains) // 2],
                                             "drains_jobs_per_s": [round(d["jobs_per_s"]) for d in drains]}
            except Exception as exc:
                errors.append(f"{name} capacity: {type(exc).__name__}: {exc}")
                say(f"FAILED {errors[-1]}")
            else:
                say(f"capacity {name}: {results['capacity'][name]['jobs_per_s']:,.0f} jobs/s "
                    f"(drains {results['capacity'][name]['drains_jobs_per_s']})")
        for pct in points:
            for name in systems:
                cap = results["capacity"].get(name)
                if not cap:
                    continue
                rate = round(cap["jobs_per_s"] * pct / 100)
                say(f"{name} at {pct}% = {rate:,}/s for {seconds:.0f} s")
                try:
                    with point_database(cluster.url, name, jobs_options) as url:
                        point = run_point(name, url, rate, seconds, postmaster, log, skiplock_options,
                                          args.tick / 1000)
                except Exception as exc:
                    errors.append(f"{name} at {pct}%: {type(exc).__name__}: {exc}")
                    say(f"FAILED {errors[-1]}")
                    continue
                point["pct"] = pct
                results["points"].append(point)
                say(f"  p50 {point['p50_ms']:.1f} ms, p99 {point['p99_ms']:.1f} ms, max {point['max_ms']:.0f} ms, "
                    f"peak backlog {point['peak_backlog']:,}, missing {point['missing']:,}, "
                    f"autovacuums {len(point['autovacuums'])}, load {point['load1_mean'] or 0:.1f}")
    facts.update(compare.versions())
    facts.update(date=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), seconds_per_point=seconds,
                 wall_seconds=round(time.monotonic() - began), errors=errors, pg_settings=pg_settings,
                 jobs_options=jobs_options, skiplock_options=skiplock_options, probe_every=PROBE_EVERY,
                 tick_ms=args.tick,
                 skiplock_module=bench.__file__,  # which skiplock ran (a PYTHONPATH checkout of another commit?)
                 command=" ".join(["python -m tests.benchmarks.curve", *(argv if argv is not None else sys.argv[1:])]))
    results["facts"] = facts
    from tests.benchmarks.report import curve_markdown, curve_plot, write_results

    out = write_results(args.out, args.name, results, curve_markdown(results))
    curve_plot(results, out / f"{args.name}.png")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
