"""Flow-control benchmarks (issue 15), each a ratio or a time measured within one run.

    python -m tests.benchmarks.flow [--quick] [--reps 3] [--out tests/benchmarks/results]

- keys: drain rate of no-op jobs with 20% of them carrying a lock key (1,000 keys), over the
  drain rate without keys; 2 worker processes. Target ratio >= 0.9.
- limits: drain rate of an unlimited queue while a limited queue (concurrency 4, 200/s) has a
  backlog of 2-5 ms jobs, worked by the same processes, over the same drain with that second
  queue's backlog the same but unlimited and paused. Target ratio >= 0.9 (river#1145 lost half).
  The baseline holds the backlog because the backlog alone costs the drain: the unlimited queue's
  jobs sort before it in jobs_ready_idx, so their inserts split leaf pages in the middle (half
  full) rather than at the right edge, and each claim walks twice the pages of claimed, dead
  entries at the queue's head (pg_statio: 18.6-19.1 index buffer hits per job against 10.0 beside
  an empty queue). That is a cost of any second queue's backlog, not of its limit.
- fairness: with 20,000 tenant-A jobs draining, 10 tenant-B jobs are enqueued: seconds from
  their commit to the first and the last B start (UDP probes), and the same without tenants
  (B then waits behind A's backlog) for comparison.
The two sides of each ratio alternate within a repetition, in a fresh database each, so drift of
the shared machine hits both. Writes flow.json and flow.md to --out.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

from skiplock.core import state_changes
from skiplock.core.features import limits
from skiplock.tools.bench import (
    BENCH_QUEUE,
    ProbeReceiver,
    scratch_database,
    stop_processes,
    wait_acked,
    wait_until,
    worker_env,
)
from tests.benchmarks.flow_tasks import LIMITED_QUEUE

REPO = Path(__file__).resolve().parents[2]
FULL = {"drain": 120_000, "backlog": 20_000, "limited_backlog": 40_000}
QUICK = {"drain": 4000, "backlog": 4000, "limited_backlog": 4000}
PROCESSES = 2


class _CpuMeter:
    """CPU seconds spent by the bench workers and their PostgreSQL backends while it runs.

    On this shared 2-core machine the wall-clock drain rate swings with whatever else runs (the
    same drain measured 7,000-14,000 jobs/s within minutes); the CPU each job costs the system under
    test moves far less, and on a quiet machine it is what limits the CPU-bound drain. The meter
    reads utime + stime of every thread of the worker processes and of the database's backends
    from /proc, so a CPU ratio is shown beside each throughput ratio.
    """

    def __init__(self, conn: psycopg.Connection, procs: list[subprocess.Popen[bytes]]) -> None:
        self._conn = conn
        self._workers = [p.pid for p in procs]
        self._start = {pid: _cpu_seconds(pid) for pid in self._pids()}

    def _pids(self) -> list[int]:
        rows = self._conn.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                                  "AND pid <> pg_backend_pid()").fetchall()
        return self._workers + [r[0] for r in rows]

    def seconds(self) -> float:
        """CPU seconds since the meter was made (a backend that connected since counts from zero)."""
        return sum(_cpu_seconds(pid) - self._start.get(pid, 0.0) for pid in self._pids())


def _cpu_seconds(pid: int) -> float:
    """utime + stime of a process, all its threads, from /proc; 0 for a process that has gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _workers(url: str, probe_port: int = 0, queues: str = BENCH_QUEUE) -> list[subprocess.Popen[bytes]]:
    """PROCESSES bench workers (concurrency 50, batch 50) of `queues`, connected and idle."""
    env = worker_env(url, probe_port, concurrency=50, batch_size=50)
    env.update({"SKIPLOCK_TASKS": "skiplock.tools.bench_tasks,tests.benchmarks.flow_tasks", "SKIPLOCK_QUEUES": queues})
    procs = [subprocess.Popen([sys.executable, "-m", "skiplock"], env=env, cwd=REPO, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for _ in range(PROCESSES)]
    with psycopg.connect(url, autocommit=True) as conn:
        def ready() -> bool:
            if any(p.poll() is not None for p in procs):
                raise RuntimeError("a bench worker exited during start-up")
            row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                               "AND application_name LIKE 'skiplock-listener%%'").fetchone()
            return row is not None and row[0] >= PROCESSES
        wait_until(ready, 30, "bench workers to connect")
    return procs


def _drain(url: str, jobs: int, lock_keys: bool) -> tuple[float, float]:
    """Seed `jobs` no-op jobs in one statement into idle workers; (jobs/s, CPU us per job) until all are acked."""
    procs = _workers(url)
    try:
        key = "CASE WHEN g %% 5 = 0 THEN 'k' || (g %% 1000) END" if lock_keys else "NULL"
        with psycopg.connect(url, autocommit=True) as conn:
            meter = _CpuMeter(conn, procs)
            conn.execute(f"INSERT INTO jobs (queue, payload, lock_key) SELECT %s, '{{}}'::jsonb, {key} "
                         "FROM generate_series(1, %s) g", (BENCH_QUEUE, jobs))
            committed = time.monotonic()
            done = wait_acked(url, jobs, timeout=max(120.0, jobs / 50))
            cpu = meter.seconds()
    finally:
        stop_processes(procs)
    return jobs / (done - committed), cpu / jobs * 1e6


def _drain_beside_limited(url: str, jobs: int, limited_backlog: int, busy: bool) -> tuple[float, float]:
    """Drain the unlimited bench queue; the same workers also serve a second queue with a backlog:
    limited and busy, or (the baseline) unlimited and paused, so the ratio is the whole cost of the
    limit and of the limited queue's work, with the same rows in the table."""
    with psycopg.connect(url, autocommit=True) as conn:
        if busy:
            limits.set_limit(conn, LIMITED_QUEUE, concurrency=4, rate=200.0)
        else:
            state_changes.pause_queue(conn, LIMITED_QUEUE, actor="flow benchmark")
        conn.execute("INSERT INTO jobs (queue, payload) SELECT %s, '{}'::jsonb FROM generate_series(1, %s)",
                     (LIMITED_QUEUE, limited_backlog))
    procs = _workers(url, queues=f"{BENCH_QUEUE},{LIMITED_QUEUE}")
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            if busy:  # the limited queue is at work before the measured drain begins
                wait_until(lambda: conn.execute("SELECT count(*) FROM jobs WHERE queue = %s AND status = 'running'",
                                                (LIMITED_QUEUE,)).fetchone()[0] > 0, 30, "the limited queue busy")  # type: ignore[index]
            meter = _CpuMeter(conn, procs)
            conn.execute("INSERT INTO jobs (queue, payload) SELECT %s, '{}'::jsonb FROM generate_series(1, %s)",
                         (BENCH_QUEUE, jobs))
            committed = time.monotonic()
            done = wait_acked(url, jobs, timeout=max(120.0, jobs / 50))
            cpu = meter.seconds()  # the limited queue's own jobs included: the whole cost of having it
        if busy:
            with psycopg.connect(url, autocommit=True) as conn:
                left = conn.execute("SELECT count(*) FROM jobs WHERE queue = %s", (LIMITED_QUEUE,)).fetchone()
                if not left or left[0] == 0:
                    raise RuntimeError("the limited queue ran dry during the measured drain: raise its backlog")
    finally:
        stop_processes(procs)
    return jobs / (done - committed), cpu / jobs * 1e6


def _fairness(url: str, backlog: int, tenants: bool) -> dict[str, float]:
    """Seconds from the commit of 10 small-tenant jobs to their first and last start, behind a backlog."""
    probe = ProbeReceiver()
    procs = _workers(url, probe.port)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            tenant = "'A'" if tenants else "NULL"
            conn.execute(f"INSERT INTO jobs (queue, payload, tenant) SELECT %s, '{{}}'::jsonb, {tenant} "
                         "FROM generate_series(1, %s)", (BENCH_QUEUE, backlog))
            wait_until(lambda: conn.execute("SELECT count(*) FROM jobs WHERE status = 'running'").fetchone()[0] > 0,  # type: ignore[index]
                       30, "the backlog under way")
            small = "B" if tenants else None
            with conn.transaction():
                for seq in range(10):
                    conn.execute("INSERT INTO jobs (queue, payload, tenant) VALUES (%s, %s, %s)",
                                 (BENCH_QUEUE, json.dumps({"p": seq, "t": 0}), small))
            committed = time.time()
        wait_until(lambda: len(probe.samples) >= 10, max(120.0, backlog / 50), "the small tenant's 10 jobs")
    finally:
        stop_processes(procs)
        probe.close()
    starts = sorted(s[1] for s in probe.samples.values())
    return {"first_s": starts[0] - committed, "last_s": starts[-1] - committed}


def _ratio_runs(admin_url: str, reps: int, base: Callable[[str], tuple[float, float]],
                other: Callable[[str], tuple[float, float]]) -> dict[str, Any]:
    """`reps` pairs of (base, other) in alternating order, each in its own database; median ratios
    of throughput (other / base) and of CPU per job (base / other: below 1 means other costs more)."""
    pairs = []
    for rep in range(reps):
        order = [("base", base), ("other", other)] if rep % 2 == 0 else [("other", other), ("base", base)]
        got: dict[str, tuple[float, float]] = {}
        for name, run in order:
            with scratch_database(admin_url, prefix="flow_bench") as url:
                got[name] = run(url)
        pairs.append(got)
    ratios = [p["other"][0] / p["base"][0] for p in pairs]
    cpu_ratios = [p["base"][1] / p["other"][1] for p in pairs]
    return {"base_jobs_per_s": [round(p["base"][0]) for p in pairs],
            "other_jobs_per_s": [round(p["other"][0]) for p in pairs],
            "base_cpu_us_per_job": [round(p["base"][1], 1) for p in pairs],
            "other_cpu_us_per_job": [round(p["other"][1], 1) for p in pairs],
            "ratios": [round(r, 3) for r in ratios], "median_ratio": round(statistics.median(ratios), 3),
            "cpu_ratios": [round(r, 3) for r in cpu_ratios],
            "median_cpu_ratio": round(statistics.median(cpu_ratios), 3)}


def run(admin_url: str, sizes: dict[str, int], reps: int, only: set[str] | None = None) -> dict[str, Any]:
    """Every flow benchmark (or those in `only`: keys, limits, fairness)."""
    results: dict[str, Any] = {}
    if not only or "keys" in only:
        results["keys"] = _ratio_runs(admin_url, reps, lambda u: _drain(u, sizes["drain"], lock_keys=False),
                                      lambda u: _drain(u, sizes["drain"], lock_keys=True))
        print("keys", results["keys"], file=sys.stderr, flush=True)
    if not only or "limits" in only:
        results["limits"] = _ratio_runs(
            admin_url, reps,
            lambda u: _drain_beside_limited(u, sizes["drain"], sizes["limited_backlog"], busy=False),
            lambda u: _drain_beside_limited(u, sizes["drain"], sizes["limited_backlog"], busy=True))
        print("limits", results["limits"], file=sys.stderr, flush=True)
    if not only or "fairness" in only:
        runs: dict[str, list[dict[str, float]]] = {"tenants": [], "no_tenants": []}
        for _ in range(reps):
            for kind in ("tenants", "no_tenants"):
                with scratch_database(admin_url, prefix="flow_bench") as url:
                    runs[kind].append(_fairness(url, sizes["backlog"], tenants=kind == "tenants"))
        results["fairness"] = {kind: {"first_s": round(statistics.median(r["first_s"] for r in rs), 3),
                                      "last_s": round(statistics.median(r["last_s"] for r in rs), 3),
                                      "runs": rs} for kind, rs in runs.items()}
        print("fairness", results["fairness"], file=sys.stderr, flush=True)
    return results


def markdown(results: dict[str, Any], sizes: dict[str, int], reps: int) -> str:
    """The flow figures as a small Markdown table."""
    lines = [f"Flow control ({reps} repetition(s), {PROCESSES} worker processes x 50 slots, batch 50)", "",
             "| benchmark | baseline | with flow control | ratio (median) | CPU per job ratio (median) |",
             "|---|---|---|---|---|"]
    if "keys" in results:
        k = results["keys"]
        lines.append(f"| drain {sizes['drain']:,} jobs, 20% with lock keys vs none (jobs/s) | "
                     f"{k['base_jobs_per_s']} | {k['other_jobs_per_s']} | {k['median_ratio']} | "
                     f"{k['median_cpu_ratio']} ({k['base_cpu_us_per_job']} vs {k['other_cpu_us_per_job']} us) |")
    if "limits" in results:
        lim = results["limits"]
        lines.append("| unlimited queue drain beside a busy limited queue vs beside the same backlog unlimited "
                     f"and paused (jobs/s) | "
                     f"{lim['base_jobs_per_s']} | {lim['other_jobs_per_s']} | {lim['median_ratio']} | "
                     f"{lim['median_cpu_ratio']} ({lim['base_cpu_us_per_job']} vs {lim['other_cpu_us_per_job']} us) |")
    if "fairness" in results:
        f = results["fairness"]
        lines.append(f"| small tenant's 10 jobs behind {sizes['backlog']:,} of another's: commit -> first / last "
                     f"start (s) | no tenants: {f['no_tenants']['first_s']} / {f['no_tenants']['last_s']} | "
                     f"tenants: {f['tenants']['first_s']} / {f['tenants']['last_s']} | - | - |")
    return "\n".join(lines) + "\n"


def compare_hook(out: Path, admin_url: str, quick: bool, reps: int, only: str) -> None:
    """Called by compare.py: run the flow benchmarks when selected, write flow.json and flow.md."""
    chosen = {w for w in only.split(",") if w} if only else set()
    wanted = {w.removeprefix("flow_") for w in chosen if w.startswith("flow")}
    if chosen and not wanted:
        return
    sizes = QUICK if quick else FULL
    results = run(admin_url, sizes, reps, wanted - {"flow"} or None)
    out.mkdir(parents=True, exist_ok=True)
    (out / "flow.json").write_text(json.dumps({"sizes": sizes, "reps": reps, "results": results}, indent=1))
    (out / "flow.md").write_text(markdown(results, sizes, reps))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--reps", type=int, default=None)
    parser.add_argument("--only", default="", help="comma-separated: keys, limits, fairness")
    parser.add_argument("--out", default=str(REPO / "tests/benchmarks/results"))
    args = parser.parse_args(argv)
    admin_url = os.environ.get("DATABASE_URL") or "postgresql://postgres@127.0.0.1:5432/postgres"
    reps = args.reps or (1 if args.quick else 3)
    only = ",".join(f"flow_{w}" for w in args.only.split(",") if w) or "flow"
    compare_hook(Path(args.out), admin_url, args.quick, reps, only)
    print((Path(args.out) / "flow.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
