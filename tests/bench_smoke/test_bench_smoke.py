"""`skiplock bench --quick` end to end: every workload runs and reports complete counts (not speed)."""

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

    out = tmp_path / "bench.json"
    env = {"PATH": "/usr/bin:/bin", "DATABASE_URL": pg_admin_url, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", "import sys; from skiplock.tools.cli import main; sys.exit(main())",
                           "bench", "--quick", "--json", str(out)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    assert "synchronous_commit=on" in proc.stdout
    for name in WORKLOADS:
        assert name in proc.stdout
    data = json.loads(out.read_text())
    assert data["server"]["synchronous_commit"] == "on" and data["server"]["cpu_count"] >= 1
    results = data["results"]
    assert list(results) == WORKLOADS
    assert results["enqueue_single_p4"]["jobs"] == 50 and results["enqueue_bulk"]["jobs"] == 500
    assert results["drain_w2"]["processes"] == 2 and results["drain_w2"]["jobs"] == 500
    assert all(results[name]["jobs_per_s"] > 0 for name in WORKLOADS if name != "pickup_latency")
    # every probe came back: each job's handler start was seen, none was lost
    assert results["pickup_latency"]["received"] == results["pickup_latency"]["jobs"] == 10
    assert results["pickup_latency"]["p99_ms"] >= results["pickup_latency"]["p50_ms"]
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        name = "skiplock_bench_"
        leftovers = conn.execute("SELECT datname FROM pg_database WHERE datname LIKE %s", (name + "%",)).fetchall()
    # the scratch database is gone (other benchmark runs may own databases with other names)
    assert not [d for (d,) in leftovers if d in proc.stdout + proc.stderr]


@pytest.mark.parametrize("module", ["bursts", "compare", "curve", "flow", "growth", "producers"])
def test_every_benchmark_prints_its_help(module: str) -> None:
    """A '%' in an argparse help text made `curve --help` crash with a TypeError."""
    done = subprocess.run([sys.executable, "-m", f"tests.benchmarks.{module}", "--help"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage:"), done.stdout
