"""The autoscaling gauge under load steps (issue 38, part 3): idle, 10x, back to idle.

    python -m tests.benchmarks.autoscale_steps [--step-seconds 240] [--out tests/benchmarks/results]

A private cluster, 3 worker processes of 2 slots whose handlers sleep 200 ms, and a producer
offering 2 jobs/s, then 20 jobs/s, then 2 jobs/s again, each for --step-seconds. One collector
(its damping state kept, as in a long-lived web process) is scraped every 5 s. For each step it
reports how long the gauge took to reach the value the offered rate needs with the measured
handler time, ceil(rate x service / (slots x 0.8)), and whether its settled value is within 20%
of the unrounded need. Takes ~3 x step-seconds; writes autoscale_steps.json and .md to --out.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from prometheus_client.parser import text_string_to_metric_families

from skiplock.monitor.autoscale import OCCUPANCY
from skiplock.monitor.metrics import SkiplockCollector, connection_from_url, render
from skiplock.tools.bench import stop_processes
from tests.conftest import REPO, TEST_TABLES_SQL, worker_env
from tests.support.pgcluster import ThrowawayCluster

PROCESSES, SLOTS, HANDLER_S = 3, 2, 0.2
STEPS = [("idle", 2.0), ("10x", 20.0), ("idle again", 2.0)]
PAYLOAD = json.dumps({"sleep": HANDLER_S, "no_effect": True})


def gauge(collector: SkiplockCollector, queue: str) -> float | None:
    for family in text_string_to_metric_families(render(collector).decode()):
        for s in family.samples:
            if s.name == "skiplock_desired_workers" and s.labels.get("queue") == queue:
                return float(s.value)
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--step-seconds", type=float, default=240.0)
    parser.add_argument("--out", default=str(REPO / "tests/benchmarks/results"))
    args = parser.parse_args(argv)
    cluster = ThrowawayCluster()
    procs: list[subprocess.Popen[bytes]] = []
    series: list[dict[str, Any]] = []
    steps: list[dict[str, Any]] = []
    try:
        url = cluster.migrated_database("steps", TEST_TABLES_SQL)
        procs = [subprocess.Popen([sys.executable, "-m", "skiplock"], cwd=REPO, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL,
                                  env=worker_env(url, SKIPLOCK_CONCURRENCY=str(SLOTS), SKIPLOCK_QUEUES="t1",
                                                 SKIPLOCK_LOG_LEVEL="WARNING")) for _ in range(PROCESSES)]
        collector = SkiplockCollector(connection_from_url(url))
        began = time.monotonic()
        with psycopg.connect(url, autocommit=True) as conn:
            for name, rate in STEPS:
                start = time.monotonic()
                sent, next_scrape, reached_at = 0, start, None
                values: list[float] = []
                while (now := time.monotonic()) - start < args.step_seconds:
                    due = int(rate * (now - start)) - sent
                    if due > 0:
                        conn.execute("INSERT INTO jobs (queue, payload) SELECT 't1', %s::jsonb "
                                     "FROM generate_series(1, %s)", (PAYLOAD, due))
                        sent += due
                    if now >= next_scrape:
                        row = conn.execute("SELECT sum(total_sum) / nullif(sum(total_count), 0) FROM worker_latency "
                                           "WHERE metric = 'handler'").fetchone()
                        service = float(row[0]) if row and row[0] else HANDLER_S
                        need = rate * service / (SLOTS * OCCUPANCY)
                        value = gauge(collector, "t1") or 0.0
                        values.append(value)
                        if reached_at is None and value == max(1, math.ceil(need)):
                            reached_at = now - start
                        series.append({"t": round(now - began, 1), "step": name, "gauge": value,
                                       "need": round(need, 3)})
                        print(json.dumps(series[-1]), flush=True)
                        next_scrape += 5.0
                    time.sleep(0.05)  # the producer's pacing
                settled = values[-1] if values else 0.0
                steps.append({"step": name, "rate": rate, "service_s": round(service, 4), "need": round(need, 3),
                              "expected": max(1, math.ceil(need)), "settled": settled,
                              "reached_after_s": None if reached_at is None else round(reached_at, 1),
                              "within_20pct_of_need": abs(settled - need) <= 0.2 * max(need, 1)
                              or settled == max(1, math.ceil(need))})
    finally:
        stop_processes(procs)
        cluster.destroy()
    date = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"# skiplock_desired_workers under load steps ({date})", "",
             f"{PROCESSES} workers x {SLOTS} slots, handlers sleep {HANDLER_S * 1000:.0f} ms, "
             f"{args.step_seconds:.0f} s per step, scraped every 5 s; command "
             f"`python -m tests.benchmarks.autoscale_steps --step-seconds {args.step_seconds:.0f}`.", "",
             "| step | offered jobs/s | measured service s | need (unrounded) | expected | settled gauge | "
             "reached expected after (s) | settled within 20% |", "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {s['step']} | {s['rate']:g} | {s['service_s']} | {s['need']} | {s['expected']} | {s['settled']:g} | "
              f"{s['reached_after_s']} | {'yes' if s['within_20pct_of_need'] else 'no'} |" for s in steps]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "autoscale_steps.json").write_text(json.dumps({"date": date, "steps": steps, "series": series}, indent=1))
    (out / "autoscale_steps.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
