"""`skiplock bench --quick` end to end: every workload runs, and the database holds what it reports
(every job enqueued is stored, every drained job completed once); its speed is not asserted."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO

WORKLOADS = ["enqueue_single_p1", "raw_insert_single_p1", "enqueue_single_p4", "raw_insert_single_p4",
             "enqueue_bulk", "drain_w1", "drain_w2", "pickup_latency"]


def _bench_databases(conn) -> int:
    return conn.execute("SELECT count(*) FROM pg_database WHERE datname LIKE 'skiplock_bench_%%'").fetchone()[0]


@pytest.mark.slow
def test_quick_bench_reports_every_workload_and_drops_its_database(pg_admin_url, tmp_path):
    import psycopg

    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        row = conn.execute("SHOW synchronous_commit").fetchone()
    assert row is not None
    durability = row[0]
    out = tmp_path / "bench.json"
    env = {"PATH": "/usr/bin:/bin", "DATABASE_URL": pg_admin_url, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", "import sys; from skiplock.tools.cli import main; sys.exit(main())",
                           "bench", "--quick", "--json", str(out)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    # the server's own setting, reported and left alone (a private test cluster may run with it off)
    assert f"synchronous_commit={durability}" in proc.stdout
    for name in WORKLOADS:
        assert name in proc.stdout
    data = json.loads(out.read_text())
    assert data["server"]["synchronous_commit"] == durability and data["server"]["cpu_count"] >= 1
    results = data["results"]
    assert list(results) == WORKLOADS
    # --quick's sizes, and what the database held after each workload (the bench counts it there)
    for name in ("enqueue_single_p1", "raw_insert_single_p1", "enqueue_single_p4", "raw_insert_single_p4"):
        assert (results[name]["jobs"], results[name]["stored"]) == (50, 50), (name, results[name])
    assert (results["enqueue_bulk"]["jobs"], results["enqueue_bulk"]["stored"]) == (500, 500)
    for name, processes in (("drain_w1", 1), ("drain_w2", 2)):
        drained = {k: results[name][k] for k in ("processes", "jobs", "completed", "failed", "stored")}
        assert drained == {"processes": processes, "jobs": 500, "completed": 500, "failed": 0, "stored": 0}, name
    # every probe came back: each job's handler start was seen, none was lost
    assert results["pickup_latency"]["received"] == results["pickup_latency"]["jobs"] == 10
    assert results["pickup_latency"]["p99_ms"] >= results["pickup_latency"]["p50_ms"]
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        name = "skiplock_bench_"
        leftovers = conn.execute("SELECT datname FROM pg_database WHERE datname LIKE %s", (name + "%",)).fetchall()
    # the scratch database is gone (other benchmark runs may own databases with other names)
    assert not [d for (d,) in leftovers if d in proc.stdout + proc.stderr]


@pytest.mark.parametrize("module", ["bursts", "compare", "curve", "durable", "flow", "growth", "producers"])
def test_every_benchmark_prints_its_help(module: str) -> None:
    """A '%' in an argparse help text made `curve --help` crash with a TypeError."""
    done = subprocess.run([sys.executable, "-m", f"tests.benchmarks.{module}", "--help"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage:"), done.stdout
