"""The skiplock side of the durable-jobs benchmark (driver: tests.benchmarks.durable).

Every workload runs real `python -m skiplock` worker processes serving tests.benchmarks.durable_tasks, on
one scratch database of a server the driver picks; each returns a dict of figures and of the counts it
checked in the database, so a lost step or job shows instead of a fast number.
"""

from __future__ import annotations

import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg

import skiplock
from skiplock.tools.bench import (
    BENCH_QUEUE,
    ProbeReceiver,
    percentile,
    skiplock_workers,
    stop_processes,
    wait_until,
    worker_env,
)
from tests.benchmarks import durable_dbos
from tests.benchmarks.durable_tasks import QUEUE, SLOW_STEP_S

TASKS = "tests.benchmarks.durable_tasks"
REPO = Path(__file__).resolve().parents[2]


def _settings(**more: Any) -> dict[str, Any]:
    return {"tasks": TASKS, "queues": QUEUE, **more}


@contextlib.contextmanager
def workers(url: str, processes: int, probe_port: int = 0, **settings: Any) -> Iterator[None]:
    """`processes` idle skiplock workers serving the durable bench queue (PYTHONPATH: the repository,
    so that they import the bench's handlers)."""
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(REPO)
    try:
        with skiplock_workers(url, processes, probe_port, **_settings(**settings)):
            yield
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old


def reset(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        for table in ("jobs", "job_stats", "job_steps", "job_cursors", "job_waits", "job_signals"):
            conn.execute(f"TRUNCATE {table}")
        conn.execute("VACUUM ANALYZE jobs")


# ---- counting round trips and commits: the same counters as DBOS's side ------------------------------

_activity = durable_dbos.activity
_stats_flushed = durable_dbos.flush_stats


def _acked(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT coalesce(sum(completed + failed + dead), 0) FROM job_stats WHERE queue = %s",
                       (QUEUE,)).fetchone()
    return int(row[0]) if row else 0


def drain(url: str, jobs: int, steps: int, processes: int) -> dict[str, Any]:
    """`jobs` jobs of `steps` no-op steps each, committed at once into idle workers' queue; the time from
    that commit until every job is acked, with the statements and commits the database saw meanwhile."""
    reset(url)
    with workers(url, processes), psycopg.connect(url, autocommit=True) as conn:
        _stats_flushed(conn)
        before = _activity(conn)
        skiplock.enqueue_many([(QUEUE, {"steps": steps}) for _ in range(jobs)], conn=conn)
        committed = time.monotonic()
        wait_until(lambda: _acked(conn) >= jobs, 1200, "the step jobs", interval=0.01)
        seconds = time.monotonic() - committed
        stored = conn.execute("SELECT count(*) FROM job_steps").fetchone()
        _stats_flushed(conn)
        after = _activity(conn)
    # a succeeded job is deleted with history off, and its steps with it by the pruner later: counted
    # before the pruner's pass (its interval is minutes), they show each step was written once
    return {"jobs": jobs, "steps_per_job": steps, "processes": processes, "seconds": seconds,
            "jobs_per_s": jobs / seconds, "steps_per_s": jobs * steps / seconds if steps else None,
            "steps_stored": int(stored[0]) if stored else 0,
            "statements": None if after[0] is None or before[0] is None else after[0] - before[0],
            "commits": after[1] - before[1]}


def with_db_window(url: str, jobs: int, steps: int, processes: int) -> dict[str, Any]:
    """The DBOS comparison's shape: the jobs enqueued while no worker runs, then `processes` workers
    started; the time is the database's, from the first job's start to the last one's finish (history
    kept so their rows stay)."""
    reset(url)
    with psycopg.connect(url, autocommit=True) as conn:
        skiplock.enqueue_many([(QUEUE, {"steps": steps}) for _ in range(jobs)], conn=conn)
    with workers(url, processes, history_mode="keep"), psycopg.connect(url, autocommit=True) as conn:
        wait_until(lambda: _acked(conn) >= jobs, 1200, "the step jobs", interval=0.05)
        row = conn.execute("SELECT count(*) FILTER (WHERE status = 'succeeded'), "
                           "       extract(epoch FROM max(finished_at) - min(started_at)), "
                           "       (SELECT count(*) FROM job_steps) FROM jobs WHERE queue = %s", (QUEUE,)).fetchone()
    assert row is not None
    succeeded, seconds, stored = int(row[0]), float(row[1]), int(row[2])
    if (succeeded, stored) != (jobs, jobs * steps):
        raise RuntimeError(f"{succeeded} of {jobs} jobs succeeded, {stored} of {jobs * steps} steps stored")
    return {"jobs": jobs, "steps": stored, "seconds": seconds, "steps_per_s": stored / seconds,
            "processes": processes}


# ---- SIGKILL to the resumed step ---------------------------------------------------------------------


def _marks(path: Path) -> list[tuple[int, float]]:
    lines = path.read_text().split("\n") if path.exists() else []
    return [(int(p[1]), float(p[2])) for p in (line.split() for line in lines) if len(p) == 3]


def kill_resume(url: str, lease: float, reaper_interval: float, kill_at_step: int = 5) -> dict[str, Any]:
    """One job of slow steps; SIGKILL its worker once step `kill_at_step` started (the steps before it are
    stored), start a worker again at once, and time the SIGKILL to the resumed step's start. The job comes
    back when its lease expires and the reaper requeues it: the lease is the variable."""
    reset(url)
    settings = _settings(lease_seconds=lease, reaper_interval=reaper_interval)
    env = {**worker_env(url, **settings), "PYTHONPATH": str(REPO)}
    with tempfile.TemporaryDirectory() as tmp:
        marks = Path(tmp) / "marks"
        first = subprocess.Popen([sys.executable, "-m", "skiplock"], env=env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        with psycopg.connect(url, autocommit=True) as conn:
            skiplock.enqueue(QUEUE, {"slow": 10, "marks": str(marks)}, conn=conn)
        wait_until(lambda: any(i == kill_at_step for i, _ in _marks(marks)), 120, "the step to kill at")
        killed_at = time.time()
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
        before = len(_marks(marks))
        second = subprocess.Popen([sys.executable, "-m", "skiplock"], env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        try:
            wait_until(lambda: len(_marks(marks)) > before, 120 + lease, "the resumed step")
            with psycopg.connect(url, autocommit=True) as conn:
                wait_until(lambda: _acked(conn) >= 1, 60, "the resumed job to finish")
        finally:
            stop_processes([second])
        after = _marks(marks)[before:]
    resumed_step, resumed_at = after[0]
    return {"killed_during_step": kill_at_step, "resumed_step": resumed_step,
            "kill_to_resumed_step_s": resumed_at - killed_at,
            "completed_steps_run_again": sorted({i for i, _ in after if i < kill_at_step}),
            "lease_s": lease, "reaper_interval_s": reaper_interval, "step_s": SLOW_STEP_S,
            "how": "SIGKILL, then a worker started at once; the job is requeued by the reaper once its "
                   "lease expires"}


# ---- signal to handler start ------------------------------------------------------------------------


def signal_latency(url: str, signals: int, rate: float) -> dict[str, Any]:
    """`signals` jobs parked on their own keys, then one signal every 1/rate s; and, in the same run and
    worker, as many plain jobs enqueued at the same rate. Latency: the signal's (or enqueue's) commit to
    the handler's start after it (for a woken job: its wait_for returning, the re-run's first call)."""
    reset(url)
    probe = ProbeReceiver()
    gap = 1.0 / rate
    try:
        with workers(url, 1, probe.port), psycopg.connect(url, autocommit=True) as conn:
            skiplock.enqueue_many([(QUEUE, {"key": f"k{seq}", "p": seq}) for seq in range(signals)], conn=conn)
            wait_until(lambda: conn.execute("SELECT count(*) FROM job_waits").fetchone()[0] >= signals,  # type: ignore[index]
                       300, "every job to park")
            signalled: dict[int, float] = {}
            woke = 0
            for seq in range(signals):
                woke += skiplock.signal(f"k{seq}", {"t": time.time()}, conn=conn)
                signalled[seq] = time.time()
                time.sleep(gap)  # pacing the sender, not synchronisation
            wait_until(lambda: len(probe.samples) >= signals, 60, "every signalled job's handler")
            woken = dict(probe.samples)
            probe.samples.clear()
            enqueued: dict[int, float] = {}
            for seq in range(signals):
                skiplock.enqueue(QUEUE, {"p": seq, "t": time.time()}, conn=conn)
                enqueued[seq] = time.time()
                time.sleep(gap)
            wait_until(lambda: len(probe.samples) >= signals, 60, "every plain job's handler")
            plain = dict(probe.samples)
    finally:
        probe.close()
    signal_ms = [(woken[s][1] - signalled[s]) * 1000 for s in signalled]
    pickup_ms = [(plain[s][1] - enqueued[s]) * 1000 for s in enqueued]
    return {"signals": signals, "rate_per_s": rate, "woke": woke,
            "signal_p50_ms": percentile(signal_ms, 50), "signal_p99_ms": percentile(signal_ms, 99),
            "pickup_p50_ms": percentile(pickup_ms, 50), "pickup_p99_ms": percentile(pickup_ms, 99),
            "signal_median_ms": statistics.median(signal_ms)}


# ---- 100,000 parked jobs and the claims of other queues -----------------------------------------------

# Parked jobs in bulk, half asleep for a day and half waiting on their own key with no timeout, each with
# its wait row: the rows skiplock_park writes, made in one statement because parking 100,000 jobs one by
# one through workers would take most of the benchmark's time. Benchmark data only.
SEED_PARKED = """
WITH parked AS (
    INSERT INTO jobs (queue, status, payload, run_at)
    SELECT 'parked_bench', 'parked',
           jsonb_build_object('n', g),
           CASE WHEN g %% 2 = 0 THEN now() + interval '1 day' ELSE '9999-12-31 00:00:00+00' END
      FROM generate_series(1, %(n)s) g
    RETURNING id, queue, run_at
)
INSERT INTO job_waits (job_id, queue, sleep, key, wake_at)
SELECT id, queue, CASE WHEN run_at < '9999-12-31' THEN 'nap' END,
       CASE WHEN run_at >= '9999-12-31' THEN 'order-' || id END, run_at
  FROM parked
"""


def seed_parked(url: str, n: int) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(SEED_PARKED, {"n": n})
        conn.execute("VACUUM ANALYZE jobs")
        conn.execute("VACUUM ANALYZE job_waits")


def clear_parked(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DELETE FROM job_waits")
        conn.execute("DELETE FROM jobs WHERE queue = 'parked_bench'")
        conn.execute("VACUUM ANALYZE jobs")


def plain_drain(url: str, jobs: int, processes: int) -> float:
    """Jobs per second of `jobs` plain no-op jobs of another queue, committed at once into idle workers."""
    from skiplock.tools.bench import clear_jobs, wait_acked

    clear_jobs(url)
    with skiplock_workers(url, processes), psycopg.connect(url, autocommit=True) as conn:
        skiplock.enqueue_many([(BENCH_QUEUE, {}) for _ in range(jobs)], conn=conn)
        committed = time.monotonic()
        done = wait_acked(url, jobs, 600)
    return jobs / (done - committed)


def paired_claims(empty_url: str, parked_url: str, samples: int = 200, batch: int = 50) -> dict[str, Any]:
    """Median time of one real claim of `batch` jobs on each database, the samples interleaved one by one
    (empty, parked, empty, ...) so that the machine's other load falls on both alike. The claimed jobs sit
    in a side queue no bench worker serves, and are deleted afterwards."""
    from skiplock.core import state_changes
    from skiplock.tools import bench_seed

    side = "claims_bench"
    times: dict[str, list[float]] = {"empty": [], "parked": []}
    with psycopg.connect(empty_url, autocommit=True) as empty, psycopg.connect(parked_url, autocommit=True) as full:
        conns = {"empty": empty, "parked": full}
        for conn in conns.values():
            state_changes.claim_session(conn)
            bench_seed.seed_ready_jobs(conn, side, batch * samples)
            conn.execute("VACUUM ANALYZE jobs")
            _reset_statements(conn)
        for i in range(samples):
            for name in (("empty", "parked") if i % 2 == 0 else ("parked", "empty")):
                started = time.perf_counter()
                got = state_changes.claim(conns[name], "bench-claims", [side], [30.0], batch)
                times[name].append(time.perf_counter() - started)
                if len(got) != batch:
                    raise RuntimeError(f"a claim on the {name} database took {len(got)} jobs, not {batch}")
        executed = {name: _claim_exec_ms(conn, samples) for name, conn in conns.items()}
        for conn in conns.values():
            bench_seed.delete_queue(conn, side)
    empty_ms, parked_ms = (statistics.median(times[n]) * 1000 for n in ("empty", "parked"))
    exec_ratio = (executed["empty"] / executed["parked"]) if executed["empty"] and executed["parked"] else None
    return {"samples": samples, "batch": batch, "empty_claim_ms": empty_ms, "parked_claim_ms": parked_ms,
            "ratio": empty_ms / parked_ms, "empty_exec_ms": executed["empty"], "parked_exec_ms": executed["parked"],
            "exec_ratio": exec_ratio}


def _reset_statements(conn: psycopg.Connection[Any]) -> None:
    """Zero this database's pg_stat_statements counters, where the server has them."""
    with contextlib.suppress(psycopg.errors.UndefinedFunction, psycopg.errors.ObjectNotInPrerequisiteState):
        conn.execute("SELECT pg_stat_statements_reset(0, (SELECT oid FROM pg_database "
                     "WHERE datname = current_database()), 0)")


def _claim_exec_ms(conn: psycopg.Connection[Any], samples: int) -> float | None:
    """The claim statement's mean execution time in this database (pg_stat_statements: the server's own
    time for the statement, without the round trip and the commit's WAL flush, which the machine's other
    load stretches): the statement run `samples` times since the reset that took the most time."""
    try:
        row = conn.execute("SELECT mean_exec_time FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid "
                           " WHERE d.datname = current_database() AND s.calls >= %s "
                           " ORDER BY s.total_exec_time DESC LIMIT 1", (samples,)).fetchone()
    except (psycopg.errors.UndefinedTable, psycopg.errors.ObjectNotInPrerequisiteState):
        return None
    return float(row[0]) if row else None
