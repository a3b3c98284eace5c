"""What migration 030's search indexes cost the queue's hot path (not a test: run it by hand, ~2 minutes).

    python tests/benchmarks/search_write_cost.py [--admin-url postgresql://postgres@127.0.0.1:5432/postgres]
                                                 [--jobs 20000] [--rounds 2] [--json]

In a scratch database, with the indexes and without them (dropped), in turn, `--rounds` times:
  - enqueue: `--jobs` jobs through enqueue_many, 100 per call, payloads like an application's
    ({"customer": {"id", "plan"}, "order", "to", "items": [{"sku", "qty"}]});
  - enqueue with keys: the same with a unique key, a lock key and a tenant on every job (the partial
    indexes' worst case: every row is in them);
  - drain: `--jobs` such jobs enqueued at once, then claimed and acked by 2 real worker processes
    (a claim is not a HOT update, so every index on jobs takes an entry per claim).
It prints each time and the with/without ratio of each round, in wall-clock seconds and in the CPU
seconds of the database backends that did the work (read from /proc: the server must be local). On a
shared machine the wall time swings with the other load; the backends' CPU time much less. Nothing is
asserted.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from skiplock.core.producer import enqueue_many
from skiplock.tools import bench_seed
from skiplock.tools.bench import BENCH_QUEUE, scratch_database, server_facts, skiplock_workers, wait_acked
from tests.benchmarks.proc_cpu import cpu_seconds

RESULTS = Path(__file__).resolve().parent / "results" / "search_write_cost.json"
BATCH = 100
# Migration 030's indexes (their definitions are read from the migrated database, to make them again).
INDEXES = ("jobs_payload_idx", "jobs_unique_key_idx", "jobs_lock_key_idx", "jobs_tenant_idx",
           "jobs_last_error_trgm_idx")


def payload(n: int) -> dict[str, Any]:
    return {"customer": {"id": n % 50_000, "plan": ("free", "pro", "team")[n % 3]}, "order": n,
            "to": f"user{n}@example.com", "items": [{"sku": f"SKU-{n % 2000}", "qty": 1 + n % 4}]}


def other_backends(conn: psycopg.Connection) -> list[int]:
    return [r[0] for r in conn.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                                       "AND pid <> pg_backend_pid()")]


def enqueue_all(url: str, jobs: int, keyed: bool, offset: int) -> tuple[float, float]:
    """Seconds to enqueue `jobs` jobs, BATCH per enqueue_many call (each its own transaction), and
    the CPU seconds its backend spent."""
    items = [{"queue": BENCH_QUEUE, "payload": payload(offset + n)} for n in range(jobs)]
    if keyed:
        for n, item in enumerate(items):
            item.update(unique_key=f"order:{offset + n}", lock_key=f"account:{(offset + n) % 5000}",
                        tenant=f"tenant-{n % 500}")
    with psycopg.connect(url, autocommit=True) as conn:
        pid = [conn.info.backend_pid]
        started, cpu = time.perf_counter(), cpu_seconds(pid)
        for at in range(0, jobs, BATCH):
            enqueue_many(items[at:at + BATCH], conn=conn)
        return time.perf_counter() - started, cpu_seconds(pid) - cpu


def drain(url: str, jobs: int, offset: int) -> tuple[float, float]:
    """Seconds from `jobs` jobs committed to the last acked, by 2 worker processes, and the CPU
    seconds the workers' backends spent meanwhile."""
    with skiplock_workers(url, 2, concurrency=50, batch_size=50), psycopg.connect(url, autocommit=True) as conn:
        items = [{"queue": BENCH_QUEUE, "payload": payload(offset + n)} for n in range(jobs)]
        before = other_backends(conn)
        cpu = cpu_seconds(before)
        enqueue_many(items, conn=conn)
        committed = time.monotonic()
        done = wait_acked(url, jobs, timeout=max(120.0, jobs / 50))
        # the waiter's own polls are not the drain's: its backend is this connection, left out
        spent = cpu_seconds(sorted(set(before) | set(other_backends(conn)))) - cpu
    return done - committed, spent


def reset(url: str) -> None:
    """Empty the bench queue and its stats, and vacuum, so each measurement starts alike."""
    with psycopg.connect(url, autocommit=True) as conn:
        bench_seed.delete_queue(conn, BENCH_QUEUE)
        conn.execute("VACUUM ANALYZE jobs")


def definitions(url: str) -> dict[str, str]:
    """Each of INDEXES as the migration made it (pg_get_indexdef)."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute("SELECT indexrelid::regclass::text, pg_get_indexdef(indexrelid) FROM pg_index "
                            "WHERE indexrelid::regclass::text = ANY(%s)", (list(INDEXES),)).fetchall()
    found: dict[str, str] = dict(rows)
    missing = set(INDEXES) - set(found)
    if missing:
        raise RuntimeError(f"the migrated database lacks {sorted(missing)}")
    return found


def set_indexes(url: str, made: dict[str, str], present: bool) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        for name, create in made.items():
            conn.execute(f"DROP INDEX IF EXISTS {name}")
            if present:
                conn.execute(create)


def measure(url: str, jobs: int, offset: int) -> dict[str, dict[str, float]]:
    figures = {}
    for label, run in (("enqueue", lambda: enqueue_all(url, jobs, False, offset)),
                       ("enqueue with keys", lambda: enqueue_all(url, jobs, True, offset)),
                       ("drain", lambda: drain(url, jobs, offset))):
        reset(url)
        wall, cpu = run()
        figures[label] = {"wall_s": round(wall, 3), "db_cpu_s": round(cpu, 3)}
    reset(url)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--admin-url", default=os.environ.get("DATABASE_URL",
                                                              "postgresql://postgres@127.0.0.1:5432/postgres"))
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", action="store_true", help=f"write the results to {RESULTS.name}")
    args = parser.parse_args()
    load = os.getloadavg()
    print(f"load average at start: {' '.join(f'{x:.1f}' for x in load)} on {os.cpu_count()} cores", flush=True)
    rounds: list[dict[str, Any]] = []
    with scratch_database(args.admin_url, prefix="skiplock_search_cost") as url:
        os.environ["DATABASE_URL"] = url
        made = definitions(url)
        for r in range(args.rounds):
            result: dict[str, Any] = {}
            for present in (True, False):
                set_indexes(url, made, present)
                result["with" if present else "without"] = measure(url, args.jobs, r * args.jobs)
            result["ratio"] = {k: {m: round(result["with"][k][m] / max(result["without"][k][m], 1e-9), 2)
                                   for m in ("wall_s", "db_cpu_s")} for k in result["with"]}
            rounds.append(result)
            for k in result["with"]:
                w, wo, ratio = result["with"][k], result["without"][k], result["ratio"][k]
                print(f"round {r + 1} {k:18} wall with {w['wall_s']:6.2f}s without {wo['wall_s']:6.2f}s "
                      f"ratio {ratio['wall_s']:.2f} | db cpu with {w['db_cpu_s']:6.2f}s without "
                      f"{wo['db_cpu_s']:6.2f}s ratio {ratio['db_cpu_s']:.2f}", flush=True)
        facts = server_facts(url)
    medians = {k: {m: statistics.median(r["ratio"][k][m] for r in rounds) for m in ("wall_s", "db_cpu_s")}
               for k in rounds[0]["ratio"]}
    print("median ratio (with / without): " + ", ".join(
        f"{k} wall {v['wall_s']:.2f} db cpu {v['db_cpu_s']:.2f}" for k, v in medians.items()))
    if args.json:
        RESULTS.write_text(json.dumps({
            "benchmark": "search indexes' write cost (tests/benchmarks/search_write_cost.py)",
            "date": dt.date.today().isoformat(), "jobs": args.jobs, "batch": BATCH,
            "command": "python tests/benchmarks/search_write_cost.py " + " ".join(sys.argv[1:]),
            "load_average_at_start": [round(x, 1) for x in load], "server": facts,
            "indexes": made, "rounds": rounds, "median_ratio": medians}, indent=2, default=str) + "\n")
        print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
