"""The CPU a drain costs per job, worker and PostgreSQL apart, for one or more checkouts alternating.

    python -m tests.benchmarks.drain_cpu --python before=/path/to/venv/bin/python \\
        --python after=/other/venv/bin/python [--jobs 50000] [--rounds 3]

Each run: one worker process (concurrency 50, batch 50) of the checkout whose python is given (its venv
imports that checkout's `skiplock`), a scratch database on DATABASE_URL's server, `--jobs` no-op jobs
seeded at once; the clock and the CPU counters run from the seed's commit to the last ack. The CPU is
read from /proc (user + system) for the worker process and for the PostgreSQL backends of the
database, so it needs the server on this machine. A drain's rate on a shared 2-core machine follows
whatever else runs; its CPU per job hardly does, which is why a change that should cost nothing is
judged on it. The venvs that `tests.benchmarks.structure_ab --work DIR` leaves are such pythons.
Not collected by pytest (no test_ prefix).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

from tests.benchmarks.proc_cpu import cpu_seconds

CHILD = "--child"
REPO = Path(__file__).resolve().parents[2]




def child(url: str, jobs: int) -> None:
    """One drain, run by the checkout's own python; prints 'jobs_per_s worker_us pg_us'."""
    import psycopg

    from skiplock.core.plumbing.migrate import apply_migrations
    from skiplock.tools import bench

    apply_migrations(url)
    bench.clear_jobs(url)
    env = bench.worker_env(url, 0, concurrency=50, batch_size=50)
    procs = [subprocess.Popen([sys.executable, "-m", "skiplock"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            def listening() -> bool:
                row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                                   "AND application_name LIKE 'skiplock-listener%%'").fetchone()
                return row is not None and row[0] >= 1
            bench.wait_until(listening, 30, "the worker to listen")
            backends = [r[0] for r in conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")]
            worker_before, pg_before = cpu_seconds([procs[0].pid]), cpu_seconds(backends)
            committed = bench.seed_jobs(url, jobs)
            done = bench.wait_acked(url, jobs, timeout=max(120.0, jobs / 100))
            worker_cpu, pg_cpu = cpu_seconds([procs[0].pid]) - worker_before, cpu_seconds(backends) - pg_before
    finally:
        bench.stop_processes(procs)
    print(f"{jobs / (done - committed):.1f} {worker_cpu / jobs * 1e6:.2f} {pg_cpu / jobs * 1e6:.2f}")


def scratch_url(admin: str, name: str) -> str:
    import psycopg

    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")
    return admin.rsplit("/", 1)[0] + "/" + name


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == CHILD:
        child(sys.argv[2], int(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", action="append", required=True, metavar="LABEL=PATH",
                        help="a checkout's venv python, with a label; give two or more")
    parser.add_argument("--jobs", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    pythons = dict(item.split("=", 1) for item in args.python)
    admin = os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
    results: dict[str, list[tuple[float, float, float]]] = {label: [] for label in pythons}
    for round_no in range(args.rounds):
        labels = list(pythons) if round_no % 2 == 0 else list(reversed(pythons))  # the order alternates
        for label in labels:
            url = scratch_url(admin, f"skiplock_drain_cpu_{label}")
            load = Path("/proc/loadavg").read_text().split()[0]
            # the checkout's python imports its own `skiplock`, and this repository's `tests` (this file's helpers)
            env = {**os.environ, "PYTHONPATH": str(REPO)}
            out = subprocess.run([pythons[label], str(Path(__file__).resolve()), CHILD, url, str(args.jobs)],
                                 capture_output=True, text=True, check=True, env=env).stdout.split()
            rate, worker_us, pg_us = (float(x) for x in out[-3:])
            results[label].append((rate, worker_us, pg_us))
            print(f"round {round_no + 1} {label:10} {rate:9.0f} jobs/s  CPU per job: worker {worker_us:5.1f} us, "
                  f"PostgreSQL {pg_us:5.1f} us, both {worker_us + pg_us:5.1f} us  (load {load})", flush=True)
    for label, rows in results.items():
        rate, worker_us, pg_us = (statistics.median(r[i] for r in rows) for i in range(3))
        print(f"median {label:10} {rate:9.0f} jobs/s  CPU per job: worker {worker_us:5.1f} us, "
              f"PostgreSQL {pg_us:5.1f} us, both {worker_us + pg_us:5.1f} us")


if __name__ == "__main__":
    main()
