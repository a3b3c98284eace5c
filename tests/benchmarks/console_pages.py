"""Console page timings on a big table (not a test: run it by hand, it takes a few minutes).

    python tests/benchmarks/console_pages.py [--admin-url postgresql://postgres@127.0.0.1:5432/postgres]
                                             [--requests 20] [--keep] [--json PATH] [--pages REGEX]

Builds a scratch database with 1,000,000 queued (ready, over 4 queues and 3 priorities, plus
some scheduled), 100,000 dead (a handful of error kinds; 1,000 of them with 20 recorded attempts)
and 1,000 running jobs on 50 workers with generate_series INSERTs, 200 recurring schedules with their
last 10 fires, 7 days of per-minute job_stats from 15 workers for 4 queues (604,800 rows) and a day
of run-time histograms, and a workflow through the public API (1 -> 10,000 -> 1, the 10,000 a batch;
its root run and 2,000 of the 10,000 drained, so the DAG holds three states). After VACUUM ANALYZE and
one pass of the pruner (it rolls job_stats up per hour, as a worker's pruner does every minute), it
requests each console page through the Flask test client (in process, so the time is the server's:
routing, SQL, templates) and prints p50/p95 per page, with the CPU time of this process and the
console's database backends per request. Nothing is asserted. `--only-workflow` builds the workflow alone.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from skiplock.core.features import stats_rollup
from skiplock.core.plumbing.migrate import apply_migrations
from skiplock.webapp import create_app
from skiplock.webapp.db import close_app
from skiplock.webapp.settings import Account

DB = "skiplock_console_bench"
WORKFLOW_FANOUT = 10_000
WORKFLOW_DRAINED = 2_000  # children run before timing: succeeded (rows deleted), the rest queued

BUILD = [
    # 1,000,000 queued: 970,000 ready spread over 4 queues and 3 priorities, 30,000 scheduled
    """INSERT INTO jobs (queue, priority, run_at, payload, unique_key)
       SELECT (ARRAY['emails','reports','webhooks','images'])[1 + g % 4], g % 3,
              now() - make_interval(secs => (g % 3600)),
              jsonb_build_object('n', g, 'to', 'user' || g || '@example.com'),
              CASE WHEN g % 10 = 0 THEN 'key:' || g END
         FROM generate_series(1, 970000) g""",
    """INSERT INTO jobs (queue, run_at, payload)
       SELECT (ARRAY['emails','reports'])[1 + g % 2], now() + make_interval(secs => g), jsonb_build_object('n', g)
         FROM generate_series(1, 30000) g""",
    # 100,000 dead over the last 10 days with five kinds of error
    """INSERT INTO jobs (queue, status, attempts, max_attempts, payload, finished_at, last_error)
       SELECT (ARRAY['emails','webhooks','reports'])[1 + g % 3], 'dead', 20, 20, jsonb_build_object('n', g),
              now() - make_interval(secs => (g * 8.64)),
              (ARRAY['TimeoutError: upstream took longer than 30s', 'KeyError: ''customer_id''',
                     'SMTPServerDisconnected: Connection unexpectedly closed', 'ValueError: bad payload',
                     'lease expired: worker w-1 stopped heartbeating during attempt 20'])[1 + g % 5]
              || E'\\nTraceback (most recent call last):\\n  File "app/tasks.py", line 42, in handler\\n'
         FROM generate_series(1, 100000) g""",
    # 1,000 running on 50 workers
    """INSERT INTO jobs (queue, status, attempts, payload, started_at, lease_until, worker_id)
       SELECT (ARRAY['emails','webhooks'])[1 + g % 2], 'running', 1, jsonb_build_object('n', g),
              now() - make_interval(secs => g), now() + interval '30 seconds', 'w-' || (g % 50)
         FROM generate_series(1, 1000) g""",
    """INSERT INTO workers (id, host, pid, queues, concurrency, in_flight)
       SELECT 'w-' || g, 'host-' || g, 1000 + g, ARRAY['emails','webhooks','reports','images'], 20, 20
         FROM generate_series(0, 49) g""",
    # 7 days of per-minute outcome counts from 15 workers for 4 queues (604,800 rows, as the workers
    # leave job_stats at the default SKIPLOCK_STATS_RETENTION of 8 days), with a failure rate that
    # varies by queue and hour, so the failure-rate chart has bars of every height to draw
    """INSERT INTO job_stats (minute, queue, worker_id, completed, retried, failed, dead)
       SELECT date_trunc('minute', now()) - make_interval(mins => m), q, 'w-' || w,
              50 + (m + w) % 40, (m / 60 + w + length(q)) % 7, (m + w) % 50 / 49, (m / 60 + length(q)) % 11 / 10
         FROM generate_series(0, 7 * 1440 - 1) m, unnest(ARRAY['emails','reports','webhooks','images']) q,
              generate_series(0, 14) w""",
    # 200 recurring schedules, each with its last 10 fires (the Recurring page shows a schedule's last runs)
    """INSERT INTO recurring_schedules (name, queue, kind, schedule, last_fire_at, next_fire_at)
       SELECT 'schedule-' || g, (ARRAY['emails','reports','webhooks','images'])[1 + g % 4], 'interval',
              (300 + g) || 's', now() - make_interval(secs => g), now() + make_interval(secs => 300)
         FROM generate_series(1, 200) g""",
    # (a tenth of the schedules' newest run is a dead job; the other runs' jobs succeeded and are gone)
    """INSERT INTO recurring_slots (name, fire_at, job_id, enqueued_at)
       SELECT 'schedule-' || g, now() - make_interval(secs => g + 300 * k),
              CASE WHEN k = 0 AND g % 10 = 0 THEN d.first + g ELSE 5000000 + g * 10 + k END,
              now() - make_interval(secs => g + 300 * k)
         FROM generate_series(1, 200) g, generate_series(0, 9) k,
              (SELECT min(id) AS first FROM jobs WHERE status = 'dead') d""",
    # 1,000 dead jobs with the attempt history a worker records (jobs.attempt_errors, the last 20 runs),
    # which the dead job page's timeline draws
    """UPDATE jobs SET attempt_errors = (
           SELECT jsonb_agg(jsonb_build_object(
                      'attempt', a, 'worker', 'w-' || (a % 50), 'duration_ms', 30000.0 + a,
                      'started', finished_at - make_interval(secs => 3600 * (20 - a) + 30),
                      'at', finished_at - make_interval(secs => 3600 * (20 - a)),
                      'error', 'TimeoutError: upstream took longer than 30s' ||
                               E'\\nTraceback (most recent call last):\\n  File "app/tasks.py", line 42') ORDER BY a)
             FROM generate_series(1, 20) a)
        WHERE id IN (SELECT id FROM jobs WHERE status = 'dead' ORDER BY id LIMIT 1000)""",
    # a day of per-minute run-time histograms (migration 028) from the 10 workers for 4 queues
    """INSERT INTO job_runtimes (minute, queue, worker_id, counts, total, sum_s, max_s)
       SELECT date_trunc('minute', now()) - make_interval(mins => m), q, 'w-' || w,
              ARRAY[0,0,0,5,20,40,20,10,3,1,1,0,0,0,0,0,0,0,0,0,0,0]::bigint[], 100, 9.5, 1.8
         FROM generate_series(0, 1439) m, unnest(ARRAY['emails','reports','webhooks','images']) q,
              generate_series(0, 9) w""",
]


def build_workflow(url: str) -> dict[str, int]:
    """1 -> 10,000 -> 1 through the public API (the 10,000 are a batch), then the root and 2,000
    children run by skiplock.tools.testing.drain; the ids the pages are timed on."""
    import skiplock
    from skiplock import task
    from skiplock.tools import testing

    @task("bench_wf")
    def noop(payload: Any) -> Any:
        return {"n": payload.get("n")}

    started = time.perf_counter()
    with psycopg.connect(url) as conn:
        root = skiplock.enqueue("bench_wf", {"n": 0}, conn=conn)
        with skiplock.batch(on_complete=("bench_wf_done", {}), conn=conn) as b:
            kids = b.enqueue_many([{"queue": "bench_wf", "payload": {"n": i}, "depends_on": [root]}
                                   for i in range(1, WORKFLOW_FANOUT + 1)])
        summary = skiplock.enqueue("bench_wf_done", {}, depends_on=kids, conn=conn)
        conn.commit()
    print(f"  built in {time.perf_counter() - started:5.1f}s: a workflow 1 -> {WORKFLOW_FANOUT:,} -> 1", flush=True)
    started = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        with contextlib.suppress(testing.DrainLimitExceeded):  # the rest stay queued: a workflow in progress
            testing.drain("bench_wf", conn=conn, max_jobs=1 + WORKFLOW_DRAINED)
        conn.execute("VACUUM ANALYZE jobs")
        conn.execute("VACUUM ANALYZE job_deps")
        conn.execute("VACUUM ANALYZE job_results")
    print(f"  ran in {time.perf_counter() - started:5.1f}s: its root and {WORKFLOW_DRAINED:,} children", flush=True)
    return {"root": root, "batch": b.id, "summary": summary, "child": kids[-1]}


def build(admin_url: str, only_workflow: bool = False) -> tuple[str, dict[str, int]]:
    """Create the scratch database and fill it; returns its URL and the workflow's ids.

    The workflow is made and partly run first: testing.drain claims one job at a time, and that
    is slow beside a million ready jobs of other queues."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{DB}"')
    url = psycopg.conninfo.make_conninfo(admin_url, dbname=DB)
    apply_migrations(url)
    os.environ["DATABASE_URL"] = url  # the producer and testing.drain use it
    wf = build_workflow(url)
    with psycopg.connect(url, autocommit=True) as conn:
        for sql in [] if only_workflow else BUILD:
            started = time.perf_counter()
            conn.execute(sql)
            print(f"  built in {time.perf_counter() - started:5.1f}s: {sql.split()[2]} {' '.join(sql.split()[3:6])}...",
                  flush=True)
        # every table, as autovacuum would have by now (job_stats' plans need its statistics)
        conn.execute("VACUUM ANALYZE")
        # the hourly rollup of job_stats (migration 033) that the workers' pruner keeps
        while stats_rollup.roll_up(conn):
            pass
        conn.execute("VACUUM ANALYZE job_stats_hourly")
    return url, wf


def workflow_pages(wf: dict[str, int]) -> list[tuple[str, str, dict]]:
    """The workflow console's pages on the 10,000-job workflow (issue 33: p95 < 100 ms)."""
    hx = {"headers": {"HX-Request": "true"}}
    return [
        ("workflow 10k DAG", f"/workflows/{wf['root']}", {}),
        ("workflow 10k fragment (poll)", f"/workflows/{wf['root']}", hx),
        ("batch 10k", f"/batches/{wf['batch']}", {}),
        ("job waiting on 10k parents", f"/jobs/{wf['summary']}", {}),
        ("job in the 10k layer", f"/jobs/{wf['child']}", {}),
        ("workflows list", "/workflows/", {}),
    ]


def pages(url: str, error: str = "TimeoutError: upstream took longer than 30s") -> list[tuple[str, str, dict]]:
    """(label, path, extra request kwargs) for every page worth timing; `error`: a dead letters group."""
    with psycopg.connect(url) as conn:
        dead_id = conn.execute("SELECT id FROM jobs WHERE status = 'dead' LIMIT 1").fetchone()[0]  # type: ignore[index]
        # a dead job with 20 recorded attempts: the longest timeline a job page draws
        timeline_id = conn.execute("SELECT max(id) FROM jobs WHERE status = 'dead' AND attempt_errors IS NOT NULL"
                                   ).fetchone()[0]  # type: ignore[index]
    hx = {"headers": {"HX-Request": "true"}}
    return [
        ("overview", "/", {}),
        ("overview fragment (poll)", "/", hx),
        ("overview 24h", "/?range=24h", {}),
        ("overview 7d", "/?range=7d", {}),
        ("queue emails ready p1", "/queues/emails?status=ready", {}),
        ("queue emails, failure rate 24h", "/queues/emails?range=24h", {}),
        ("queue emails, failure rate 7d", "/queues/emails?range=7d", {}),
        ("queue emails scheduled", "/queues/emails?status=scheduled", {}),
        ("queue emails running", "/queues/emails?status=running", {}),
        ("queue emails dead", "/queues/emails?status=dead", {}),
        ("queue text search (rare)", "/queues/emails?status=ready&q=user999999@", {}),
        ("queue id filter", f"/queues/emails?status=ready&id={dead_id}", {}),
        ("long-runners", "/running/", {}),
        ("dead letters 24h", "/dead/", {}),
        ("dead letters all", "/dead/?window=all", {}),
        ("dead letters one error", "/dead/?" + urlencode({"window": "all", "error": error}), {}),
        ("dead groups fragment", "/dead/?window=7d", hx),
        ("job detail", f"/jobs/{dead_id}", {}),
        ("dead job, timeline of 20 attempts", f"/jobs/{timeline_id}", {}),
        ("workers", "/workers/", {}),
        ("run times 1h", "/runtimes/", {}),
        ("run times 24h", "/runtimes/?range=24h", {}),
        ("what changed (fragment)", "/changed/", hx),
        ("recurring", "/recurring/", {}),
        ("health", "/health", {}),
        ("audit", "/audit/", {}),
        ("healthz", "/healthz", {}),
    ]


def search_pages(url: str) -> list[tuple[str, str, dict]]:
    """The search page (/search/, issue 36: p95 < 300 ms) with the filters an operator types most."""
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT id, unique_key, payload->>'to' FROM jobs WHERE queue = 'emails' "
                           "AND unique_key IS NOT NULL ORDER BY id DESC LIMIT 1 OFFSET 5000").fetchone()
    assert row is not None
    job_id, unique_key, to = row
    return [
        ("search: empty form", "/search/", {}),
        ("search: id", f"/search/?id={job_id}", {}),
        ("search: payload to = one address", "/search/?" + urlencode({"path": "to", "value": f'"{to}"'}), {}),
        ("search: unique key", "/search/?" + urlencode({"unique_key": unique_key}), {}),
        ("search: error text (1/5 of dead)", "/search/?" + urlencode({"error": "SMTPServerDisconnected"}), {}),
        ("search: queue + state dead", "/search/?queue=webhooks&state=dead", {}),
        ("search: state running", "/search/?state=running", {}),
    ]


def p95(times: list[float]) -> float:
    """The 95th percentile of sorted `times` by nearest rank."""
    return times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]


def _cpu_seconds(pids: list[int]) -> float:
    """CPU time used so far by this process and the given local PostgreSQL backends (from /proc).

    On a busy machine a request's wall time includes waiting for a core; its CPU time does not,
    and is close to what the request takes on an idle one. 0 for backends that are not local."""
    total = time.process_time()
    ticks = os.sysconf("SC_CLK_TCK")
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / ticks  # utime + stime
    return total


def time_page(client: Any, path: str, extra: dict, requests: int) -> list[float]:
    """`requests` GETs of `path` after one warm-up (pool, plan cache); sorted milliseconds each."""
    return time_page_cpu(client, path, extra, requests, None)[0]


def time_page_cpu(client: Any, path: str, extra: dict, requests: int,
                  url: str | None) -> tuple[list[float], list[float]]:
    """time_page, with each request's CPU time as well (this process and, given `url`, the console's
    database backends); both sorted, in milliseconds."""
    auth = ("bench", "pw")
    client.get(path, auth=auth, **extra)
    pids: list[int] = []
    if url is not None:
        with psycopg.connect(url) as conn:  # the console pool's backends, open after the warm-up
            pids = [r[0] for r in conn.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                                               "AND pid <> pg_backend_pid()")]
    times, cpus = [], []
    for _ in range(requests):
        started, cpu = time.perf_counter(), _cpu_seconds(pids)
        response = client.get(path, auth=auth, **extra)
        if response.status_code == 503:  # the shared server dropped a pooled connection: once more
            started, cpu = time.perf_counter(), _cpu_seconds(pids)
            response = client.get(path, auth=auth, **extra)
        times.append((time.perf_counter() - started) * 1000)
        cpus.append((_cpu_seconds(pids) - cpu) * 1000)
        assert response.status_code == 200, (path, response.status_code)
    return sorted(times), sorted(cpus)


def _heartbeats(url: str) -> threading.Event:
    """The 50 workers' heartbeats (every 5 s, as live workers write them), until the returned event is set:
    without them every worker turns stale 30 s in, and Health and the overview time a fleet of dead workers."""
    stop = threading.Event()

    def beat() -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            while True:
                conn.execute("UPDATE workers SET last_seen = now()")
                if stop.wait(5.0):
                    return

    threading.Thread(target=beat, daemon=True, name="heartbeats").start()
    return stop


def _write_json(path: Path, results: list[dict[str, Any]], load_start: tuple[float, ...], requests: int) -> None:
    """The timings with what they were measured on: a figure without its load says little on a shared machine."""
    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        server = conn.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]
        counts: dict[str, int] = dict(conn.execute("SELECT 'job_stats', count(*) FROM job_stats UNION ALL "
                                   "SELECT 'workers', count(*) FROM workers UNION ALL "
                                   "SELECT 'recurring_schedules', count(*) FROM recurring_schedules").fetchall())
    path.write_text(json.dumps({
        "command": "python " + " ".join(sys.argv),
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "machine": f"{os.cpu_count()} cores, PostgreSQL {server.split()[0]}, private cluster, shared with other work",
        "load_average_start": [round(x, 1) for x in load_start],
        "load_average_end": [round(x, 1) for x in os.getloadavg()],
        "requests_per_page": requests,
        "rows": counts,
        "note": "wall times include waiting for a core on a loaded machine; cpu is this process + the console's "
                "PostgreSQL backends per request",
        "pages": results,
    }, indent=1) + "\n")
    print(f"wrote {path}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--admin-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--requests", type=int, default=20, help="requests per page")
    parser.add_argument("--keep", action="store_true", help="keep the scratch database afterwards")
    parser.add_argument("--reuse", action="store_true", help="reuse an existing scratch database")
    parser.add_argument("--only-workflow", action="store_true", help="build and time the workflow pages alone")
    parser.add_argument("--pages", default="", help="time only the pages whose label matches this regex")
    parser.add_argument("--json", metavar="PATH", help="also write the results (with load and command) here")
    args = parser.parse_args()

    print(f"building {DB} ({'' if args.only_workflow else '1,000,000 queued + 100,000 dead + 1,000 running + '}"
          f"a workflow of {WORKFLOW_FANOUT + 2:,} jobs)...", flush=True)
    if args.reuse:
        url = psycopg.conninfo.make_conninfo(args.admin_url, dbname=DB)
        os.environ["DATABASE_URL"] = url  # the producer and testing.drain use it
        wf = build_workflow(url)
    else:
        url, wf = build(args.admin_url, args.only_workflow)
    heartbeats = _heartbeats(url)
    app = create_app({"DATABASE_URL": url, "SECRET_KEY": "bench", "ACCOUNTS": [Account("bench", "admin", "pw")]})
    client = app.test_client()
    auth = ("bench", "pw")
    load_start = os.getloadavg()
    print(f"load average at start: {' '.join(f'{x:.1f}' for x in load_start)} on {os.cpu_count()} cores")
    print(f"\n{'page':38} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} {'cpu p50':>8} {'cpu p95':>8}")
    results = []
    try:
        timed = workflow_pages(wf) + ([] if args.only_workflow else pages(url) + search_pages(url))
        for label, path, extra in timed:
            if not re.search(args.pages, label):
                continue
            times, cpus = time_page_cpu(client, path, extra, args.requests, url)
            row = {"page": label, "path": path, "htmx": bool(extra), "p50_ms": statistics.median(times),
                   "p95_ms": p95(times), "max_ms": times[-1], "cpu_p50_ms": statistics.median(cpus),
                   "cpu_p95_ms": p95(cpus)}
            results.append({k: round(v, 1) if isinstance(v, float) else v for k, v in row.items()})
            print(f"{label:38} {row['p50_ms']:8.1f} {row['p95_ms']:8.1f} {row['max_ms']:8.1f} "
                  f"{row['cpu_p50_ms']:8.1f} {row['cpu_p95_ms']:8.1f}", flush=True)
        if args.json:
            _write_json(Path(args.json), results, load_start, args.requests)
        if args.only_workflow or args.pages:
            return 0
        # the confirmation of "purge all matching" counts the set it will act on
        token_client = app.test_client()
        html = token_client.get("/", auth=auth).get_data(as_text=True)
        token = re.search(r'name="csrf_token" value="([^"]+)"', html).group(1)  # type: ignore[union-attr]
        times = []
        for _ in range(max(3, args.requests // 4)):
            started = time.perf_counter()
            response = token_client.post("/dead/action", auth=auth, data={"action": "purge", "scope": "matching",
                                                                         "window": "all", "csrf_token": token})
            times.append((time.perf_counter() - started) * 1000)
        times.sort()
        print(f"{'bulk confirm count (100k dead)':34} {statistics.median(times):8.1f} {times[-1]:8.1f} "
              f"{times[-1]:8.1f}")
        assert response.status_code == 200 and b"Purge 100,000 jobs?" in response.data, response.status_code
    finally:
        heartbeats.set()
        close_app(app)
        if not args.keep:
            with psycopg.connect(args.admin_url, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
    return 0


if __name__ == "__main__":
    sys.exit(main())
