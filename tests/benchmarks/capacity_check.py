"""Validate the capacity model (issue 38, part 2): predict a drain from a short run, then measure it.

    python -m tests.benchmarks.capacity_check [--out tests/benchmarks/results]

For each shared_buffers setting (16MB, 256MB) on a private cluster with pg_stat_statements, and for
two workloads (handlers sleeping 20 ms, and no-op handlers), with 2 worker processes of 10 slots:

1. a short run of SHORT jobs, measured by skiplock.monitor.capacity (snapshot before and after);
2. the prediction for the full drain: min(slots / service time (Little's law, the handler's
   measured mean), the database's ceiling at 100% of this machine's CPUs from server time per job);
3. the full drain of FULL jobs, measured; the ratio measured / predicted.

Writes capacity_check.json and capacity_check.md to --out.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

from skiplock.monitor.capacity import costs, project, snapshot
from skiplock.tools.bench import stop_processes, wait_until
from tests.conftest import REPO, TEST_TABLES_SQL, worker_env
from tests.support.pgcluster import ThrowawayCluster

SHORT, FULL = 2_000, 20_000
PROCESSES, SLOTS = 2, 10
WORKLOADS = {"sleep 20 ms": ("t1", '{"sleep": 0.02, "no_effect": true}'), "no-op": ("noop", "{}")}
FINISHED = "SELECT coalesce(sum(completed + retried + failed + dead), 0) FROM job_stats"


def fill(conn: psycopg.Connection, queue: str, payload: str, n: int) -> float:
    """`n` ready jobs in one statement; returns the commit's monotonic time."""
    conn.execute("INSERT INTO jobs (queue, payload) SELECT %s, %s::jsonb FROM generate_series(1, %s)",
                 (queue, payload, n))
    return time.monotonic()


def drain(conn: psycopg.Connection, n: int, already: int) -> float:
    """Wait until `already + n` jobs are acked; returns that moment (polled every 5 ms)."""
    def done() -> bool:
        row = conn.execute(FINISHED).fetchone()
        return row is not None and int(row[0]) >= already + n
    wait_until(done, max(120.0, n / 50), "the drain", interval=0.005)
    return time.monotonic()


def one(url: str, queue: str, payload: str) -> dict[str, Any]:
    procs = [subprocess.Popen([sys.executable, "-m", "skiplock"], cwd=REPO,
                              env=worker_env(url, SKIPLOCK_CONCURRENCY=str(SLOTS), SKIPLOCK_LOG_LEVEL="WARNING",
                                             SKIPLOCK_QUEUES=queue),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(PROCESSES)]
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            wait_until(lambda: conn.execute("SELECT count(*) FROM workers").fetchone()[0] >= PROCESSES,  # type: ignore[index]
                       60, "the workers")
            before = snapshot(conn)
            started = fill(conn, queue, payload, SHORT)
            short_s = drain(conn, SHORT, 0) - started
            # the histograms travel with the workers' 5 s heartbeat
            wait_until(lambda: snapshot(conn).handler_runs - before.handler_runs >= SHORT, 30, "the histograms")
            short = costs(before, snapshot(conn))
            cpus = float(os.cpu_count() or 1)
            db_ceiling = project(short, db_cores=cpus).jobs_per_s_at_80
            db_ceiling = db_ceiling / 0.8 if db_ceiling else None  # at 100% of the CPUs
            slot_rate = PROCESSES * SLOTS / (short.handler_ms / 1000) if short.handler_ms else None
            predicted = min(r for r in (slot_rate, db_ceiling) if r)
            started = fill(conn, queue, payload, FULL)
            full_s = drain(conn, FULL, SHORT) - started
    finally:
        stop_processes(procs)
    measured = FULL / full_s
    return {"short_jobs_per_s": SHORT / short_s, "handler_ms": short.handler_ms,
            "server_ms_per_job": short.server_ms_per_job, "server_ms": short.server_ms,
            "statements_per_job": short.statements_per_job, "wal_bytes_per_job": short.wal_bytes_per_job,
            "slot_rate": slot_rate, "db_ceiling": db_ceiling, "predicted": predicted,
            "bound": "slots" if predicted == slot_rate else "database", "measured": measured,
            "ratio": measured / predicted}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(REPO / "tests/benchmarks/results"))
    args = parser.parse_args(argv)
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    rows: list[dict[str, Any]] = []
    for buffers in ("16MB", "256MB"):
        cluster = ThrowawayCluster()
        try:
            cluster.reconfigure({"shared_preload_libraries": "pg_stat_statements", "shared_buffers": buffers})
            for i, (name, (queue, payload)) in enumerate(WORKLOADS.items()):
                url = cluster.migrated_database(f"cap{i}", TEST_TABLES_SQL + "CREATE EXTENSION pg_stat_statements;")
                result = one(url, queue, payload)
                rows.append({"shared_buffers": buffers, "workload": name, **result})
                print(json.dumps(rows[-1]), flush=True)
        finally:
            cluster.destroy()
    date = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"# Capacity model: prediction from a {SHORT:,}-job run against the measured {FULL:,}-job drain", "",
             f"{date}; {os.cpu_count()} CPUs shared with other work, load (uptime) {load} at the start; "
             f"{PROCESSES} worker processes x {SLOTS} slots; command `python -m tests.benchmarks.capacity_check`.", "",
             "| shared_buffers | handlers | handler ms | server ms/job | statements/job | WAL B/job | "
             "slot-bound rate | DB ceiling (100% CPU) | predicted | measured | measured / predicted |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['shared_buffers']} | {r['workload']} | {r['handler_ms']:.2f} | "
                     f"{r['server_ms_per_job']:.3f} | "
                     f"{r['statements_per_job']:.3f} | {r['wal_bytes_per_job']:.0f} | {r['slot_rate']:,.0f} | "
                     f"{r['db_ceiling']:,.0f} | {r['predicted']:,.0f} ({r['bound']}) | {r['measured']:,.0f} | "
                     f"{r['ratio']:.2f} |")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "capacity_check.json").write_text(json.dumps({"date": date, "load": load, "rows": rows}, indent=1))
    (out / "capacity_check.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
