"""Batch handlers against one job per call, writing events into a table, in one run (run it by hand).

    python -m tests.benchmarks.batch [--events 100000] [--rounds 1]

For each round, both ways, alternated (the order reversed every other round): `--events` jobs are
seeded in one INSERT while one worker process (SKIPLOCK_CONCURRENCY=10, the default) is listening, and
the clock runs from the seed's commit until every event is a row of `bench_events`
(tests/benchmarks/batch_tasks.py: one INSERT per job, or one COPY per batch of up to 500). One job is
run first, outside the clock, so that the handlers' connections are open. Prints each drain's rows/s
and the CPU it cost per row (the worker process and its PostgreSQL backends, from /proc: a measure the
machine's other load disturbs less than the clock), with the load average before it, and per round
the ratios batch / one-per-call.
DATABASE_URL names a scratch database: the queues' jobs and `bench_events` are emptied first.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import psycopg

from skiplock.core.plumbing.migrate import apply_migrations
from skiplock.tools import bench, bench_seed
from tests.benchmarks.batch_tasks import BATCH, ONE
from tests.benchmarks.proc_cpu import cpu_seconds

TASKS = "tests.benchmarks.batch_tasks"


def prepare(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS bench_events (id bigserial PRIMARY KEY, job_id bigint NOT NULL, "
                     "kind text NOT NULL, payload jsonb NOT NULL, at timestamptz NOT NULL DEFAULT now())")
        conn.execute("TRUNCATE bench_events")
        for queue in (ONE, BATCH):
            bench_seed.delete_queue(conn, queue)
        conn.execute("VACUUM ANALYZE jobs")




def drain_pids(conn: psycopg.Connection) -> list[int]:
    """The drain's processes: the worker (this process's children) and the PostgreSQL backends serving
    it and its handlers (all on this machine)."""
    children = [int(d.name) for d in Path("/proc").iterdir() if d.name.isdigit()
                and _parent(int(d.name)) == os.getpid()]
    backends = [r[0] for r in conn.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")]
    return children + backends


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def drain(url: str, queue: str, events: int) -> tuple[float, float]:
    """(rows per second, CPU microseconds per row) for `events` jobs of `queue`: the clock from the seed's
    commit to the last row written; the CPU of the worker and of its PostgreSQL backends meanwhile."""
    prepare(url)
    kind = "batch" if queue == BATCH else "one"
    with bench.skiplock_workers(url, 1, tasks=TASKS, queues=queue, concurrency=10), \
            psycopg.connect(url, autocommit=True) as conn:
        # the handlers' own connections open on their first job: seed one job first, outside the clock
        bench_seed.seed_ready_jobs(conn, queue, 1)
        bench.wait_until(lambda: conn.execute("SELECT count(*) FROM bench_events").fetchone() == (1,), 60,
                         "the first event", interval=0.05)
        conn.execute("TRUNCATE bench_events")
        bench.wait_until(lambda: conn.execute("SELECT count(*) FROM jobs WHERE queue = %s",
                                              (queue,)).fetchone() == (0,), 60, "the first ack", interval=0.05)
        pids = drain_pids(conn)
        cpu_before = cpu_seconds(pids)
        bench_seed.seed_ready_jobs(conn, queue, events)
        committed = time.monotonic()
        deadline = committed + max(120.0, events / 50)
        while True:
            row = conn.execute("SELECT count(*) FROM bench_events WHERE kind = %s", (kind,)).fetchone()
            if row is not None and row[0] >= events:
                done = time.monotonic()
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{queue}: only {row[0] if row else 0} of {events} events written in time")
            time.sleep(0.1)
        cpu = cpu_seconds(pids) - cpu_before
        bench.wait_until(lambda: conn.execute("SELECT count(*) FROM jobs WHERE queue = %s",
                                              (queue,)).fetchone() == (0,), 120, "the last acks", interval=0.2)
    return events / (done - committed), cpu / events * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    url = os.environ["DATABASE_URL"]
    apply_migrations(url)
    ratios: list[float] = []
    cpu_ratios: list[float] = []
    for round_no in range(args.rounds):
        order = [BATCH, ONE] if round_no % 2 == 0 else [ONE, BATCH]
        rates: dict[str, float] = {}
        cpu: dict[str, float] = {}
        for queue in order:
            load = Path("/proc/loadavg").read_text().split()[0]
            rates[queue], cpu[queue] = drain(url, queue, args.events)
            print(f"round {round_no + 1} {queue:20} {rates[queue]:9.0f} rows/s {cpu[queue]:7.0f} CPU us/row "
                  f"(load {load})", flush=True)
        ratios.append(rates[BATCH] / rates[ONE])
        cpu_ratios.append(cpu[ONE] / cpu[BATCH])
        print(f"round {round_no + 1}: batch / one-per-call = {ratios[-1]:.1f}x rows/s, "
              f"{cpu_ratios[-1]:.1f}x less CPU per row", flush=True)
    print(f"median over {args.rounds} round(s): {statistics.median(ratios):.1f}x rows/s, "
          f"{statistics.median(cpu_ratios):.1f}x less CPU per row")


if __name__ == "__main__":
    main()
