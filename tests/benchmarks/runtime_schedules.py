"""Ten thousand schedules made at runtime, firing every minute, with a worker SIGKILLed in the middle.

    python -m tests.benchmarks.runtime_schedules [--schedules 10000] [--minutes 5] [--out tests/benchmarks/results]
    python -m tests.benchmarks.runtime_schedules --passes-only [--before REV --rounds 2]

Two worker processes serve the schedules' queue (no-op jobs). The benchmark process times its own
scheduler passes (RecurringService.run_once, once a second: it is one more scheduler among the workers'),
reads the workers' resident memory (and its own: a scheduler that runs no job) with no schedule and with
all of them, SIGKILLs one worker half-way and
starts a replacement. At the end every schedule must have exactly one slot (and one job) per minute from
the first full minute to the last. Writes runtime_schedules.json to --out.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg

from skiplock.core.plumbing.db import make_pool
from skiplock.services.recurring_service import RecurringService
from skiplock.tools.bench import BENCH_QUEUE, scratch_database, stop_processes, worker_env

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


def rss_mib(pid: int) -> float:
    """Resident memory of process `pid` in MiB (Linux /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def one(conn: psycopg.Connection, sql: str, params: tuple = ()) -> tuple:
    """The one row of `sql`."""
    row = conn.execute(sql, params or None).fetchone()
    assert row is not None
    return row


def start_worker(url: str) -> subprocess.Popen[bytes]:
    env = worker_env(url, lease_seconds=10, reaper_interval=1)
    return subprocess.Popen([sys.executable, "-m", "skiplock"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def time_passes(url: str, count: int) -> dict:
    """The scheduler's passes alone, on a clock it is given: `count` schedules every minute, all due at once.

    First all of them with nothing planned (just created), then all of them one minute later (every pending
    slot has fired). Each phase runs passes until one plans nothing; no worker runs.
    """
    with scratch_database(url, "skiplock_bench_pass") as db, psycopg.connect(db, autocommit=True) as conn:
        conn.execute("SELECT skiplock_create_schedule('s' || g, %s, jsonb_build_object('n', g), p_every => '1m') "
                     "FROM generate_series(1, %s) g", (BENCH_QUEUE, count))
        pool = make_pool(db, "bench-scheduler", size=1, open_wait=True)
        service = RecurringService(pool)
        service.sync()
        start = datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(seconds=1)
        phases = {}
        for phase, now in (("created", start), ("a minute later", start + timedelta(minutes=1, seconds=20))):
            passes: list[float] = []
            planned = 0
            while True:
                t0 = time.perf_counter()
                enqueued = len(service.run_once(now))
                passes.append(time.perf_counter() - t0)
                planned += enqueued
                if enqueued == 0:
                    break
            phases[phase] = {"passes": len(passes) - 1, "planned": planned,
                             "total_s": round(sum(passes), 3), "max_pass_s": round(max(passes), 3)}
        pool.close()
        jobs = one(conn, "SELECT count(*) FROM jobs")[0]
    return {"schedules": count, "phases": phases, "jobs": jobs, "load_average": os.getloadavg()}


def compare_passes(before: str, count: int, rounds: int) -> list[dict]:
    """time_passes of the package at git revision `before` and of this checkout, alternating, `rounds` times.

    The revision's worker/ is unpacked (git archive) into a scratch folder and put first on PYTHONPATH as
    `skiplock` for its runs; this very script runs both, so the measurement is the same.
    """
    repo = Path(__file__).resolve().parents[2]
    results = []
    with tempfile.TemporaryDirectory(prefix="skiplock-before-") as folder:
        archive = subprocess.run(["git", "-C", str(repo), "archive", before, "worker"], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)
        (Path(folder) / "skiplock").symlink_to(Path(folder) / "worker")
        for _ in range(rounds):
            for label, extra in (("before", {"PYTHONPATH": folder}), ("after", {})):
                env = {**os.environ, **extra}
                out = subprocess.run([sys.executable, __file__, "--passes-only", "--schedules", str(count)],
                                     env=env, cwd=folder, check=True, capture_output=True, text=True).stdout
                results.append({"code": label if label == "after" else f"before ({before})", **json.loads(out)})
                print(json.dumps(results[-1]), flush=True)
    return results


def run(url: str, count: int, minutes: int) -> dict:
    with scratch_database(url, "skiplock_bench_sched") as db, psycopg.connect(db, autocommit=True) as conn:
        workers = [start_worker(db) for _ in range(2)]
        pool = make_pool(db, "bench-scheduler", size=1, open_wait=True)
        service = RecurringService(pool)
        service.run_once()  # with no schedule: this process's scheduler memory before any
        time.sleep(5)  # measurement, not synchronisation: let the workers import and settle
        rss_empty = [rss_mib(w.pid) for w in workers]
        rss_scheduler_empty = rss_mib(os.getpid())
        conn.execute("SELECT skiplock_create_schedule('s' || g, %s, jsonb_build_object('n', g), p_every => '1m') "
                     "FROM generate_series(1, %s) g", (BENCH_QUEUE, count))
        passes: list[float] = []
        start = time.monotonic()
        killed = False
        while time.monotonic() - start < minutes * 60:
            t0 = time.perf_counter()
            service.run_once()
            passes.append(time.perf_counter() - t0)
            if not killed and time.monotonic() - start > minutes * 30:
                workers[0].kill()  # SIGKILL, mid-run
                workers[0].wait()
                workers.append(start_worker(db))
                killed = True
            time.sleep(max(0.0, 1.0 - (time.perf_counter() - t0)))
        rss_full = [rss_mib(w.pid) for w in workers[1:]]
        rss_scheduler_full = rss_mib(os.getpid())
        conn.execute("UPDATE recurring_schedules SET enabled = false")  # stop planning; the check reads slots
        stopped_at = one(conn, "SELECT now()")[0]
        # the books close when every slot that fired has run: let the live workers drain what is due
        deadline = time.monotonic() + 300
        while one(conn, "SELECT count(*) FROM jobs WHERE status IN ('queued', 'running') AND run_at <= now()")[0] \
                and time.monotonic() < deadline:
            time.sleep(1)  # measurement, not synchronisation: the count read above is the condition
        stop_processes(workers[1:])
        pool.close()
        # slots that fired: per schedule and minute, how many slot rows and distinct jobs
        per_minute = one(conn, """
            SELECT count(*) FILTER (WHERE n <> 1), count(*), count(DISTINCT name), min(fire_at), max(fire_at)
              FROM (SELECT name, fire_at, count(*) AS n FROM recurring_slots WHERE fire_at <= now()
                     GROUP BY name, fire_at) s""")
        gaps = one(conn, """
            SELECT count(*) FROM (
              SELECT fire_at - lag(fire_at) OVER (PARTITION BY name ORDER BY fire_at) AS step
                FROM recurring_slots) s WHERE step <> interval '1 minute'""")[0]
        jobs_per_slot = one(conn, """
            SELECT count(*) FROM (SELECT job_id FROM recurring_slots GROUP BY job_id HAVING count(*) > 1) d
        """)[0]
        ran = one(conn, "SELECT coalesce(sum(completed), 0) FROM job_stats")[0]
        # a slot that fired whose job did not succeed (still queued or running, failed, dead); a succeeded job
        # may be pruned, so "not succeeded" is read as "still there in another state"
        unfinished = one(conn, """
            SELECT count(*) FROM recurring_slots s JOIN jobs j ON j.id = s.job_id
             WHERE s.fire_at <= %s AND j.status <> 'succeeded'""", (stopped_at,))[0]
    passes.sort()
    return {"schedules": count, "minutes": minutes, "passes": len(passes),
            "pass_p50_ms": round(statistics.median(passes) * 1000, 1),
            "pass_p99_ms": round(passes[int(len(passes) * 0.99) - 1] * 1000, 1),
            "pass_max_ms": round(passes[-1] * 1000, 1),
            "worker_rss_mib_empty": [round(r, 1) for r in rss_empty],
            "worker_rss_mib_with_schedules": [round(r, 1) for r in rss_full],
            # this process runs a scheduler and no job: its growth is the scheduler's alone
            "scheduler_rss_mib_empty": round(rss_scheduler_empty, 1),
            "scheduler_rss_mib_with_schedules": round(rss_scheduler_full, 1),
            "load_average_at_end": [round(x, 1) for x in os.getloadavg()],
            "slots_fired": per_minute[1], "slots_not_once": per_minute[0], "schedules_fired": per_minute[2],
            "gaps": gaps, "slots_sharing_a_job": jobs_per_slot, "jobs_succeeded": int(ran),
            "fired_slots_whose_job_did_not_succeed": unfinished,
            "first_slot": per_minute[3].isoformat(), "last_slot": per_minute[4].isoformat()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--schedules", type=int, default=10_000)
    parser.add_argument("--minutes", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path("tests/benchmarks/results"))
    parser.add_argument("--passes-only", action="store_true",
                        help="time the scheduler's passes alone on a given clock (no workers; about a minute)")
    parser.add_argument("--before", metavar="REV",
                        help="with --passes-only: time the package at git revision REV and this one, alternating")
    parser.add_argument("--rounds", type=int, default=2, help="with --before: how many times each")
    args = parser.parse_args()
    if args.passes_only and args.before:
        results = compare_passes(args.before, args.schedules, args.rounds)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "runtime_schedule_passes.json").write_text(json.dumps(results, indent=2) + "\n")
        return
    if args.passes_only:
        print(json.dumps(time_passes(os.environ.get("DATABASE_URL", DEFAULT_URL), args.schedules), indent=2))
        return
    result = run(os.environ.get("DATABASE_URL", DEFAULT_URL), args.schedules, args.minutes)
    print(json.dumps(result, indent=2))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "runtime_schedules.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
