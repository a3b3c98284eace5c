"""What keeping the job's own log lines costs the drain, measured in one run (not a test: run it by hand).

    python -m tests.benchmarks.job_logs_cost [--jobs 20000] [--rounds 3]

Four drains of `--jobs` no-op jobs by 2 worker processes (worker/tools/bench.py's drain), alternated
round by round so the shared machine's load falls on each alike:
- quiet, kept:   handlers that log nothing, SKIPLOCK_JOB_LOGS on (the default): the cost of the hook alone;
- quiet, off:    the same with SKIPLOCK_JOB_LOGS=0 (no hook);
- logs, kept:    handlers writing one INFO line each (tests/benchmarks/logging_tasks.py), kept per attempt;
- logs, off:     the same lines with SKIPLOCK_JOB_LOGS=0 (they go to the worker's stderr only).
Prints each drain's jobs/s with the load average before it, and the median ratio kept/off of each pair.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import psycopg

from skiplock.core.plumbing.migrate import apply_migrations
from skiplock.tools import bench

VARIANTS = {"quiet, kept": ("skiplock.tools.bench_tasks", "1"), "quiet, off": ("skiplock.tools.bench_tasks", "0"),
            "logs, kept": ("tests.benchmarks.logging_tasks", "1"), "logs, off": ("tests.benchmarks.logging_tasks", "0")}


def drain(url: str, jobs: int, tasks: str, keep: str) -> float:
    """One drain's jobs per second."""
    bench.clear_jobs(url)
    with bench.skiplock_workers(url, 2, concurrency=50, batch_size=50, tasks=tasks, job_logs=keep):
        committed = bench.seed_jobs(url, jobs)
        done = bench.wait_acked(url, jobs, timeout=max(60.0, jobs / 100))
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("TRUNCATE job_logs")
    return jobs / (done - committed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    url = os.environ["DATABASE_URL"]
    apply_migrations(url)
    rates: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for round_no in range(args.rounds):
        order = list(VARIANTS) if round_no % 2 == 0 else list(reversed(VARIANTS))
        for name in order:
            load = Path("/proc/loadavg").read_text().split()[0]
            rate = drain(url, args.jobs, *VARIANTS[name])
            rates[name].append(rate)
            print(f"round {round_no + 1} {name:12} {rate:8.0f} jobs/s (load {load})", flush=True)
            time.sleep(1)
    for kind in ("quiet", "logs"):
        pairs = [k / o for k, o in zip(rates[f"{kind}, kept"], rates[f"{kind}, off"], strict=True)]
        print(f"{kind}: kept/off median ratio {statistics.median(pairs):.3f} (each round: "
              f"{', '.join(f'{p:.3f}' for p in pairs)})")


if __name__ == "__main__":
    main()
