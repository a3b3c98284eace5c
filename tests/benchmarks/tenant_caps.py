"""Per-tenant limits benchmark: what the capped claim costs, and what small tenants wait.

    python -m tests.benchmarks.tenant_caps [--jobs 20000] [--cap 20] [--out tests/benchmarks/results]

4 worker processes (concurrency 10, batch 10 each: 40 slots), 20 tenants, jobs of 2-5 ms
(skiplock.tools.bench_tasks, payload "s"): one tenant ("big") enqueues 90% of the jobs at once, the 19
others the other 10% one job at a time while it drains, each timed. Two sides, each in a fresh
database, in one run:
- capped: the queue has a per-tenant concurrency limit (--cap, default 20 of the 40 slots), so the big
  tenant is held at it and every claim takes the queue's row lock and the per-tenant counts;
- unlimited: the same backlog and workers, no limit.
For each side: the drain rate (all the jobs, from the backlog's commit to the last ack), and the wait
(enqueue -> handler start, UDP probes) of the small tenants' jobs: first 100 on the empty queue (the
workers idle, one every 20 ms), then their 10% during the drain (one every 10 ms). Reported: capped
drain / unlimited drain (target >= 0.8), and the small tenants' p99 wait during the capped drain /
their p99 on the empty queue (target <= 2), with the load average before and after. Writes
tenant_caps.json and tenant_caps.md to --out.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg

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

REPO = Path(__file__).resolve().parents[2]
PROCESSES = 4
CONCURRENCY = 10
TENANTS = 20
BIG_SHARE = 0.9
PROBES = 100  # small-tenant jobs timed on the empty queue
PROBE_EVERY = 0.02  # seconds between two of them
TRICKLE_EVERY = 0.01  # seconds between two small-tenant jobs during the drain


def _workers(url: str, probe_port: int) -> list[subprocess.Popen[bytes]]:
    """PROCESSES bench workers of the bench queue, connected and idle."""
    env = worker_env(url, probe_port, concurrency=CONCURRENCY, batch_size=CONCURRENCY)
    procs = [subprocess.Popen([sys.executable, "-m", "skiplock"], env=env, cwd=REPO, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for _ in range(PROCESSES)]
    with psycopg.connect(url, autocommit=True) as conn:
        def ready() -> bool:
            if any(p.poll() is not None for p in procs):
                raise RuntimeError("a bench worker exited during start-up")
            row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                               "AND application_name LIKE 'skiplock-listener%%'").fetchone()
            return row is not None and row[0] >= PROCESSES
        wait_until(ready, 60, "bench workers to connect")
    return procs


def _send_probes(url: str, first: int, count: int, every: float) -> None:
    """`count` jobs of the small tenants (t01-t19, at random), one every `every` seconds, each stamped
    with its enqueue time (each its own transaction, as a web request's would be)."""
    with psycopg.connect(url, autocommit=True) as conn:
        for seq in range(first, first + count):
            tenant = f"t{random.randrange(1, TENANTS):02d}"
            conn.execute("INSERT INTO jobs (queue, payload, tenant) VALUES (%s, %s, %s)",
                         (BENCH_QUEUE, json.dumps({"p": seq, "t": time.time(), "s": 1}), tenant))
            time.sleep(every)


def _p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98] if len(values) >= 2 else values[0]


def _side(admin_url: str, jobs: int, cap: int | None) -> dict[str, Any]:
    """One side in a fresh database: the empty-queue probe waits, then the drain with probes beside it."""
    probe = ProbeReceiver()
    with scratch_database(admin_url, prefix="tenant_caps_bench") as url:
        with psycopg.connect(url, autocommit=True) as conn:
            if cap is not None:
                limits.set_tenant_limit(conn, BENCH_QUEUE, concurrency=cap, rate=None, actor="benchmark")
        procs = _workers(url, probe.port)
        try:
            _send_probes(url, 0, PROBES, PROBE_EVERY)
            wait_acked(url, PROBES, timeout=120)
            empty = [started - enq for enq, started in probe.samples.values()]
            big = int(jobs * BIG_SHARE)
            with psycopg.connect(url, autocommit=True) as conn:
                # the big tenant's backlog: one statement, one commit
                conn.execute("INSERT INTO jobs (queue, payload, tenant) SELECT %s, '{\"s\": 1}'::jsonb, 'big' "
                             "FROM generate_series(1, %s)", (BENCH_QUEUE, big))
                committed = time.monotonic()
                prober = threading.Thread(target=_send_probes, args=(url, PROBES, jobs - big, TRICKLE_EVERY))
                prober.start()
                done = wait_acked(url, PROBES + jobs, timeout=max(300.0, jobs / 20))
                prober.join()
            during = [started - enq for seq, (enq, started) in probe.samples.items() if seq >= PROBES]
        finally:
            stop_processes(procs)
            probe.close()
    return {"drain_jobs_per_s": round(jobs / (done - committed), 1),
            "empty_p99_ms": round(_p99(empty) * 1000, 1), "empty_median_ms": round(statistics.median(empty) * 1000, 1),
            "drain_p99_ms": round(_p99(during) * 1000, 1),
            "drain_median_ms": round(statistics.median(during) * 1000, 1)}


def run(admin_url: str, jobs: int, cap: int) -> dict[str, Any]:
    """Both sides, unlimited first then capped (the order is printed with the figures)."""
    load_before = os.getloadavg()
    unlimited = _side(admin_url, jobs, None)
    print("unlimited", unlimited, file=sys.stderr, flush=True)
    capped = _side(admin_url, jobs, cap)
    print("capped", capped, file=sys.stderr, flush=True)
    return {"jobs": jobs, "cap": cap, "processes": PROCESSES, "slots": PROCESSES * CONCURRENCY, "tenants": TENANTS,
            "big_share": BIG_SHARE, "unlimited": unlimited, "capped": capped,
            "drain_ratio": round(capped["drain_jobs_per_s"] / unlimited["drain_jobs_per_s"], 3),
            "small_p99_ratio": round(capped["drain_p99_ms"] / capped["empty_p99_ms"], 2),
            "load_before": [round(x, 2) for x in load_before], "load_after": [round(x, 2) for x in os.getloadavg()],
            "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}


def markdown(r: dict[str, Any]) -> str:
    """The figures as a small Markdown table."""
    u, c = r["unlimited"], r["capped"]
    return "\n".join([
        f"Per-tenant limits ({r['when']}; {r['processes']} workers x {r['slots'] // r['processes']} slots, "
        f"{r['tenants']} tenants, {r['big_share']:.0%} of {r['jobs']:,} jobs in one; per-tenant concurrency "
        f"{r['cap']}; load average {r['load_before']} before, {r['load_after']} after)", "",
        "| | unlimited queue | per-tenant limit | ratio |", "|---|---|---|---|",
        f"| drain (jobs/s) | {u['drain_jobs_per_s']:,} | {c['drain_jobs_per_s']:,} "
        f"| {r['drain_ratio']} (target >= 0.8) |",
        f"| small tenants' wait on the empty queue, p99 / median (ms) | {u['empty_p99_ms']} / {u['empty_median_ms']} "
        f"| {c['empty_p99_ms']} / {c['empty_median_ms']} | |",
        f"| small tenants' wait during the drain, p99 / median (ms) | {u['drain_p99_ms']} / {u['drain_median_ms']} "
        f"| {c['drain_p99_ms']} / {c['drain_median_ms']} | {r['small_p99_ratio']} of the empty queue's p99 "
        "(target <= 2) |"]) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--cap", type=int, default=20, help="per-tenant concurrency (default 20 of 40 slots)")
    parser.add_argument("--out", default=str(REPO / "tests/benchmarks/results"))
    args = parser.parse_args(argv)
    admin_url = os.environ.get("DATABASE_URL") or "postgresql://postgres@127.0.0.1:5432/postgres"
    results = run(admin_url, args.jobs, args.cap)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "tenant_caps.json").write_text(json.dumps(results, indent=1))
    (out / "tenant_caps.md").write_text(markdown(results))
    print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
