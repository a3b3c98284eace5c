"""Durable jobs' speed: step overhead, DBOS side by side, SIGKILL to resumed step, signal latency, and
100,000 parked jobs against the claims of other queues (with the plans of a wake).

    python -m tests.benchmarks.durable [--jobs 1000] [--steps 10] [--workers 2] [--signals 1000]
        [--signal-rate 100] [--parked 100000] [--dbos-concurrency 20] [--dbos-poll 0.05]
        [--kill-leases 5,30] [--only steps,dbos,signals,parked] [--out tests/benchmarks/results]

Runs on DATABASE_URL's server (default the local one); the server needs pg_stat_statements in
shared_preload_libraries to count round trips (tests/benchmarks/results/durable.md gives the private
cluster's settings). Each part runs on a fresh database of that server, dropped afterwards:
- steps: `jobs` jobs of `steps` no-op steps and the same jobs with no steps, alternating twice, each
  committed at once into `workers` idle worker processes; steps/s, and the statements and commits per step
  the database counted (pg_stat_statements, pg_stat_database) over the no-step run's.
- dbos: `jobs` ten-step workflows on DBOS (its version is reported) and `jobs` ten-step skiplock jobs,
  both enqueued while no worker runs and drained by `workers` processes; steps/s from the database's own
  timestamps (first start to last finish). Then, for each, one slow job killed with SIGKILL during its
  sixth step and a worker started at once: the time from the SIGKILL to the resumed step's start.
- signals: `signals` jobs parked on their own keys, signalled at `signal-rate` per second; p50/p99 of the
  signal's commit to the handler going on, then plain jobs enqueued at the same rate: p50/p99 pickup.
- parked: plain no-op jobs drained by `workers` processes and the median time of one real claim, with no
  parked job and with `parked` of them, alternating; the ratio of the two. Then the plans of the wake
  pass and of a signal with the parked jobs there (EXPLAIN ANALYZE; the signal function's inner
  statements through auto_explain).
Writes durable.json and durable.md to --out. Not collected by pytest (no test_ prefix).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

from skiplock.tools.bench import scratch_database, server_facts
from tests.benchmarks import durable_dbos, durable_plans
from tests.benchmarks import durable_skiplock as sk


def _with_statements(url: str) -> None:
    """pg_stat_statements in this database, where the server can have it (it counts the round trips)."""
    with psycopg.connect(url, autocommit=True) as conn:
        available = conn.execute("SELECT count(*) FROM pg_available_extensions WHERE name = 'pg_stat_statements'"
                                 ).fetchone()
        if available and available[0]:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")


def part_steps(server: str, jobs: int, steps: int, workers: int) -> dict[str, Any]:
    runs: list[dict[str, Any]] = []
    with scratch_database(server, "skiplock_durable") as url:
        _with_statements(url)
        for rep in range(2):
            order = [0, steps] if rep == 0 else [steps, 0]
            pair = {n: sk.drain(url, jobs, n, workers) for n in order}
            runs.append({"plain": pair[0], "stepped": pair[steps]})
            print(f"steps rep {rep + 1}: plain {pair[0]['jobs_per_s']:.0f} jobs/s, {steps} steps "
                  f"{pair[steps]['jobs_per_s']:.0f} jobs/s = {pair[steps]['steps_per_s']:.0f} steps/s", flush=True)
    total_steps = jobs * steps
    for run in runs:
        plain, stepped = run["plain"], run["stepped"]
        counted = None not in (stepped["statements"], plain["statements"])
        run["statements_per_step"] = (stepped["statements"] - plain["statements"]) / total_steps if counted else None
        run["commits_per_step"] = (stepped["commits"] - plain["commits"]) / total_steps
        run["ratio_jobs_per_s"] = stepped["jobs_per_s"] / plain["jobs_per_s"]
        if stepped["steps_stored"] != total_steps:
            raise RuntimeError(f"{stepped['steps_stored']} steps stored, {total_steps} expected")
    return {"runs": runs, "steps_per_s_median": statistics.median(r["stepped"]["steps_per_s"] for r in runs)}


def part_dbos(server: str, jobs: int, workers: int, concurrency: int, poll: float,
              leases: list[float]) -> dict[str, Any]:
    with scratch_database(server, "dbos_bench", migrate=False) as url:
        _with_statements(url)
        durable_dbos.migrate(url)
        dbos = durable_dbos.throughput(url, jobs, workers, concurrency, poll)
        print(f"DBOS {durable_dbos.dbos_version()}: {dbos['steps_per_s']:.0f} steps/s", flush=True)
        dbos_kill = durable_dbos.kill_resume(url, concurrency=concurrency, poll=poll)
        print(f"DBOS SIGKILL -> resumed step: {dbos_kill['kill_to_resumed_step_s']:.2f} s", flush=True)
    with scratch_database(server, "skiplock_durable") as url:
        ours = sk.with_db_window(url, jobs, 10, workers)
        print(f"skiplock: {ours['steps_per_s']:.0f} steps/s", flush=True)
        kills = [sk.kill_resume(url, lease=lease, reaper_interval=1.0) for lease in leases]
        for kill in kills:
            print(f"skiplock SIGKILL -> resumed step (lease {kill['lease_s']:.0f} s): "
                  f"{kill['kill_to_resumed_step_s']:.2f} s", flush=True)
    return {"dbos_version": durable_dbos.dbos_version(), "dbos": dbos, "skiplock": ours,
            "ratio": ours["steps_per_s"] / dbos["steps_per_s"], "dbos_kill": dbos_kill, "skiplock_kill": kills}


def part_signals(server: str, signals: int, rate: float) -> dict[str, Any]:
    with scratch_database(server, "skiplock_durable") as url:
        result = sk.signal_latency(url, signals, rate)
    print(f"signal -> handler: p50 {result['signal_p50_ms']:.1f} ms, p99 {result['signal_p99_ms']:.1f} ms; "
          f"plain pickup p50 {result['pickup_p50_ms']:.1f} ms, p99 {result['pickup_p99_ms']:.1f} ms", flush=True)
    return result


def part_parked(server: str, parked: int, workers: int, samples: int, jobs: int = 10_000,
                reps: int = 5) -> dict[str, Any]:
    """Two databases of one server, one empty and one with `parked` parked jobs in another queue: drains
    alternate between them, and claims are timed one by one in turn, so both see the same machine."""
    rows: list[dict[str, Any]] = []
    with scratch_database(server, "skiplock_durable") as empty, scratch_database(server, "skiplock_durable") as full:
        for url in (empty, full):
            _with_statements(url)
        sk.seed_parked(full, parked)
        claims = sk.paired_claims(empty, full, samples)
        print(f"claims: {claims}", flush=True)
        for rep in range(reps):
            order = (("empty", empty), ("parked", full))
            row = {name: sk.plain_drain(url, jobs, workers) for name, url in (order if rep % 2 == 0 else order[::-1])}
            row["ratio"] = row["parked"] / row["empty"]
            print(f"parked rep {rep + 1}: drain {row['empty']:.0f} / {row['parked']:.0f} jobs/s, ratio "
                  f"{row['ratio']:.3f}", flush=True)
            rows.append(row)
        plans = durable_plans.wake_plans(full)
    return {"parked": parked, "jobs": jobs, "reps": rows, "claims": claims,
            "drain_ratio_median": statistics.median(r["ratio"] for r in rows), "plans": plans}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--signals", type=int, default=1000)
    parser.add_argument("--signal-rate", type=float, default=100.0)
    parser.add_argument("--parked", type=int, default=100_000)
    parser.add_argument("--claim-samples", type=int, default=200, help="claims timed on each database")
    parser.add_argument("--dbos-concurrency", type=int, default=20)
    parser.add_argument("--dbos-poll", type=float, default=0.05)
    parser.add_argument("--kill-leases", default="5,30", help="skiplock leases (s) for the SIGKILL measurement")
    parser.add_argument("--only", default="steps,dbos,signals,parked",
                        help="comma-separated parts: steps, dbos, signals, parked")
    parser.add_argument("--out", type=Path, default=Path("tests/benchmarks/results"))
    args = parser.parse_args()
    server = os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
    parts = [p.strip() for p in args.only.split(",") if p.strip()]
    started = time.monotonic()
    result: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="minutes"),
        "machine": f"{platform.node()}, {os.cpu_count()} cores, {platform.platform()}",
        "server": server_facts(server), "load_average_start": [round(x, 1) for x in os.getloadavg()],
        "command": "python -m tests.benchmarks.durable " + " ".join(
            f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items() if k != "out")}
    if "steps" in parts:
        result["steps"] = part_steps(server, args.jobs, args.steps, args.workers)
    if "dbos" in parts:
        leases = [float(x) for x in args.kill_leases.split(",")]
        result["dbos"] = part_dbos(server, args.jobs, args.workers, args.dbos_concurrency, args.dbos_poll, leases)
    if "signals" in parts:
        result["signals"] = part_signals(server, args.signals, args.signal_rate)
    if "parked" in parts:
        result["parked"] = part_parked(server, args.parked, args.workers, args.claim_samples)
    result["load_average_end"] = [round(x, 1) for x in os.getloadavg()]
    result["seconds"] = time.monotonic() - started
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "durable.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    from tests.benchmarks.durable_report import markdown

    (args.out / "durable.md").write_text(markdown(result))
    print(markdown(result))


if __name__ == "__main__":
    main()
