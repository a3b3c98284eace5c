"""`skiplock bench`: measure skiplock alone against any PostgreSQL, so users can size their own.

Each workload is one function returning a dict of figures; tests/benchmarks/compare.py reuses
them for the side-by-side run. Workers are real `python -m skiplock` processes running
skiplock.tools.bench_tasks; handler start times come back over loopback UDP (ProbeReceiver), so the
measurement adds no database work. Commits stay durable (synchronous_commit is not touched).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from skiplock.core.plumbing.config import load_settings
from skiplock.core.sql import queries
from skiplock.tools import bench_seed
from skiplock.tools.commands import command

JOBS_ENQUEUE_SQL = queries("jobs_enqueue")

# The queue the bench handler (skiplock.tools.bench_tasks) serves. That module is imported only by the
# bench's own worker processes: importing it here would register the handler in every
# `skiplock` process, since the CLI imports this module for its command.
BENCH_QUEUE = "skiplock_bench"


# ---- databases --------------------------------------------------------------------------------


def with_database(url: str, dbname: str) -> str:
    """`url` pointing at another database on the same server."""
    params = conninfo_to_dict(url)
    params["dbname"] = dbname
    return make_conninfo("", **params)


@contextlib.contextmanager
def scratch_database(url: str, prefix: str = "skiplock_bench", migrate: bool = True) -> Iterator[str]:
    """A new empty database on `url`'s server (migrated unless told not to), dropped afterwards."""
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    scratch = with_database(url, name)
    try:
        if migrate:
            from skiplock.core.plumbing.migrate import apply_migrations

            apply_migrations(scratch)
        yield scratch
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def server_facts(url: str) -> dict[str, Any]:
    """The settings that decide the numbers: version, durability, memory, CPUs."""
    names = ("server_version", "synchronous_commit", "fsync", "wal_sync_method", "shared_buffers",
             "max_connections", "work_mem")
    with psycopg.connect(url, autocommit=True) as conn:
        facts: dict[str, Any] = {n: conn.execute(f"SHOW {n}").fetchone()[0] for n in names}  # type: ignore[index]
    facts.update({"cpu_count": os.cpu_count(), "python": platform.python_version(),
                  "psycopg": psycopg.__version__, "machine": platform.machine(),
                  "kernel": platform.release()})
    return facts


def clear_jobs(url: str) -> None:
    """Empty the bench queue's rows and stats so the next workload starts from nothing."""
    with psycopg.connect(url, autocommit=True) as conn:
        bench_seed.delete_queue(conn, BENCH_QUEUE)
        conn.execute("VACUUM ANALYZE jobs")


def counted(url: str) -> dict[str, int]:
    """What the database holds for the bench queue: jobs still in the table, and acks by outcome in
    job_stats. A workload reports these beside the count it asked for, so a lost job shows."""
    with psycopg.connect(url, autocommit=True) as conn:
        left = conn.execute("SELECT count(*) FROM jobs WHERE queue = %s", (BENCH_QUEUE,)).fetchone()
        acks = conn.execute("SELECT coalesce(sum(completed), 0), coalesce(sum(failed + dead), 0) FROM job_stats "
                            "WHERE queue = %s", (BENCH_QUEUE,)).fetchone()
    return {"stored": int(left[0]) if left else 0, "completed": int(acks[0]) if acks else 0,
            "failed": int(acks[1]) if acks else 0}


def wait_until(condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.01) -> Any:
    """Poll `condition` until truthy; raise TimeoutError naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100) by nearest rank; NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[index]


def latency_summary(probe: Any, committed: dict[int, float], jobs: int,
                    called: dict[int, float] | None = None) -> dict[str, Any]:
    """Pickup latencies (ms) from the producer call's return (`committed`) to the handler's start, as
    p50/p99/max; with `called`, the stamps taken just before each call, also from the call's start.

    From the return is the usual measure, but a job handed to an idle worker in the producer's
    transaction can start before the producer's process has run again after its commit: then it is
    negative, and the producer's own scheduling sets the tail. From the call's start includes the
    enqueue itself (the INSERT and a durable commit for PostgreSQL), and never goes below zero."""
    lat = [(probe.samples[s][1] - committed[s]) * 1000 for s in committed if s in probe.samples]
    summary = {"jobs": jobs, "received": len(lat), "p50_ms": percentile(lat, 50), "p99_ms": percentile(lat, 99),
               "max_ms": max(lat) if lat else float("nan")}
    if called:
        whole = [(probe.samples[s][1] - called[s]) * 1000 for s in called if s in probe.samples]
        summary.update(p50_call_ms=percentile(whole, 50), p99_call_ms=percentile(whole, 99))
    return summary


# ---- probes: handler start times over loopback UDP ---------------------------------------------


class ProbeReceiver:
    """Collects (seq, enqueued_at, started_at) datagrams from handlers in any process."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        # a large buffer so a burst of 100k probes is not dropped while this thread is descheduled
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024 * 1024)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port: int = self.sock.getsockname()[1]
        self.samples: dict[int, tuple[float, float]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-probe", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data = self.sock.recv(256)
            except TimeoutError:
                continue
            seq, enq, started = data.split()
            self.samples[int(seq)] = (float(enq), float(started))

    def close(self) -> None:
        """Stop receiving."""
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()


# ---- worker processes -------------------------------------------------------------------------


def worker_env(url: str, probe_port: int = 0, **settings: Any) -> dict[str, str]:
    """Environment for a bench worker process: only the settings given, logs to nowhere."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKIPLOCK_")}
    env.update({"DATABASE_URL": url, "SKIPLOCK_TASKS": "skiplock.tools.bench_tasks", "SKIPLOCK_QUEUES": BENCH_QUEUE,
                "BENCH_PROBE_PORT": str(probe_port)})
    env.update({f"SKIPLOCK_{k.upper()}": str(v) for k, v in settings.items()})
    return env


@contextlib.contextmanager
def skiplock_workers(url: str, processes: int, probe_port: int = 0, **settings: Any) -> Iterator[None]:
    """Start `processes` workers, wait until each is listening, stop them (SIGTERM) at the end."""
    procs = [subprocess.Popen([sys.executable, "-m", "skiplock"], env=worker_env(url, probe_port, **settings),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(processes)]
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            def ready() -> bool:
                row = conn.execute("SELECT count(*) FILTER (WHERE application_name LIKE 'skiplock-listener%%'), "
                                   "count(*) FILTER (WHERE application_name LIKE 'skiplock-worker%%') "
                                   "FROM pg_stat_activity WHERE datname = current_database()").fetchone()
                if any(p.poll() is not None for p in procs):
                    raise RuntimeError("a bench worker exited during start-up")
                return row is not None and row[0] >= processes and row[1] >= processes
            wait_until(ready, 30, "bench workers to connect")
        yield
    finally:
        stop_processes(procs)


def stop_processes(procs: Sequence[subprocess.Popen[bytes]], grace: float = 30.0) -> None:
    """SIGTERM every process, then SIGKILL whatever is still running after `grace` seconds."""
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# The seed recipe and the steady state sample the latency of every 10th job: a probe per job
# would spend a sizeable share of the CPU being measured (the receiver alone took a good part of a
# core well below the steady state's rate).
PROBE_EVERY = 10


def steady_payload(seq: int, enqueued_at: float) -> dict[str, Any]:
    """Job `seq` of a steady-state run: every PROBE_EVERY-th reports its start, the rest are no-ops."""
    return {"p": seq, "t": enqueued_at} if seq % PROBE_EVERY == 0 else {"t": enqueued_at}


def wait_for_steady_probes(probe: ProbeReceiver, sent: int, timeout: float) -> int:
    """Wait up to `timeout` s for the probes of `sent` steady-state jobs; return ~how many jobs never started.

    A system that fell behind its offered rate may still be draining: that is a result to
    report (the latency of what arrived, and how much had not), not an error. Only every
    PROBE_EVERY-th job reports, so the count of jobs not started is estimated from the probes.
    """
    expected = (sent + PROBE_EVERY - 1) // PROBE_EVERY
    with contextlib.suppress(TimeoutError):
        wait_until(lambda: len(probe.samples) >= expected, timeout, "the last steady-state jobs")
    return max(0, expected - len(probe.samples)) * PROBE_EVERY


def wait_acked(url: str, jobs: int, timeout: float) -> float:
    """Block until skiplock has acked `jobs` bench jobs; return the monotonic time it was first seen.

    Polls job_stats, which each ack batch updates in the same transaction that deletes its jobs,
    so "all acked" there is "the queue is empty" in `jobs`. Asking `jobs` itself every 5 ms costs
    far more: a drained table is all dead rows, and each poll walked them (PostgreSQL CPU taken
    from the system being measured).
    """
    with psycopg.connect(url, autocommit=True) as conn:
        def acked() -> bool:
            row = conn.execute("SELECT coalesce(sum(completed + failed + dead), 0) FROM job_stats "
                               "WHERE queue = %s", (BENCH_QUEUE,)).fetchone()
            return row is not None and row[0] >= jobs
        wait_until(acked, timeout, "every bench job to be acked", interval=0.005)
        done = time.monotonic()
        left = conn.execute("SELECT count(*) FROM jobs WHERE queue = %s", (BENCH_QUEUE,)).fetchone()
    if left and left[0]:
        raise RuntimeError(f"job_stats counted {jobs} acks but {left[0]} bench jobs are still in the table")
    return done


def wait_empty(url: str, timeout: float, table: str = "jobs") -> float:
    """Block until `table` has no rows; return the monotonic time it was first seen empty."""
    with psycopg.connect(url, autocommit=True) as conn:
        wait_until(lambda: conn.execute(f"SELECT NOT EXISTS (SELECT 1 FROM {table})").fetchone()[0],  # type: ignore[index]
                   timeout, f"{table} to drain", interval=0.005)
    return time.monotonic()


# ---- workloads --------------------------------------------------------------------------------


def _split(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def _run_threads(counts: list[int], body: Callable[[int], None]) -> float:
    """Run body(count) in one thread per count, all released together; return the elapsed seconds."""
    barrier = threading.Barrier(len(counts) + 1)
    errors: list[BaseException] = []

    def run(n: int) -> None:
        barrier.wait()
        try:
            body(n)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(n,)) for n in counts]
    for t in threads:
        t.start()
    barrier.wait()
    started = time.perf_counter()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return time.perf_counter() - started


def enqueue_single(url: str, jobs: int, producers: int) -> dict[str, Any]:
    """Workload 1: skiplock.enqueue, one job per transaction, from `producers` threads."""
    from skiplock.core.producer import enqueue

    def body(n: int) -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            for i in range(n):
                enqueue(BENCH_QUEUE, {"n": i}, conn=conn)

    elapsed = _run_threads(_split(jobs, producers), body)
    return {"jobs": jobs, "producers": producers, "seconds": elapsed, "jobs_per_s": jobs / elapsed,
            "stored": counted(url)["stored"]}


def raw_insert_single(url: str, jobs: int, producers: int) -> dict[str, Any]:
    """Workload 1's floor: a plain INSERT per transaction into the same table."""
    def body(n: int) -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            for i in range(n):
                conn.execute(JOBS_ENQUEUE_SQL.sql_producer_insert,
                             {"queue": BENCH_QUEUE, "payload": json.dumps({"n": i})})

    elapsed = _run_threads(_split(jobs, producers), body)
    return {"jobs": jobs, "producers": producers, "seconds": elapsed, "jobs_per_s": jobs / elapsed,
            "stored": counted(url)["stored"]}


def enqueue_bulk(url: str, jobs: int) -> dict[str, Any]:
    """Workload 2: skiplock.enqueue_many of `jobs` jobs in one call (validation included)."""
    from skiplock.core.producer import enqueue_many

    items = [(BENCH_QUEUE, {"n": i}) for i in range(jobs)]
    with psycopg.connect(url, autocommit=True) as conn:
        started = time.perf_counter()
        ids = enqueue_many(items, conn=conn)
        elapsed = time.perf_counter() - started
    if len(ids) != jobs:
        raise RuntimeError(f"bulk enqueue wrote {len(ids)} of {jobs} jobs")
    return {"jobs": jobs, "seconds": elapsed, "jobs_per_s": jobs / elapsed, "stored": counted(url)["stored"]}


def seed_jobs(url: str, jobs: int, *, recipe: bool = False) -> float:
    """Insert `jobs` ready jobs with one SQL statement (the seed's way); return the commit time.

    `recipe`: seed 000's mix, random priorities and 2-5 ms handlers, every PROBE_EVERY-th job a probe."""
    with psycopg.connect(url, autocommit=True) as conn:
        bench_seed.seed_ready_jobs(conn, BENCH_QUEUE, jobs, recipe=recipe, probe_every=PROBE_EVERY)
        return time.monotonic()


def drain(url: str, jobs: int, processes: int, concurrency: int = 50, batch: int = 50) -> dict[str, Any]:
    """Workload 3: idle workers, then `jobs` no-op jobs committed at once; time until all are gone."""
    clear_jobs(url)
    with skiplock_workers(url, processes, concurrency=concurrency, batch_size=batch):
        committed = seed_jobs(url, jobs)
        done = wait_acked(url, jobs, timeout=max(60.0, jobs / 100))
    elapsed = done - committed
    return {"jobs": jobs, "processes": processes, "concurrency": concurrency, "batch": batch,
            "seconds": elapsed, "jobs_per_s": jobs / elapsed, **counted(url)}


def pickup_latency(url: str, jobs: int = 300, gap: float = 0.05) -> dict[str, Any]:
    """Workload 4: one job every `gap` seconds into an idle queue; commit -> handler start."""
    from skiplock.core.producer import enqueue

    clear_jobs(url)
    probe = ProbeReceiver()
    committed: dict[int, float] = {}
    called: dict[int, float] = {}
    try:
        with skiplock_workers(url, 1, probe.port), psycopg.connect(url, autocommit=True) as conn:
            for seq in range(jobs):
                called[seq] = time.time()
                enqueue(BENCH_QUEUE, {"p": seq, "t": 0}, conn=conn)
                committed[seq] = time.time()
                time.sleep(gap)  # pacing the producer, not synchronisation
            wait_until(lambda: len(probe.samples) >= jobs, 10, "every probe")
    finally:
        probe.close()
    return latency_summary(probe, committed, jobs, called)


def claim_rtt(url: str, batch: int = 50, samples: int = 20) -> float:
    """Median seconds of one real claim of `batch` jobs, commit (WAL flush) included.

    The jobs live in a side queue no bench worker serves and are deleted afterwards.
    """
    from skiplock.core import state_changes

    side = BENCH_QUEUE + "_rtt"
    with psycopg.connect(url, autocommit=True) as conn:
        bench_seed.seed_ready_jobs(conn, side, batch * samples)
        times = []
        for _ in range(samples):
            started = time.perf_counter()
            state_changes.claim(conn, "bench-rtt", [side], [30.0], batch)
            times.append(time.perf_counter() - started)
        bench_seed.delete_queue(conn, side)
    return statistics.median(times)


def recipe(url: str, jobs: int = 100_000, parallelism: int = 32, batch: int = 50, processes: int = 2,
           handle_seconds: float = 0.0035) -> dict[str, Any]:
    """Workload 5, seed 000's recipe: random priorities, 2-5 ms handlers, parallelism 32, batch 50."""
    clear_jobs(url)
    rtt = claim_rtt(url, batch)
    probe = ProbeReceiver()
    try:
        with skiplock_workers(url, processes, probe.port, concurrency=parallelism // processes,
                              batch_size=batch):
            seeded_wall = time.time()
            committed = seed_jobs(url, jobs, recipe=True)
            done = wait_acked(url, jobs, timeout=max(120.0, jobs / 200))
            with psycopg.connect(url, autocommit=True) as conn:
                reaped = conn.execute("SELECT coalesce(sum(reaped), 0) FROM job_stats").fetchone()[0]  # type: ignore[index]
    finally:
        probe.close()
    elapsed = done - committed
    waits = [(started - seeded_wall) * 1000 for _enq, started in probe.samples.values()]
    # The seed's formula: each of `parallelism` slots runs its jobs one after another, and pays a
    # claim round trip once per batch, so a slot spends handle + rtt/batch per job.
    envelope = parallelism / (handle_seconds + rtt / batch)
    rate = jobs / elapsed
    return {"jobs": jobs, "parallelism": parallelism, "batch": batch, "processes": processes,
            "seconds": elapsed, "jobs_per_s": rate, "claim_rtt_ms": rtt * 1000, "envelope_jobs_per_s": envelope,
            "of_envelope": rate / envelope, "p99_wait_ms": percentile(waits, 99), "probes": len(waits),
            "reaped": int(reaped), "reaped_pct": 100.0 * int(reaped) / jobs}


def steady(url: str, rate: float, seconds: float = 60.0, processes: int = 2, tick: float = 0.02,
           concurrency: int = 50, batch: int = 50) -> dict[str, Any]:
    """Workload 6: producers at a fixed rate; end-to-end latency and queue depth over time."""
    from skiplock.core.producer import enqueue_many

    clear_jobs(url)
    probe = ProbeReceiver()
    depth: list[tuple[float, int]] = []
    sent = 0
    try:
        with skiplock_workers(url, processes, probe.port, concurrency=concurrency, batch_size=batch), \
                psycopg.connect(url, autocommit=True) as conn, psycopg.connect(url, autocommit=True) as mon:
            start = time.monotonic()
            next_sample = start
            while (now := time.monotonic()) - start < seconds:
                due = int(rate * (now - start)) - sent  # catch up if a tick ran late
                if due > 0:
                    stamp = time.time()
                    enqueue_many([(BENCH_QUEUE, steady_payload(sent + i, stamp)) for i in range(due)], conn=conn)
                    sent += due
                if now >= next_sample:
                    count = mon.execute("SELECT count(*) FROM jobs WHERE status = 'queued'").fetchone()[0]  # type: ignore[index]
                    depth.append((round(now - start, 2), int(count)))
                    next_sample += 0.5
                time.sleep(max(0.0, tick - (time.monotonic() - now)))  # pacing
            missing = wait_for_steady_probes(probe, sent, max(30.0, seconds))
    finally:
        probe.close()
    lat = [(started - enq) * 1000 for enq, started in probe.samples.values()]
    return {"rate": rate, "seconds": seconds, "sent": sent, "received": len(lat), "missing": missing,
            "p50_ms": percentile(lat, 50), "p99_ms": percentile(lat, 99), "depth": depth}


# ---- the command -------------------------------------------------------------------------------


def run_suite(url: str, quick: bool = False) -> dict[str, Any]:
    """The workloads `skiplock bench` runs, sized small with `quick`."""
    n_single, n_bulk, n_drain, n_lat = (50, 500, 500, 10) if quick else (2000, 20_000, 20_000, 300)
    results: dict[str, Any] = {}
    for producers in (1, 4):
        clear_jobs(url)
        results[f"enqueue_single_p{producers}"] = enqueue_single(url, n_single, producers)
        clear_jobs(url)
        results[f"raw_insert_single_p{producers}"] = raw_insert_single(url, n_single, producers)
    clear_jobs(url)
    results["enqueue_bulk"] = enqueue_bulk(url, n_bulk)
    for processes in (1, 2):
        results[f"drain_w{processes}"] = drain(url, n_drain, processes)
    results["pickup_latency"] = pickup_latency(url, n_lat)
    clear_jobs(url)
    return results


def format_table(results: dict[str, Any]) -> str:
    """The results as a plain-text table: one row per workload, the figures that matter."""
    lines = [f"{'workload':<26} {'jobs':>8} {'seconds':>9} {'jobs/s':>10}  other"]
    for name, r in results.items():
        other = ", ".join(f"{k}={v:.2f}" for k, v in r.items() if k.endswith("_ms"))
        rate = f"{r['jobs_per_s']:>10.0f}" if "jobs_per_s" in r else f"{'':>10}"
        secs = f"{r['seconds']:>9.3f}" if "seconds" in r else f"{'':>9}"
        lines.append(f"{name:<26} {r.get('jobs', ''):>8} {secs} {rate}  {other}")
    return "\n".join(lines)


def _bench_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON to FILE")
    p.add_argument("--quick", action="store_true", help="small workloads (a smoke run of a few seconds)")
    p.add_argument("--in-place", action="store_true",
                   help="use DATABASE_URL itself instead of a scratch database (adds and deletes rows of "
                        f"queue {BENCH_QUEUE!r} only; needs the schema migrated)")


@command("bench", "measure enqueue, drain and pickup latency against DATABASE_URL's server", _bench_args)
def _bench(args: argparse.Namespace) -> int:
    url = load_settings().require_database_url()
    if args.in_place:
        print(f"warning: benchmarking inside {conninfo_to_dict(url).get('dbname')!r}: rows of queue "
              f"{BENCH_QUEUE!r} are written and deleted, and its load will be felt by anything else there",
              file=sys.stderr)
        ctx: contextlib.AbstractContextManager[str] = contextlib.nullcontext(url)
    else:
        ctx = scratch_database(url)
    with ctx as bench_url:
        facts = server_facts(bench_url)
        results = run_suite(bench_url, quick=args.quick)
    print(f"PostgreSQL {facts['server_version']}, synchronous_commit={facts['synchronous_commit']}, "
          f"{facts['cpu_count']} CPUs")
    print(format_table(results))
    if args.json:
        Path(args.json).write_text(json.dumps({"server": facts, "results": results}, indent=2))
    return 0
