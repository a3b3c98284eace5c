"""Soak benchmark: high throughput for a bounded time, recording whether the jobs table stays healthy.

    python -m tests.benchmarks.soak --minutes 3 --out docs/soak

Starts real `python -m skiplock` processes (the no-op `noop` queue of tests/support/handlers.py) against a
scratch database, keeps a ready backlog topped up from this process, and every few seconds
records: jobs heap and index size, live/dead tuples, autovacuum runs, completed jobs per second,
and claim latency (probe claims timed here, plus the workers' own histogram means). Writes
OUT.csv and OUT.png. `--table-settings default` resets migration 005's per-table settings first,
to compare against PostgreSQL's defaults. Loopback only; everything it starts it stops.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
import psycopg.sql

from skiplock.core import state_changes
from skiplock.core.plumbing.migrate import apply_migrations
from skiplock.tools.bench import stop_processes
from tests.support.pgcluster import ThrowawayCluster, find_server, with_database

REPO = Path(__file__).resolve().parents[2]
QUEUE = "noop"

RESET_005 = """ALTER TABLE jobs RESET (fillfactor, autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold,
    autovacuum_vacuum_insert_scale_factor, autovacuum_analyze_scale_factor, autovacuum_vacuum_cost_delay)"""

SAMPLE = """
SELECT pg_table_size('jobs'), pg_indexes_size('jobs'), pg_relation_size('jobs_ready_idx'),
       s.n_live_tup, s.n_dead_tup, s.autovacuum_count, s.n_tup_hot_upd, s.n_tup_upd,
       (SELECT coalesce(sum(completed), 0) FROM job_stats),
       (SELECT count(*) FROM jobs WHERE status = 'queued')
  FROM pg_stat_user_tables s WHERE s.relname = 'jobs'
"""

LATENCY = "SELECT metric, sum(total_count), sum(total_sum) FROM worker_latency GROUP BY metric"

FIELDS = ["t", "heap_kb", "index_kb", "ready_idx_kb", "live_tup", "dead_tup", "autovacuums", "hot_ratio",
          "jobs_per_s", "backlog", "probe_claim_p50_ms", "probe_claim_p99_ms", "worker_claim_mean_ms",
          "worker_ack_mean_ms"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minutes", type=float, default=3.0, help="how long to run (bounded: at most 60)")
    p.add_argument("--workers", type=int, default=2, help="worker processes")
    p.add_argument("--concurrency", type=int, default=16, help="handler threads per worker")
    p.add_argument("--batch", type=int, default=50, help="claim batch size")
    p.add_argument("--backlog", type=int, default=3000, help="ready jobs kept waiting")
    p.add_argument("--sample-seconds", type=float, default=5.0, help="seconds between samples")
    p.add_argument("--table-settings", choices=("005", "default"), default="005",
                   help="keep migration 005's jobs settings, or reset them to PostgreSQL defaults")
    p.add_argument("--fillfactor", type=int, default=None, help="override the jobs fillfactor (10-100)")
    p.add_argument("--server", choices=("own", "shared"), default="own",
                   help="own: a throwaway cluster with stock settings (autovacuum on); shared: DATABASE_URL "
                        "or 127.0.0.1:5432 (the CI server runs with autovacuum off, so vacuum is not measured)")
    p.add_argument("--naptime", default=None,
                   help="own server only: set autovacuum_naptime (e.g. 10s) before the run")
    p.add_argument("--preload", type=int, default=0,
                   help="first insert this many finished (succeeded) rows, as kept history would leave")
    p.add_argument("--out", default="soak", help="output path without extension (.csv and .png written)")
    p.add_argument("--title", default=None, help="plot title")
    args = p.parse_args(argv)
    if not 0 < args.minutes <= 60:
        p.error("--minutes must be in (0, 60]")
    return args


class Producer(threading.Thread):
    """Keeps about `backlog` ready jobs queued with one multi-row INSERT at a time."""

    def __init__(self, url: str, backlog: int, stop: threading.Event) -> None:
        super().__init__(name="soak-producer", daemon=True)
        self.url, self.backlog, self.stop = url, backlog, stop
        self.enqueued = 0

    def run(self) -> None:
        from skiplock.core.sql import queries

        with psycopg.connect(self.url, autocommit=True, application_name="skiplock-soak-producer") as conn:
            while not self.stop.is_set():
                waiting = conn.execute("SELECT count(*) FROM (SELECT 1 FROM jobs WHERE queue = %s AND "
                                       "status = 'queued' LIMIT %s) s", (QUEUE, self.backlog)).fetchone()
                missing = self.backlog - (waiting[0] if waiting else 0)
                if missing < self.backlog // 10:
                    self.stop.wait(0.05)  # the backlog is full enough; look again shortly
                    continue
                n = min(missing, 1000)
                conn.execute(queries("jobs_enqueue").enqueue_many, {"queues": [QUEUE] * n, "payloads": ['{"n": 1}'] * n,
                                            "priorities": [0] * n, "run_ats": [None] * n,
                                            "unique_keys": [None] * n, "max_attempts": [20] * n})
                self.enqueued += n


def probe_claims(conn: psycopg.Connection, n: int = 20) -> list[float]:
    """Time `n` one-job claims (each acked at once), in milliseconds."""
    times = []
    for _ in range(n):
        started = time.perf_counter()
        jobs = state_changes.claim(conn, "soak-probe", [QUEUE], [30.0], 1)
        times.append((time.perf_counter() - started) * 1000)
        if jobs:
            outcomes = [state_changes.Outcome(j.id, QUEUE, j.attempts, "ok") for j in jobs]
            state_changes.ack_batch(conn, "soak-probe", outcomes, history="delete")
    return times


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def sample(conn: psycopg.Connection, t: float, prev: dict[str, Any]) -> dict[str, Any]:
    """One row of the CSV; `prev` carries the last cumulative values for rates and means."""
    row = conn.execute(SAMPLE).fetchone()
    assert row is not None
    heap, index, ready_idx, live, dead, autovac, hot, upd, completed, backlog = row
    completed = int(completed)
    lat = {m: (int(n), float(s)) for m, n, s in conn.execute(LATENCY)}
    probes = probe_claims(conn)

    def mean_ms(metric: str) -> float:
        n, s = lat.get(metric, (0, 0.0))
        pn, ps = prev.get(metric, (0, 0.0))
        return round((s - ps) / (n - pn) * 1000, 3) if n > pn else float("nan")

    dt = t - prev.get("t", 0.0)
    out = {
        "t": round(t, 1), "heap_kb": heap // 1024, "index_kb": index // 1024, "ready_idx_kb": ready_idx // 1024,
        "live_tup": live, "dead_tup": dead, "autovacuums": autovac,
        "hot_ratio": round(hot / upd, 3) if upd else 0.0,
        "jobs_per_s": round((completed - prev.get("completed", completed)) / dt, 1) if prev else 0.0,
        "backlog": backlog,
        "probe_claim_p50_ms": round(statistics.median(probes), 3),
        "probe_claim_p99_ms": round(percentile(probes, 0.99), 3),
        "worker_claim_mean_ms": mean_ms("claim"), "worker_ack_mean_ms": mean_ms("ack"),
    }
    prev.update({"t": t, "completed": completed, **lat})
    return out


def plot(rows: list[dict[str, Any]], path: Path, title: str) -> None:
    """Three panels over time: sizes and dead tuples, claim latency, throughput."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = [r["t"] / 60 for r in rows]
    fig, (ax1, ax2, ax3) = plt.subplots(3, 1, figsize=(9, 9), sharex=True)
    ax1.plot(t, [r["heap_kb"] / 1024 for r in rows], label="jobs heap (MB)")
    ax1.plot(t, [r["index_kb"] / 1024 for r in rows], label="jobs indexes (MB)")
    ax1.set_ylabel("MB")
    ax1b = ax1.twinx()
    ax1b.plot(t, [r["dead_tup"] for r in rows], color="tab:red", alpha=0.6, label="dead tuples")
    ax1b.set_ylabel("dead tuples")
    lines = ax1.get_legend_handles_labels()[0] + ax1b.get_legend_handles_labels()[0]
    ax1.legend(lines, [str(x.get_label()) for x in lines], loc="upper left")
    ax1.set_ylim(bottom=0)
    ax1b.set_ylim(bottom=0)
    ax2.plot(t, [r["probe_claim_p50_ms"] for r in rows], label="probe claim p50")
    ax2.plot(t, [r["probe_claim_p99_ms"] for r in rows], label="probe claim, worst of 20", alpha=0.7)
    ax2.plot(t, [r["worker_claim_mean_ms"] for r in rows], label="workers' claim mean (batch)")
    ax2.set_ylabel("ms")
    ax2.set_ylim(bottom=0)
    ax2.legend(loc="upper left")
    ax3.plot(t, [r["jobs_per_s"] for r in rows], label="completed jobs/s")
    ax3.set_ylabel("jobs/s")
    ax3.set_xlabel("minutes")
    ax3.set_ylim(bottom=0)
    ax3.legend(loc="upper left")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def spawn_workers(url: str, args: argparse.Namespace, log_dir: Path) -> list[subprocess.Popen[bytes]]:
    """Start the worker processes (logs in log_dir)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKIPLOCK_")}
    env.update({"DATABASE_URL": url, "PYTHONPATH": str(REPO), "SKIPLOCK_TASKS": "tests.support.handlers",
                "SKIPLOCK_QUEUES": QUEUE, "SKIPLOCK_CONCURRENCY": str(args.concurrency),
                "SKIPLOCK_BATCH_SIZE": str(args.batch), "SKIPLOCK_LOG_LEVEL": "WARNING"})
    procs = []
    for i in range(args.workers):
        with open(log_dir / f"soak-worker-{i}.log", "wb") as log:
            procs.append(subprocess.Popen([sys.executable, "-m", "skiplock"], cwd=REPO, env=env,
                                          stdout=log, stderr=subprocess.STDOUT))
    return procs


def main(argv: list[str] | None = None) -> int:
    """Run the soak; returns 0."""
    args = parse_args(argv)
    cluster: ThrowawayCluster | None
    if args.server == "own":
        cluster = ThrowawayCluster()
        admin_url = cluster.url
    else:
        admin_url, cluster = find_server()
    name = f"skiplock_soak_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        if args.naptime and cluster is not None:
            admin.execute(psycopg.sql.SQL("ALTER SYSTEM SET autovacuum_naptime = {}").format(args.naptime))
            admin.execute("SELECT pg_reload_conf()")
        print("server settings:", dict(admin.execute(
            "SELECT name, setting FROM pg_settings WHERE name IN ('autovacuum', 'autovacuum_naptime', "
            "'shared_buffers', 'max_connections', 'fsync', 'synchronous_commit')").fetchall()), flush=True)
    url = with_database(admin_url, name)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()
    procs: list[subprocess.Popen[bytes]] = []
    rows: list[dict[str, Any]] = []
    try:
        apply_migrations(url)
        with psycopg.connect(url, autocommit=True, application_name="skiplock-soak") as conn:
            if args.table_settings == "default":
                conn.execute(RESET_005)
            if args.fillfactor is not None:
                conn.execute(f"ALTER TABLE jobs SET (fillfactor = {int(args.fillfactor)})")
            if args.preload:
                # kept history: a big table of finished rows the queue's churn happens beside
                conn.execute("INSERT INTO jobs (queue, payload, status, attempts, started_at, finished_at) "
                             "SELECT 'history', '{\"n\": 1}', 'succeeded', 1, now(), now() "
                             "FROM generate_series(1, %s)", (args.preload,))
                conn.execute("VACUUM ANALYZE jobs")
            producer = Producer(url, args.backlog, stop)
            producer.start()
            log_dir = Path(tempfile.mkdtemp(prefix="skiplock-soak-"))
            print(f"worker logs in {log_dir}", flush=True)
            procs = spawn_workers(url, args, log_dir)
            started = time.monotonic()
            deadline = started + args.minutes * 60
            prev: dict[str, Any] = {}
            while time.monotonic() < deadline:
                stop.wait(args.sample_seconds)
                rows.append(sample(conn, time.monotonic() - started, prev))
                print(", ".join(f"{k}={rows[-1][k]}" for k in FIELDS), flush=True)
    finally:
        stop.set()
        stop_processes(procs)
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if cluster is not None:
            cluster.destroy()
    with open(out.with_suffix(".csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    title = args.title or (f"skiplock soak: {args.workers} workers x {args.concurrency}, batch {args.batch}, "
                           f"jobs settings {args.table_settings}"
                           + (f", fillfactor {args.fillfactor}" if args.fillfactor else "")
                           + (f", naptime {args.naptime}" if args.naptime else "")
                           + (f", {args.preload} kept rows" if args.preload else ""))
    plot(rows, out.with_suffix(".png"), title)
    print(f"wrote {out.with_suffix('.csv')} and {out.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
