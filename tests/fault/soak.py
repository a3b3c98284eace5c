"""A longer soak than CI can afford: `python -m tests.fault.soak --minutes 10`.

Creates its own database on the server of DATABASE_URL (else 127.0.0.1:5432 as postgres), runs
N real workers, enqueues at a steady rate, and every so often SIGKILLs a worker (replacing it) and
terminates every worker connection. Every 10 s it prints queue depth, jobs table size and the
autovacuum count (autovacuum alone must keep the table bounded here; nothing runs VACUUM by hand).
At the end it drains, prints the books and exits 1 if any job was lost. The database is dropped.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import time
import uuid

import psycopg

from skiplock import enqueue_many
from skiplock.core.plumbing.migrate import apply_migrations
from tests.conftest import REPO, TEST_TABLES_SQL, worker_env
from tests.fault.books import audit
from tests.support.helpers import scalar
from tests.support.pgcluster import find_server, with_database

KILL_SQL = ("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = current_database() "
            "AND application_name LIKE 'skiplock-%' AND application_name <> 'skiplock-producer'")
STATS_SQL = ("SELECT (SELECT count(*) FROM jobs WHERE status = 'queued'), pg_total_relation_size('jobs'), "
             "(SELECT autovacuum_count FROM pg_stat_user_tables WHERE relname = 'jobs')")
SETTINGS = {"SKIPLOCK_LEASE_SECONDS": "5", "SKIPLOCK_REAPER_INTERVAL": "1", "SKIPLOCK_LOG_LEVEL": "WARNING",
            "SKIPLOCK_BACKOFF_BASE": "0.2", "SKIPLOCK_BACKOFF_CAP": "2"}


def spawn(url: str, log_dir: str, n: int) -> subprocess.Popen[bytes]:
    """One `python -m skiplock` process logging to a file."""
    with open(os.path.join(log_dir, f"worker-{n}.log"), "wb") as log:
        return subprocess.Popen([sys.executable, "-m", "skiplock"], cwd=REPO, env=worker_env(url, **SETTINGS),
                                stdout=log, stderr=subprocess.STDOUT)


def produce(n: int) -> list[int]:
    """Enqueue n jobs; a producer connection cut from outside is retried once with a fresh one."""
    try:
        return enqueue_many([("t1", {"sleep": 0.005}) for _ in range(n)])
    except psycopg.OperationalError:
        return enqueue_many([("t1", {"sleep": 0.005}) for _ in range(n)])


def main() -> int:
    """Run the soak; exit status 1 if anything was lost."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--rate", type=float, default=200.0, help="jobs enqueued per second")
    parser.add_argument("--kill-every", type=float, default=30.0, help="seconds between worker SIGKILLs")
    parser.add_argument("--cut-every", type=float, default=45.0, help="seconds between connection cuts")
    args = parser.parse_args()

    admin_url, cluster = find_server()
    name = f"skiplock_soak_{uuid.uuid4().hex[:6]}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = with_database(admin_url, name)
    os.environ["DATABASE_URL"] = url  # the in-process producer's pool
    log_dir = f"/tmp/{name}"
    os.makedirs(log_dir)
    workers: list[subprocess.Popen[bytes]] = []
    try:
        apply_migrations(url)
        conn = psycopg.connect(url, autocommit=True, application_name="soak")
        conn.execute(TEST_TABLES_SQL)
        workers = [spawn(url, log_dir, i) for i in range(args.workers)]
        rng = random.Random(1)
        ids: list[int] = []
        kills = cuts = 0
        begin = time.monotonic()
        next_kill, next_cut, next_report = begin + args.kill_every, begin + args.cut_every, begin + 10
        tick = begin
        while time.monotonic() - begin < args.minutes * 60:
            ids += produce(max(1, round(args.rate / 4)))
            now = time.monotonic()
            if now >= next_kill:
                i = rng.randrange(len(workers))
                workers[i].send_signal(signal.SIGKILL)
                workers[i].wait()
                workers[i] = spawn(url, log_dir, len(ids))
                kills, next_kill = kills + 1, now + args.kill_every
            if now >= next_cut:
                conn.execute(KILL_SQL)
                cuts, next_cut = cuts + 1, now + args.cut_every
            if now >= next_report:
                stats = conn.execute(STATS_SQL).fetchone()
                assert stats is not None  # one row of aggregates
                depth, size, autovacuums = stats
                print(f"t={now - begin:5.0f}s enqueued={len(ids)} depth={depth} size_kb={size // 1024} "
                      f"autovacuums={autovacuums} kills={kills} cuts={cuts}", flush=True)
                next_report = now + 10
            tick += 0.25
            time.sleep(max(0.0, tick - time.monotonic()))  # pacing the producer, not synchronising
        deadline = time.monotonic() + 300
        while scalar(conn, "SELECT count(*) FROM jobs WHERE status IN ('queued','running')"):
            if time.monotonic() > deadline:
                print("soak: the queue did not drain within 5 minutes", flush=True)
                break
            time.sleep(1)
        books = audit(conn, "soak", ids)
        books.extra.update(kills=kills, cuts=cuts, minutes=args.minutes)
        print(books.line(), flush=True)
        conn.close()
        return 1 if books.lost or books.queued or books.running else 0
    finally:
        for w in workers:
            w.send_signal(signal.SIGKILL)
            w.wait()
        from skiplock.core.producer import close_default_pool

        close_default_pool()
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if cluster is not None:
            cluster.destroy()


if __name__ == "__main__":
    sys.exit(main())
