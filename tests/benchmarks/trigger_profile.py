"""What the insert trigger costs producers, measured inside PostgreSQL rather than as a ratio of two runs.

    python -m tests.benchmarks.trigger_profile [--clients 16 64] [--seconds 8] [--rounds 2] [--inserts 300]

Two measurements, each on a scratch database:
- **racing producers**: `clients` pgbench connections insert one job per transaction while two workers
  keep up (as tests/benchmarks/producers.py runs them), alternating the trigger on and off, while a
  thread samples what the producers' sessions wait on (pg_stat_activity, every 20 ms). The database
  has track_functions = 'all', so pg_stat_user_functions gives the trigger function's calls and time; its
  share of the producers' backend time is that time over clients x seconds. An SQL function that is inlined
  is never called, so `skiplock_claimable` (asked by the hand-off) must not appear.
- **one hand-off, statement by statement**: one producer connection and one fake idle worker (its waiter
  row, and a listener holding its key). Each round registers the waiter as a worker does and inserts one
  job, which the trigger hands over; the same INSERT with nobody waiting (the trigger's WHEN skips the
  function) and with the trigger disabled alternate with it. Then auto_explain times each statement the
  trigger runs.
Each line states the 1-minute load average it ran under.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import threading
import time
from collections import Counter, defaultdict
from typing import Any

import psycopg
from psycopg import conninfo

from skiplock.core.features import handoff
from skiplock.tools.bench import scratch_database, skiplock_workers
from tests.benchmarks.producers import WORKER_POLL_SECONDS, _settle, _trigger, pgbench_tps

FUNCTION = "skiplock_notify_jobs"
REGISTER = ("INSERT INTO queue_waiters (worker_id, queue, lease, version, listen_key) "
            "VALUES ('profile-worker', 'profile', 30, 1, %s) ON CONFLICT DO NOTHING")
FLAG = "SELECT setval('skiplock_waiting', 1, true) WHERE pg_sequence_last_value('skiplock_waiting') IS NULL"
INSERT = "INSERT INTO jobs (queue, payload) VALUES ('profile', '{\"n\": 1}')"


def _functions(url: str) -> dict[str, tuple[int, float]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return {r[0]: (r[1], r[2]) for r in conn.execute(
            "SELECT funcname, calls, total_time FROM pg_stat_user_functions")}


class WaitSampler:
    """What the producers' backends wait on: pg_stat_activity of pgbench's sessions, sampled every 20 ms."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.counts: Counter[str] = Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> WaitSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self._stop.wait(0.02):
                for state, event in conn.execute(
                        "SELECT state, coalesce(wait_event_type || ':' || wait_event, 'on CPU') FROM pg_stat_activity "
                        "WHERE application_name = 'pgbench' AND datname = current_database()").fetchall():
                    # idle: between statements, on the client's side (pgbench's own turn, or the network)
                    self.counts["client" if state == "idle" else event] += 1

    def top(self, n: int = 6) -> dict[str, float]:
        total = sum(self.counts.values()) or 1
        return {event: round(count / total, 3) for event, count in self.counts.most_common(n)}


def racing(url: str, clients: list[int], seconds: float, rounds: int) -> None:
    """The trigger function's calls and time while pgbench producers race two workers."""
    name = conninfo.conninfo_to_dict(url)["dbname"]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"ALTER DATABASE \"{name}\" SET track_functions = 'all'")  # new sessions: the workers' too
    with skiplock_workers(url, 2, concurrency=50, batch_size=50, poll_interval=WORKER_POLL_SECONDS):
        for count in clients:
            for _ in range(rounds):
                for enabled in (True, False):
                    _trigger(url, enabled)
                    _settle(url, 2)
                    time.sleep(0.6)  # the statistics of the settle reach the cumulative view
                    before, load = _functions(url), os.getloadavg()[0]
                    with WaitSampler(url) as waits:
                        tps = pgbench_tps(url, count, seconds)
                    time.sleep(1.0)
                    after = _functions(url)
                    row: dict[str, Any] = {"clients": count, "trigger": enabled, "tps": round(tps),
                                           "load": round(load, 1)}
                    for function in sorted(after):
                        calls = after[function][0] - before.get(function, (0, 0.0))[0]
                        spent = after[function][1] - before.get(function, (0, 0.0))[1]
                        if calls:
                            row[function] = {"calls": calls, "ms": round(spent, 1),
                                             "us_per_call": round(1000 * spent / calls)}
                    row["producers_waiting_on"] = waits.top()
                    if FUNCTION in row:
                        row["calls_per_insert"] = round(row[FUNCTION]["calls"] / (tps * seconds), 3)
                        row["share_of_producer_time"] = round(row[FUNCTION]["ms"] / 1000 / (count * seconds), 4)
                    print(json.dumps(row), flush=True)
            _trigger(url, True)


def one_handoff(url: str, inserts: int) -> None:
    """One producer's INSERT with the trigger handing its job over, against nobody waiting and no trigger."""
    with (psycopg.connect(url, autocommit=True) as listener, psycopg.connect(url, autocommit=True) as worker,
          psycopg.connect(url, autocommit=True) as producer):
        listener.execute(f"LISTEN {handoff.HANDOFF_CHANNEL}")
        key = handoff.take_listen_key(listener)
        times: dict[str, list[float]] = {"hand-off": [], "nobody waits": [], "trigger disabled": []}
        for index in range(inserts):
            for kind, spent in times.items():
                if kind == "hand-off":
                    worker.execute(REGISTER, (key,))
                    worker.execute(FLAG)
                if kind == "trigger disabled":
                    producer.execute("ALTER TABLE jobs DISABLE TRIGGER jobs_notify_insert")
                started = time.perf_counter()
                producer.execute(INSERT)
                spent.append(time.perf_counter() - started)
                if kind == "trigger disabled":
                    producer.execute("ALTER TABLE jobs ENABLE TRIGGER jobs_notify_insert")
                for _ in listener.notifies(timeout=0.0, stop_after=1):
                    pass
            if index % 50 == 49:
                producer.execute("DELETE FROM jobs")
        load = os.getloadavg()[0]
        for kind, spent in times.items():
            print(f"autocommit INSERT, {kind:<16} median {1e6 * statistics.median(spent[10:]):6.0f} us "
                  f"(load {load:.1f})")
        # the statements the trigger runs, each timed, sent to this client as NOTICEs
        notes: list[str] = []
        producer.add_notice_handler(lambda diagnostic: notes.append(diagnostic.message_primary or ""))
        producer.execute("LOAD 'auto_explain'")
        for setting in ("log_min_duration = 0", "log_analyze = on", "log_nested_statements = on",
                        "log_level = notice"):
            producer.execute(f"SET auto_explain.{setting}")
        statements: dict[str, list[float]] = defaultdict(list)
        for _ in range(60):
            worker.execute(REGISTER, (key,))
            worker.execute(FLAG)
            notes.clear()
            producer.execute(INSERT)
            for note in notes:
                found = re.search(r"duration: ([\d.]+) ms\s+plan:\s*Query Text: (.*?)\n", note, re.S)
                if found:
                    statements[" ".join(found.group(2).split())[:80]].append(float(found.group(1)))
            for _ in listener.notifies(timeout=0.0, stop_after=1):
                pass
        print(f"under auto_explain, medians of 60 hand-offs (load {os.getloadavg()[0]:.1f}):")
        for text, spent in sorted(statements.items(), key=lambda item: -statistics.median(item[1])):
            print(f"  {1000 * statistics.median(spent):6.0f} us  {text}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--inserts", type=int, default=300)
    args = parser.parse_args()
    admin = os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
    with scratch_database(admin, prefix="skiplock_trigger_profile") as url:
        one_handoff(url, args.inserts)
    with scratch_database(admin, prefix="skiplock_trigger_profile") as url:
        racing(url, args.clients, args.seconds, args.rounds)


if __name__ == "__main__":
    main()
