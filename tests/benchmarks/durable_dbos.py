"""The DBOS side of the durable-jobs benchmark: a worker process and the two measurements.

    python -m tests.benchmarks.durable_dbos worker --url URL --executor w0 [--concurrency 20] [--poll 0.05]

A worker process configures DBOS on the system database at URL, registers one queue (`bench`, at most
`--concurrency` workflows at once per process, polled every `--poll` seconds) and two workflows:
- `ten_steps(n)`: ten no-op steps (`@DBOS.step()` functions returning their argument);
- `slow_steps(n)`: ten steps that sleep `SLOW_STEP_S` each and print `start <i> <epoch>` when they begin,
  for the SIGKILL measurement.
It prints `ready` once launched and runs until SIGTERM. The driver (`tests.benchmarks.durable`) calls
`throughput()` and `kill_resume()` below. Every step is DBOS's own checkpoint: its output row is
committed before the workflow goes on, the guarantee skiplock's `job.step` gives too.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg

from skiplock.tools.bench import wait_until

QUEUE = "bench"
STEPS = 10
SLOW_STEP_S = 0.2


def _serve(url: str, executor: str, concurrency: int, poll: float) -> None:
    from dbos import DBOS, DBOSConfig

    config: DBOSConfig = {"name": "skiplock-bench", "system_database_url": url, "executor_id": executor,
                          "log_level": "WARNING", "sys_db_pool_size": concurrency + 10,
                          "application_version": "bench"}
    DBOS(config=config)

    @DBOS.step(name="noop")
    def noop(i: int) -> int:
        return i

    @DBOS.step(name="slow")
    def slow(i: int) -> int:
        print(f"start {i} {time.time():.6f}", flush=True)
        time.sleep(SLOW_STEP_S)
        return i

    @DBOS.workflow(name="ten_steps")
    def ten_steps(n: int) -> int:
        for i in range(STEPS):
            noop(i)
        return n

    @DBOS.workflow(name="slow_steps")
    def slow_steps(n: int) -> int:
        for i in range(STEPS):
            slow(i)
        return n

    # DBOS keeps a queue's configuration in its system database, so it is registered after the launch
    DBOS.launch()
    DBOS.register_queue(QUEUE, worker_concurrency=concurrency, polling_interval_sec=poll)
    print("ready", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    DBOS.destroy()


def dbos_version() -> str:
    from importlib.metadata import version

    return version("dbos")


def as_url(conninfo: str) -> str:
    """A libpq conninfo ("host=... dbname=...", as skiplock's scratch databases are named) as the
    postgresql:// URL that DBOS's SQLAlchemy engine takes; a URL is returned as it is."""
    if "://" in conninfo:
        return conninfo
    from psycopg.conninfo import conninfo_to_dict

    p = conninfo_to_dict(conninfo)
    return f"postgresql://{p.get('user', 'postgres')}@{p.get('host', '127.0.0.1')}:{p.get('port', 5432)}/{p['dbname']}"


def _start(url: str, executor: str, concurrency: int, poll: float) -> subprocess.Popen[str]:
    """A worker process, returned once it printed `ready` (its launch recovered its executor's workflows)."""
    url = as_url(url)
    proc = subprocess.Popen([sys.executable, "-m", "tests.benchmarks.durable_dbos", "worker", "--url", url,
                             "--executor", executor, "--concurrency", str(concurrency), "--poll", str(poll)],
                            stdout=subprocess.PIPE,
                            stderr=None if os.environ.get("BENCH_DEBUG") else subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if line.strip() != "ready":
        proc.kill()
        raise RuntimeError(f"the DBOS worker did not start: {line!r}")
    return proc


@contextlib.contextmanager
def dbos_workers(url: str, processes: int, concurrency: int, poll: float) -> Iterator[list[subprocess.Popen[str]]]:
    procs = [_start(url, f"w{i}", concurrency, poll) for i in range(processes)]
    try:
        yield procs
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _enqueue(url: str, workflow: str, count: int) -> None:
    from dbos import DBOSClient

    client = DBOSClient(system_database_url=as_url(url))
    try:
        for n in range(count):
            client.enqueue({"queue_name": QUEUE, "workflow_name": workflow, "app_version": "bench"}, n)
    finally:
        client.destroy()


def _counts(conn: psycopg.Connection[Any], workflow: str) -> int:
    """How many `workflow` workflows succeeded."""
    row = conn.execute("SELECT count(*) FROM dbos.workflow_status WHERE status = 'SUCCESS' AND name = %s",
                       (workflow,)).fetchone()
    return int(row[0]) if row else 0


def activity(conn: psycopg.Connection[Any]) -> tuple[int | None, int]:
    """(top-level statements executed, transactions committed) in this database so far, every client's
    (pg_stat_statements and pg_stat_database). No statement count (None) on a server without
    pg_stat_statements in shared_preload_libraries."""
    commits = conn.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()").fetchone()
    assert commits is not None
    try:
        calls = conn.execute("SELECT coalesce(sum(calls), 0) FROM pg_stat_statements s JOIN pg_database d "
                             "ON d.oid = s.dbid WHERE d.datname = current_database() AND s.toplevel").fetchone()
    except (psycopg.errors.ObjectNotInPrerequisiteState, psycopg.errors.UndefinedTable):
        return None, int(commits[0])
    return (int(calls[0]) if calls else None), int(commits[0])


def per_step(before: tuple[int | None, int], after: tuple[int | None, int], steps: int) -> tuple[float | None, float]:
    """(statements, commits) per step between two activity() readings."""
    calls = None if before[0] is None or after[0] is None else (after[0] - before[0]) / steps
    return calls, (after[1] - before[1]) / steps


def flush_stats(conn: psycopg.Connection[Any]) -> None:
    """pg_stat_database lags: each backend flushes its counters at most once a second."""
    conn.execute("SELECT pg_stat_force_next_flush()")
    time.sleep(1.1)  # the other backends' counters: nothing tells when they were flushed


def migrate(url: str) -> None:
    """One launch creates DBOS's schema, so that the enqueue can run before the measured workers start."""
    with dbos_workers(url, 1, 1, 1.0):
        pass


def throughput(url: str, workflows: int, processes: int, concurrency: int, poll: float) -> dict[str, Any]:
    """`workflows` ten-step workflows enqueued while no worker runs; then `processes` workers drain them.
    The time is the database's: the first step's start to the last step's completion."""
    _enqueue(url, "ten_steps", workflows)
    with psycopg.connect(url, autocommit=True) as conn:
        flush_stats(conn)
        before = activity(conn)
    with dbos_workers(url, processes, concurrency, poll), psycopg.connect(url, autocommit=True) as conn:
        wait_until(lambda: _counts(conn, "ten_steps") >= workflows, 1200, "the DBOS workflows", interval=0.05)
        flush_stats(conn)
        after = activity(conn)
        row = conn.execute("SELECT count(*), (max(completed_at_epoch_ms) - min(started_at_epoch_ms)) / 1000.0 "
                           "FROM dbos.operation_outputs WHERE function_name = 'noop'").fetchone()
    assert row is not None
    steps, seconds = int(row[0]), float(row[1])
    if steps != workflows * STEPS:
        raise RuntimeError(f"DBOS stored {steps} steps for {workflows} workflows of {STEPS}")
    statements, commits = per_step(before, after, steps)
    return {"workflows": workflows, "steps": steps, "seconds": seconds, "steps_per_s": steps / seconds,
            "statements_per_step": statements, "commits_per_step": commits,
            "processes": processes, "worker_concurrency": concurrency, "polling_interval_s": poll}


def _read_marks(proc: subprocess.Popen[str], marks: list[tuple[int, float]]) -> threading.Thread:
    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            parts = line.split()
            if len(parts) == 3 and parts[0] == "start":
                marks.append((int(parts[1]), float(parts[2])))
    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


def kill_resume(url: str, kill_at_step: int = 5, concurrency: int = 20, poll: float = 0.05) -> dict[str, Any]:
    """One slow workflow; SIGKILL its process once step `kill_at_step` started (the ones before it are
    stored), start the same executor again at once, and time the SIGKILL to the resumed step's start."""
    first_marks: list[tuple[int, float]] = []
    with dbos_workers(url, 1, concurrency, poll) as (first,):
        _read_marks(first, first_marks)
        _enqueue(url, "slow_steps", 1)
        wait_until(lambda: any(i == kill_at_step for i, _ in first_marks), 60, "the step to kill at")
        killed_at = time.time()
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
        second_marks: list[tuple[int, float]] = []
        second = _start(url, "w0", concurrency, poll)
        try:
            _read_marks(second, second_marks)
            wait_until(lambda: second_marks, 120, "the resumed step")
            with psycopg.connect(url, autocommit=True) as conn:
                wait_until(lambda: _counts(conn, "slow_steps") >= 1, 60, "the resumed workflow to finish")
        finally:
            second.terminate()
            second.wait(timeout=30)
    resumed_step, resumed_at = second_marks[0]
    redone = sorted({i for i, _ in second_marks if i < kill_at_step})
    return {"killed_during_step": kill_at_step, "resumed_step": resumed_step,
            "kill_to_resumed_step_s": resumed_at - killed_at, "completed_steps_run_again": redone,
            "how": "SIGKILL, then the same executor id started at once (DBOS recovers its pending "
                   "workflows at launch)"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("worker")
    serve.add_argument("--url", required=True)
    serve.add_argument("--executor", required=True)
    serve.add_argument("--concurrency", type=int, default=20)
    serve.add_argument("--poll", type=float, default=0.05)
    args = parser.parse_args()
    _serve(args.url, args.executor, args.concurrency, args.poll)


if __name__ == "__main__":
    main()
