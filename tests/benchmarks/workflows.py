"""Workflows' speed: fan-out/fan-in against independent jobs, a 100,000-member batch's callback.

    python -m tests.benchmarks.workflows [--children 10000] [--batch 100000] [--reps 3] [--workers 2]
                                         [--out tests/benchmarks/results]

Each repetition, on one fresh database of DATABASE_URL's server (default the local server):
- independent: idle workers, then `children` no-op jobs committed at once; time until every one is acked;
- fan-out/in (static DAG): idle workers, then a root, `children` jobs that depend on it and one
  summary job that depends on all of them, committed in one transaction; time until all are acked;
- fan-out/in (dynamic): idle workers, then one root job whose handler enqueues the `children` and the
  summary (depends_on all of them) when it runs; time from the root's commit until all are acked. The ratio
  is the workflow's jobs per second over the independent drain's, from the same repetition (A and B
  alternate, the order rotating), so the machine's drift hits both alike. Target: >= 0.8.
- batch: `batch` members in one batch with an on_complete callback (history mode keep, so the
  members' rows stay to be read); the callback's insert is in the statement that acks the last
  member, so "called back after the last ack" is reported as the callback's created_at (the ack's
  transaction time) minus the last member's finished_at, and the callback's pickup as its started_at
  minus that.
Each phase also reports the CPU seconds it took (`cpu_s`) from the commit to the last ack: the
bench workers' processes plus, when the server runs on this machine, every process of its cluster
(backends, WAL writer, autovacuum; read from /proc). The machine's other work does not count in it,
so `cpu_ratio` (the workflow's jobs per CPU second over the independent drain's) compares the two
on a busy machine, where the wall-clock ratio swings by +-0.2 from one repetition to the next.
Writes workflows.md and workflows.json to --out. Not collected by pytest (no test_ prefix).
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

import skiplock
from skiplock.tools.bench import BENCH_QUEUE, scratch_database, skiplock_workers, wait_until


def _acked(conn: psycopg.Connection) -> int:
    row = conn.execute("SELECT coalesce(sum(completed + failed + dead), 0) FROM job_stats WHERE queue = %s",
                       (BENCH_QUEUE,)).fetchone()
    return int(row[0]) if row else 0


def _server_pid(url: str) -> int | None:
    """The postmaster's pid if the server runs on this machine (a backend's parent), else None."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
    try:
        fields = Path(f"/proc/{row[0] if row else 0}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1])


def _cpu_seconds(server_pid: int | None) -> float:
    """CPU seconds used so far by this process's children (the bench workers) and, given its pid, by
    the server: the postmaster with its exited children (cutime/cstime) and its live ones."""
    ticks = 0
    parents = {os.getpid()} | ({server_pid} if server_pid else set())
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        if int(fields[1]) in parents:
            ticks += int(fields[11]) + int(fields[12])  # utime + stime
        elif server_pid and stat.parent.name == str(server_pid):
            ticks += sum(int(f) for f in fields[11:15])  # its own and its exited children's
    return ticks / os.sysconf("SC_CLK_TCK")


def _reset(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        for table in ("jobs", "job_stats", "job_deps", "job_results", "job_batches"):
            conn.execute(f"TRUNCATE {table}")
        conn.execute("VACUUM ANALYZE jobs")


def independent(url: str, children: int, workers: int) -> dict[str, Any]:
    """`children` plain no-op jobs, committed at once into idle workers' queue."""
    _reset(url)
    server = _server_pid(url)
    with skiplock_workers(url, workers), psycopg.connect(url, autocommit=True) as conn:
        skiplock.enqueue_many([(BENCH_QUEUE, {}) for _ in range(children)], conn=conn)
        committed, cpu = time.monotonic(), _cpu_seconds(server)
        wait_until(lambda: _acked(conn) >= children, 600, "the independent jobs", interval=0.005)
        seconds, cpu = time.monotonic() - committed, _cpu_seconds(server) - cpu
    return {"jobs": children, "seconds": seconds, "jobs_per_s": children / seconds, "cpu_s": cpu}


def fan_out_in(url: str, children: int, workers: int) -> dict[str, Any]:
    """1 -> `children` -> 1, committed in one transaction into idle workers' queue."""
    _reset(url)
    server = _server_pid(url)
    jobs = children + 2
    with skiplock_workers(url, workers), psycopg.connect(url) as tx, psycopg.connect(url, autocommit=True) as conn:
        root = skiplock.enqueue(BENCH_QUEUE, {}, conn=tx)
        middle = skiplock.enqueue_many([(BENCH_QUEUE, {}) for _ in range(children)], conn=tx, depends_on=[root])
        summary = skiplock.enqueue(BENCH_QUEUE, {"summary": 1}, conn=tx, depends_on=middle)
        tx.commit()
        committed, cpu = time.monotonic(), _cpu_seconds(server)
        wait_until(lambda: _acked(conn) >= jobs, 600, "the workflow", interval=0.005)
        seconds, cpu = time.monotonic() - committed, _cpu_seconds(server) - cpu
        state = skiplock.status(summary, conn=conn).state
    if state != "succeeded":
        raise RuntimeError(f"the summary ended {state}")
    return {"jobs": jobs, "seconds": seconds, "jobs_per_s": jobs / seconds, "cpu_s": cpu}


def fan_out_dynamic(url: str, children: int, workers: int) -> dict[str, Any]:
    """1 -> `children` -> 1 as applications usually write it: the root job, when it runs, enqueues the
    children and the summary (depends_on the children) in one transaction."""
    _reset(url)
    server = _server_pid(url)
    jobs = children + 2
    with skiplock_workers(url, workers), psycopg.connect(url, autocommit=True) as conn:
        skiplock.enqueue(BENCH_QUEUE, {"fan_out": children}, conn=conn)
        committed, cpu = time.monotonic(), _cpu_seconds(server)
        wait_until(lambda: _acked(conn) >= jobs, 600, "the workflow", interval=0.005)
        seconds, cpu = time.monotonic() - committed, _cpu_seconds(server) - cpu
    return {"jobs": jobs, "seconds": seconds, "jobs_per_s": jobs / seconds, "cpu_s": cpu}


def big_batch(url: str, members: int, workers: int) -> dict[str, Any]:
    """One batch of `members` no-op jobs with an on_complete callback, in history mode keep."""
    _reset(url)
    with psycopg.connect(url) as tx:
        started = time.monotonic()
        with skiplock.batch(on_complete=(BENCH_QUEUE, {"callback": 1}), conn=tx) as batch:
            batch.enqueue_many([(BENCH_QUEUE, {}) for _ in range(members)])
        tx.commit()
        enqueue_s = time.monotonic() - started
    with skiplock_workers(url, workers, history_mode="keep"), psycopg.connect(url, autocommit=True) as conn:
        committed = time.monotonic()
        wait_until(lambda: _acked(conn) >= members + 1, 900, "the batch and its callback", interval=0.01)
        seconds = time.monotonic() - committed
        row = conn.execute(
            """SELECT extract(epoch FROM cb.created_at - m.last_finished) * 1000,
                      extract(epoch FROM cb.started_at - m.last_finished) * 1000,
                      b.succeeded, b.total, (SELECT count(*) FROM jobs WHERE id = b.complete_job_id)
                 FROM job_batches b
                 JOIN jobs cb ON cb.id = b.complete_job_id
                 CROSS JOIN LATERAL (SELECT max(finished_at) AS last_finished FROM jobs WHERE batch_id = b.id) m
                WHERE b.id = %s""", (batch.id,)).fetchone()
    assert row is not None
    called_back_ms, picked_up_ms, succeeded, total, callbacks = row
    if (succeeded, total, callbacks) != (members, members, 1):
        raise RuntimeError(f"batch counts off: succeeded={succeeded} total={total} callbacks={callbacks}")
    return {"members": members, "enqueue_s": enqueue_s, "drain_s": seconds, "members_per_s": members / seconds,
            "callback_after_last_ack_ms": float(called_back_ms),
            "callback_started_after_last_ack_ms": float(picked_up_ms)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--children", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=100_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("tests/benchmarks/results"))
    args = parser.parse_args()
    server = os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
    reps: list[dict[str, Any]] = []
    with scratch_database(server, "skiplock_wfbench") as url:
        for rep in range(args.reps):
            order = [("independent", independent), ("fan_out_in", fan_out_in),
                     ("fan_out_dynamic", fan_out_dynamic)]
            if rep % 2:
                order.reverse()
            row: dict[str, Any] = {}
            for name, run in order:
                row[name] = run(url, args.children, args.workers)
            row["ratio"] = row["fan_out_in"]["jobs_per_s"] / row["independent"]["jobs_per_s"]
            row["ratio_dynamic"] = row["fan_out_dynamic"]["jobs_per_s"] / row["independent"]["jobs_per_s"]
            per_cpu = {name: row[name]["jobs"] / row[name]["cpu_s"] if row[name]["cpu_s"] else float("nan")
                       for name, _ in order}
            row["cpu_ratio"] = per_cpu["fan_out_in"] / per_cpu["independent"]
            row["cpu_ratio_dynamic"] = per_cpu["fan_out_dynamic"] / per_cpu["independent"]
            print(f"rep {rep + 1}: independent {row['independent']['jobs_per_s']:.0f} jobs/s, "
                  f"fan-out/in {row['fan_out_in']['jobs_per_s']:.0f} jobs/s (ratio {row['ratio']:.2f}), "
                  f"dynamic fan-out {row['fan_out_dynamic']['jobs_per_s']:.0f} jobs/s "
                  f"(ratio {row['ratio_dynamic']:.2f}); per CPU second: ratio {row['cpu_ratio']:.2f}, "
                  f"dynamic {row['cpu_ratio_dynamic']:.2f} (CPU s {row['independent']['cpu_s']:.2f} / "
                  f"{row['fan_out_in']['cpu_s']:.2f} / {row['fan_out_dynamic']['cpu_s']:.2f}), "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)
            reps.append(row)
        batch = big_batch(url, args.batch, args.workers) if args.batch else None
        if batch:
            print(f"batch of {args.batch}: {batch}", flush=True)
    ratios = [r["ratio"] for r in reps]
    dynamic = [r["ratio_dynamic"] for r in reps]
    result = {"date": datetime.now(UTC).isoformat(timespec="minutes"), "machine": f"{platform.node()}, "
              f"{os.cpu_count()} cores, {platform.platform()}", "workers": args.workers, "children": args.children,
              "reps": reps, "ratio_median": statistics.median(ratios), "ratio_min": min(ratios),
              "ratio_max": max(ratios), "ratio_dynamic_median": statistics.median(dynamic),
              "cpu_ratio_median": statistics.median(r["cpu_ratio"] for r in reps),
              "cpu_ratio_dynamic_median": statistics.median(r["cpu_ratio_dynamic"] for r in reps),
              "load_average": [round(x, 1) for x in os.getloadavg()], "batch": batch,
              "command": f"python -m tests.benchmarks.workflows --children {args.children} --batch {args.batch} "
                         f"--reps {args.reps} --workers {args.workers}"}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "workflows.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [f"# Workflows benchmark ({result['date']}, {result['machine']})", "", f"`{result['command']}`", "",
             "| rep | independent jobs/s | static DAG jobs/s | ratio | dynamic fan-out jobs/s | ratio "
             "| CPU s: independent / static / dynamic | ratio per CPU s: static / dynamic |",
             "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {i + 1} | {r['independent']['jobs_per_s']:.0f} | {r['fan_out_in']['jobs_per_s']:.0f} | "
              f"{r['ratio']:.2f} | {r['fan_out_dynamic']['jobs_per_s']:.0f} | {r['ratio_dynamic']:.2f} | "
              f"{r['independent']['cpu_s']:.2f} / {r['fan_out_in']['cpu_s']:.2f} / "
              f"{r['fan_out_dynamic']['cpu_s']:.2f} | "
              f"{r['cpu_ratio']:.2f} / {r['cpu_ratio_dynamic']:.2f} |" for i, r in enumerate(reps)]
    lines += ["", f"Static DAG (root, children and summary enqueued together; the root's ack releases the "
              f"children): ratio median {result['ratio_median']:.2f} (min {result['ratio_min']:.2f}, "
              f"max {result['ratio_max']:.2f}). Dynamic fan-out (the root enqueues children and summary when it "
              f"runs): median {result['ratio_dynamic_median']:.2f}. Target >= 0.8. Per CPU second (the machine's "
              f"other load left out): static {result['cpu_ratio_median']:.2f}, dynamic "
              f"{result['cpu_ratio_dynamic_median']:.2f}. Load average at the end: "
              f"{' '.join(str(x) for x in result['load_average'])}."]
    if batch:
        lines += ["", f"Batch of {batch['members']:,} members: enqueued in {batch['enqueue_s']:.2f} s, drained in "
                  f"{batch['drain_s']:.2f} s ({batch['members_per_s']:.0f}/s); the callback was inserted "
                  f"{batch['callback_after_last_ack_ms']:.1f} ms after the last member's ack and started "
                  f"{batch['callback_started_after_last_ack_ms']:.1f} ms after it (target: within 1 s)."]
    (args.out / "workflows.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
