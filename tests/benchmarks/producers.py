"""Many concurrent single-job producers (issue 19, part 1): the insert trigger's cost, in one run.

    python -m tests.benchmarks.producers [--clients 16 64] [--seconds 5] [--rounds 3] [--workers 0 2]

Each producer is a connection committing one job per transaction, two ways:
- the documented SQL INSERT, with pgbench;
- `skiplock.enqueue(...)`, from Python processes (up to 4, each with threads: one process with 64
  threads would measure its GIL, not the database). Its control is a plain INSERT from the same
  harness, so the Python costs of the harness cancel out.
enqueue() and the harness's plain INSERT are each measured with the trigger and without it, so the
trigger's cost (enqueue() / trigger-free enqueue()) and enqueue()'s own client CPU (enqueue() /
trigger-free plain INSERT: validation, JSON, RETURNING id) show apart. "Trigger-free" is the same
table with the insert trigger disabled; the two alternate in one database. With `--workers 2`, two skiplock workers run
throughout and keep up with the producers: the case a web application meets, where idle workers
register as waiters between short claims. They poll every 10 ms when idle, on both sides (see
WORKER_POLL_SECONDS), and each side's backlog at the end of its run is reported. With 0 nobody waits.
compare.py runs `measure()` as its producers_16/producers_64 workloads.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

from skiplock.tools.bench import BENCH_QUEUE, scratch_database, skiplock_workers, wait_until

REPO = Path(__file__).resolve().parents[2]
INSERT = f"INSERT INTO jobs (queue, payload) VALUES ('{BENCH_QUEUE}', '{{\"n\": 1}}');\n"
TRIGGER = "jobs_notify_insert"
# With --workers, both sides' workers poll every 10 ms when idle. With the trigger disabled no NOTIFY
# ever comes, so a worker that ran dry and registered as a waiter slept its whole poll interval (1 s
# by default) while the producers went on: in 8 s of 16 pgbench producers the workers claimed ~10%
# fewer jobs than were inserted, and that control, doing less work on the same 2 CPUs, was the
# faster (0.83-0.84 for the trigger). With both sides' workers keeping up, 1.00 and 0.96. The
# end-of-run backlog of each side (backlog_*) shows whether its workers kept up.
WORKER_POLL_SECONDS = 0.01
MAX_PROCESSES = 4
_ORDER = itertools.cycle([(True, False), (False, True)])


def _pgbench() -> str:
    found = shutil.which("pgbench")
    if found:
        return found
    bindir = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, check=True).stdout.strip()
    return str(Path(bindir) / "pgbench")


def pgbench_tps(url: str, clients: int, seconds: float) -> float:
    """Transactions per second of `clients` pgbench connections, each a single-row INSERT."""
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
        f.write(INSERT)
    try:
        out = subprocess.run([_pgbench(), "-n", "-c", str(clients), "-j", "2", "-T", str(round(seconds)), "-f",
                              f.name, url], capture_output=True, text=True)
    finally:
        os.unlink(f.name)
    if out.returncode:
        raise RuntimeError(f"pgbench failed: {out.stderr.strip()[-300:]}")
    match = re.search(r"tps = ([\d.]+)", out.stdout)
    assert match, out.stdout
    return float(match.group(1))


def python_tps(url: str, clients: int, seconds: float, how: str) -> float:
    """Jobs per second of `clients` Python producers (`how`: enqueue or insert), split over processes."""
    processes = min(MAX_PROCESSES, clients)
    threads = [clients // processes + (1 if i < clients % processes else 0) for i in range(processes)]
    start = time.time() + 1.0 + 0.05 * clients  # every process connected before the clock starts
    procs = [subprocess.Popen([sys.executable, "-m", "tests.benchmarks.producers", "--child", how, url, str(n),
                               repr(start), repr(seconds)], cwd=REPO, stdout=subprocess.PIPE, text=True)
             for n in threads]
    counts = []
    for proc in procs:
        out, _ = proc.communicate(timeout=seconds + 120)
        if proc.returncode:
            raise RuntimeError(f"a producer process failed ({proc.returncode})")
        counts.append(int(out.split()[-1]))
    return sum(counts) / seconds


def _child(how: str, url: str, threads: int, start: float, seconds: float) -> None:
    """One producer process: `threads` connections commit one job each per transaction until the end."""
    from skiplock.core.producer import enqueue
    from tests.support.helpers import race

    counts = [0] * threads

    def produce(index: int) -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            time.sleep(max(0.0, start - time.time()))  # pacing: all processes start together
            end = start + seconds
            n = 0
            while time.time() < end:
                if how == "enqueue":
                    enqueue(BENCH_QUEUE, {"n": n}, conn=conn)
                else:
                    conn.execute("INSERT INTO jobs (queue, payload) VALUES (%s, %s::jsonb)",
                                 (BENCH_QUEUE, '{"n": 1}'))
                n += 1
            counts[index] = n

    race(threads, produce)  # re-raises the first error of any thread
    print(sum(counts))


def _trigger(url: str, enabled: bool) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET lock_timeout = '30s'")
        conn.execute(f"ALTER TABLE jobs {'ENABLE' if enabled else 'DISABLE'} TRIGGER {TRIGGER}")


def _backlog(url: str) -> int:
    """Jobs still queued: read right after a timed run, what the workers had not claimed by its end."""
    with psycopg.connect(url, autocommit=True) as conn:
        return int(conn.execute("SELECT count(*) FROM jobs WHERE status = 'queued'").fetchone()[0])  # type: ignore[index]


def _settle(url: str, workers: int) -> None:
    """Start every measurement from an empty queue: the workers drain it, or it is truncated."""
    with psycopg.connect(url, autocommit=True) as conn:
        if workers:
            wait_until(lambda: not conn.execute("SELECT EXISTS (SELECT 1 FROM jobs)").fetchone()[0],  # type: ignore[index]
                       300, "the workers to drain the producers' jobs", interval=0.05)
        else:
            conn.execute("TRUNCATE jobs")
        conn.execute("VACUUM jobs")


def measure(url: str, clients: int, seconds: float, workers: int = 0) -> dict[str, Any]:
    """One round: SQL INSERT and enqueue(), with the trigger and without it; rates and ratios."""
    result: dict[str, Any] = {"clients": clients, "seconds": seconds, "workers": workers}
    context = (skiplock_workers(url, workers, concurrency=50, batch_size=50, poll_interval=WORKER_POLL_SECONDS)
               if workers else contextlib.nullcontext())
    with context:
        for enabled in next(_ORDER):  # alternating between calls, so a drift of the machine hits both
            _trigger(url, enabled)
            suffix = "" if enabled else "_free"
            try:
                for key, run in (("sql", lambda: pgbench_tps(url, clients, seconds)),
                                 ("insert", lambda: python_tps(url, clients, seconds, "insert")),
                                 ("enqueue", lambda: python_tps(url, clients, seconds, "enqueue"))):
                    _settle(url, workers)
                    result[f"{key}{suffix}"] = run()
                    if workers:
                        result[f"backlog_{key}{suffix}"] = _backlog(url)
            finally:
                _trigger(url, True)
        _settle(url, workers)
    result["sql_ratio"] = result["sql"] / result["sql_free"]
    result["insert_ratio"] = result["insert"] / result["insert_free"]  # the trigger's cost from Python
    result["enqueue_trigger_ratio"] = result["enqueue"] / result["enqueue_free"]  # the trigger's cost on enqueue()
    result["enqueue_ratio"] = result["enqueue"] / result["insert_free"]  # and enqueue()'s own Python besides
    result["jobs_per_s"] = result["enqueue"]
    return result


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6]))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 2])
    args = parser.parse_args()
    admin = os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
    with scratch_database(admin, prefix="skiplock_producers") as url:
        for workers in args.workers:
            for clients in args.clients:
                rounds = [measure(url, clients, args.seconds, workers) for _ in range(args.rounds)]
                for key in ("sql", "sql_free", "enqueue", "enqueue_free", "insert", "insert_free"):
                    print(f"{workers} workers, {clients:>3} producers, {key:<12} "
                          + ", ".join(f"{r[key]:,.0f}" for r in rounds))
                if workers:  # what the workers had left unclaimed at the end of each timed run
                    sides = ("sql", "sql_free", "enqueue", "enqueue_free")
                    print(f"{workers} workers, {clients:>3} producers, backlog at the end ({', '.join(sides)}): "
                          + "; ".join(", ".join(f"{r[f'backlog_{k}']:,}" for k in sides) for r in rounds))
                sql = [r["sql_ratio"] for r in rounds]
                trig = [r["enqueue_trigger_ratio"] for r in rounds]
                enq = [r["enqueue_ratio"] for r in rounds]
                print(f"{workers} workers, {clients:>3} producers: SQL INSERT / trigger-free "
                      f"{_spread(sql)}; enqueue() / trigger-free enqueue() {_spread(trig)}; "
                      f"enqueue() / trigger-free plain INSERT {_spread(enq)}", flush=True)


def _spread(ratios: list[float]) -> str:
    return f"{statistics.median(ratios):.2f} ({', '.join(f'{x:.2f}' for x in ratios)})"


if __name__ == "__main__":
    main()
