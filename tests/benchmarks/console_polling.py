"""Does polling the console slow the workers? (not a test: run it by hand after console_pages.py --keep)

    python tests/benchmarks/console_polling.py [--jobs 20000] [--rounds 2]

On the scratch database console_pages.py built (1,000,000 queued + 100,000 dead + 1,000 running,
kept with --keep), a real worker process drains `--jobs` noop jobs, alternately with nobody watching
and with the overview fragment polled by `--pollers` threads every `--interval` seconds (default one
poll a second, five operators at the default 5-s refresh; 0 = back to back). Prints the drain rate
(jobs/s over the middle 90% of each drain) of every round.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from skiplock.webapp import create_app  # noqa: E402
from skiplock.webapp.db import close_app  # noqa: E402
from skiplock.webapp.settings import Account  # noqa: E402


def _remaining(conn: psycopg.Connection) -> int:
    return int(conn.execute("SELECT count(*) FROM jobs WHERE queue = 'noop'").fetchone()[0])  # type: ignore[index]


def drain(url: str, jobs: int, poll: bool, interval: float = 1.0, pollers: int = 1) -> tuple[float, int]:
    """Enqueue `jobs` noop jobs, drain them with one worker; returns (jobs/s, overview requests made)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO jobs (queue, payload) SELECT 'noop', '{}' FROM generate_series(1, %s)", (jobs,))
        stop = threading.Event()
        requests = [0]
        app = create_app({"DATABASE_URL": url, "SECRET_KEY": "bench", "ACCOUNTS": [Account("b", "admin", "pw")]})

        def poller() -> None:
            client = app.test_client()
            while not stop.is_set():
                client.get("/", auth=("b", "pw"), headers={"HX-Request": "true"})
                requests[0] += 1
                stop.wait(interval)  # a browser's poll period (0 = back to back)

        threads = [threading.Thread(target=poller) for _ in range(pollers if poll else 0)]
        for t in threads:
            t.start()
        env = {k: v for k, v in os.environ.items() if not k.startswith("SKIPLOCK_")}
        env.update({"DATABASE_URL": url, "SKIPLOCK_TASKS": "tests.support.handlers", "SKIPLOCK_QUEUES": "noop",
                    "SKIPLOCK_LOG_LEVEL": "WARNING", "PYTHONPATH": str(REPO)})
        worker = subprocess.Popen([sys.executable, "-m", "skiplock"], cwd=REPO, env=env)
        try:
            hi, lo = int(jobs * 0.95), int(jobs * 0.05)
            t_hi = t_lo = None
            while True:
                left = _remaining(conn)
                now = time.perf_counter()
                if t_hi is None and left <= hi:
                    t_hi = now
                if left <= lo:
                    t_lo = now
                    break
                time.sleep(0.05)  # a benchmark's sampling period, not test synchronisation
            assert t_hi is not None and t_lo is not None
            rate = (hi - lo) / max(t_lo - t_hi, 1e-6)
        finally:
            worker.terminate()
            worker.wait(timeout=60)
            stop.set()
            for t in threads:
                t.join()
            close_app(app)
            conn.execute("DELETE FROM jobs WHERE queue = 'noop'")
    return rate, requests[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db-url", default="postgresql://postgres@127.0.0.1:5432/skiplock_console_bench")
    parser.add_argument("--jobs", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between one poller's requests")
    parser.add_argument("--pollers", type=int, default=1, help="polling threads (browser tabs)")
    args = parser.parse_args()
    results: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(args.rounds):
        for poll in (False, True):
            rate, requests = drain(args.db_url, args.jobs, poll, args.interval, args.pollers)
            results[poll].append(rate)
            print(f"{'polled ' if poll else 'quiet  '} {rate:8.0f} jobs/s" + (f"  ({requests} overview requests)"
                                                                          if poll else ""), flush=True)
    quiet, polled = statistics.median(results[False]), statistics.median(results[True])
    print(f"median: quiet {quiet:.0f} jobs/s, polled {polled:.0f} jobs/s ({100 * (polled - quiet) / quiet:+.1f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
