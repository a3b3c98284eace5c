"""The console's search on 1,000,000 jobs (not a test: run it by hand, it takes a few minutes).

    python tests/benchmarks/console_search.py [--admin-url postgresql://postgres@127.0.0.1:5432/postgres]
                                              [--requests 20] [--rows 1000000] [--keep] [--reuse]

Builds a scratch database (migrated, so with migration 030's indexes) holding `--rows` jobs made by
generate_series INSERTs, their states interleaved as a running system leaves them: 80% queued, 10%
dead (a traceback each), 10% succeeded (kept), 0.1% running; payloads with a customer, a plan and
an array of items; unique keys, lock keys and tenants on a share of them. Then it requests each
kind of search through the real Flask route (test client, in process: routing, SQL, template),
`--requests` times each with values that change from request to request, and prints p50/p95 per
kind and the EXPLAIN ANALYZE of the statements one request of that kind runs. With --json, the
results go to tests/benchmarks/results/console_search.json. Nothing is asserted.
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
from urllib.parse import urlencode

import psycopg
from psycopg.rows import dict_row

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from skiplock.core.plumbing.migrate import apply_migrations
from skiplock.tools.bench import server_facts
from skiplock.webapp import create_app
from skiplock.webapp.db import close_app
from skiplock.webapp.pages.search import PAGE_SIZE
from skiplock.webapp.queries import search_queries
from skiplock.webapp.settings import Account
from skiplock.webapp.shared import search_filter
from tests.benchmarks.console_pages import _cpu_seconds, p95

DB = "skiplock_search_bench"
RESULTS = Path(__file__).resolve().parent / "results" / "console_search.json"

# One statement, the states interleaved by id (g % 10: 0 dead, 3 succeeded, 5 of every 1,000 running).
SEED = r"""
INSERT INTO jobs (queue, status, priority, attempts, max_attempts, run_at, created_at, started_at, finished_at,
                  lease_until, worker_id, unique_key, lock_key, tenant, payload, last_error, error_headline)
SELECT (ARRAY['emails','reports','webhooks','images','billing'])[1 + (g / 10) %% 5], s.status, g %% 3,
       CASE WHEN s.status = 'queued' THEN 0 WHEN s.status = 'dead' THEN 20 ELSE 1 END, 20,
       t.at, t.at, CASE WHEN s.status <> 'queued' THEN t.at END,
       CASE WHEN s.status IN ('dead', 'succeeded') THEN t.at + interval '2 seconds' END,
       CASE WHEN s.status = 'running' THEN now() + interval '30 seconds' END,
       CASE WHEN s.status = 'running' THEN 'w-' || (g %% 10) END,
       CASE WHEN g %% 10 = 1 THEN 'order:' || g END,
       CASE WHEN g %% 7 = 0 AND s.status <> 'running' THEN 'account:' || (g %% 5000) END,
       CASE WHEN g %% 4 = 0 THEN 'tenant-' || (g %% 500) END,
       jsonb_build_object('customer', jsonb_build_object('id', g %% 50000,
                                                          'plan', (ARRAY['free','pro','team'])[1 + g %% 3]),
                          'order', g, 'to', 'user' || g || '@example.com',
                          'items', jsonb_build_array(jsonb_build_object('sku', 'SKU-' || (g %% 2000),
                                                                        'qty', 1 + g %% 4))),
       e.error, split_part(e.error, E'\n', 6)
  FROM generate_series(1, %(rows)s) g
 CROSS JOIN LATERAL (SELECT now() - make_interval(secs => (%(rows)s - g) * 0.5) AS at) t
 CROSS JOIN LATERAL (SELECT CASE WHEN g %% 10 = 0 THEN 'dead' WHEN g %% 10 = 3 THEN 'succeeded'
                                 WHEN g %% 1000 = 5 THEN 'running' ELSE 'queued' END::job_status AS status) s
 CROSS JOIN LATERAL (SELECT CASE WHEN s.status <> 'dead' THEN NULL ELSE
        E'Traceback (most recent call last):\n  File "app/tasks.py", line 42, in handle\n    charge(order)\n'
        || E'  File "app/billing.py", line 118, in charge\n    raise error\n'
        || CASE (g / 10) %% 4
             WHEN 0 THEN 'ValueError: customer cus_' || g || ' has no default payment method'
             WHEN 1 THEN 'ConnectionError: POST https://api.example.com/orders/' || g || '?attempt=20: 503'
             WHEN 2 THEN 'KeyError: ''email'''
             ELSE CASE WHEN g %% 10000 = 30 THEN 'PaymentDeclined: card ending ' || lpad((g %% 9973)::text, 4, '0')
                       || ' declined' ELSE 'TimeoutError: upstream took longer than 30s' END
           END END AS error) e
"""


def build(admin_url: str, rows: int) -> str:
    """Create the scratch database, migrate it and fill it; returns its URL."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{DB}"')
    url = psycopg.conninfo.make_conninfo(admin_url, dbname=DB)
    apply_migrations(url)
    with psycopg.connect(url, autocommit=True) as conn:
        started = time.perf_counter()
        conn.execute(SEED, {"rows": rows})
        print(f"  inserted {rows:,} jobs in {time.perf_counter() - started:5.1f}s (with migration 030's indexes)",
              flush=True)
        started = time.perf_counter()
        conn.execute("VACUUM ANALYZE jobs")
        print(f"  vacuumed in {time.perf_counter() - started:5.1f}s", flush=True)
    return url


def kinds(url: str, requests: int) -> list[tuple[str, list[dict[str, str]]]]:
    """(kind, one query string per request): the values change from request to request."""
    with psycopg.connect(url) as conn:
        top: int = conn.execute("SELECT max(id) FROM jobs").fetchone()[0]  # type: ignore[index]
        pro_page1 = conn.execute(
            "SELECT id FROM jobs WHERE payload @> '{\"customer\": {\"plan\": \"pro\"}}' ORDER BY id DESC "
            "OFFSET %s LIMIT 1", (PAGE_SIZE - 1,)).fetchone()[0]  # type: ignore[index]
    n = range(requests)
    return [
        ("id", [{"id": str(top - 1000 * i - 7)} for i in n]),
        ("payload, rare (customer.id = 42: 20 jobs)", [{"path": "customer.id", "value": str(42 + 97 * i)} for i in n]),
        ("payload, common (customer.plan = \"pro\": 1/3)",
         [{"path": "customer.plan", "value": ["pro", "free", "team"][i % 3]} for i in n]),
        ("payload, array element (items[].sku: 500 jobs)",
         [{"path": "items[].sku", "value": f'"SKU-{7 + 13 * i}"'} for i in n]),
        ("payload, no match", [{"path": "customer.id", "value": str(900_000 + i)} for i in n]),
        ("unique key", [{"unique_key": f"order:{1 + 10 * (top // 10 - 1 - 997 * i)}"} for i in n]),
        ("lock key (~29 jobs)", [{"lock_key": f"account:{7 * (i + 1)}"} for i in n]),
        ("tenant (500 jobs)", [{"tenant": f"tenant-{4 * (i + 1)}"} for i in n]),
        ("error text, rare (card ending ...: 100 jobs)", [{"error": "card ending"} for _ in n]),
        ("error text, common (cus_ ... payment)", [{"error": "no default payment"} for _ in n]),
        ("error text, no match", [{"error": f"no-such-error-{i}"} for i in n]),
        ("queue + state (billing, dead)", [{"queue": ["billing", "emails"][i % 2], "state": "dead"} for i in n]),
        ("queue + state, no match (billing, failed)",
         [{"queue": ["billing", "emails"][i % 2], "state": "failed"} for i in n]),
        ("state, rare (running: 0.1%)", [{"state": "running"} for _ in n]),
        ("combined (dead + plan team + error cus_)",
         [{"state": "dead", "path": "customer.plan", "value": "team", "error": "cus_"} for _ in n]),
        ("payload common, page 2 (keyset)",
         [{"path": "customer.plan", "value": "pro", "after": str(pro_page1)} for _ in n]),
    ]


def explain(url: str, args: dict[str, str]) -> list[str]:
    """EXPLAIN ANALYZE of each statement one request with `args` runs (the order search.find runs them)."""
    flt, problems = search_filter.read(args)
    assert not problems, problems
    params = search_queries.params(flt, PAGE_SIZE)
    plans: list[str] = []
    with psycopg.connect(url, autocommit=True, options="-c jit=off") as conn, conn.cursor(row_factory=dict_row) as cur:
        def run(sql: str, bind: dict[str, Any]) -> list[dict[str, Any]]:
            plan = cur.execute("EXPLAIN (ANALYZE, COSTS OFF, TIMING ON) " + sql, bind).fetchall()
            plans.append("\n".join(r["QUERY PLAN"] for r in plan))
            return cur.execute(sql, bind).fetchall()

        if flt.id is not None:
            run(search_queries.by_id(flt), params)
            return plans
        rows = run(search_queries.recent(flt), params)
        if len(rows) == PAGE_SIZE:
            return plans
        end = run(search_queries.WINDOW_END, params)
        if end:
            run(search_queries.indexed(flt), {**params, "before": end[0]["id"], "limit": PAGE_SIZE - len(rows)})
    return plans


def time_kind(client: Any, url: str, queries: list[dict[str, str]]) -> tuple[list[float], list[float]]:
    """Each query once, after one warm-up request with a value of its own (the pool, the plan cache):
    the values differ, so no request finds its own rows cached by the one before. Sorted ms each,
    wall and CPU (this process and the console's database backends)."""
    auth = ("bench", "pw")
    warm = {k: (v + "0" if k not in ("state", "queue", "path") else v) for k, v in queries[0].items()}
    client.get("/search/?" + urlencode(warm), auth=auth)
    with psycopg.connect(url) as conn:  # the console pool's backends, open after the warm-up
        pids = [r[0] for r in conn.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                                           "AND pid <> pg_backend_pid()")]
    times, cpus = [], []
    for query in queries:
        started, cpu = time.perf_counter(), _cpu_seconds(pids)
        response = client.get("/search/?" + urlencode(query), auth=auth)
        times.append((time.perf_counter() - started) * 1000)
        cpus.append((_cpu_seconds(pids) - cpu) * 1000)
        assert response.status_code == 200, (query, response.status_code, response.get_data(as_text=True)[:500])
    return sorted(times), sorted(cpus)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--admin-url", default=os.environ.get("DATABASE_URL",
                                                              "postgresql://postgres@127.0.0.1:5432/postgres"))
    parser.add_argument("--requests", type=int, default=20, help="requests per kind of search")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--keep", action="store_true", help="keep the scratch database afterwards")
    parser.add_argument("--reuse", action="store_true", help="reuse the scratch database a --keep run left")
    parser.add_argument("--json", action="store_true", help=f"write the results to {RESULTS.name}")
    args = parser.parse_args()

    facts = server_facts(args.admin_url)
    if args.reuse:
        url = psycopg.conninfo.make_conninfo(args.admin_url, dbname=DB)
    else:
        print(f"building {DB} with {args.rows:,} jobs...", flush=True)
        url = build(args.admin_url, args.rows)
    app = create_app({"DATABASE_URL": url, "SECRET_KEY": "bench", "ACCOUNTS": [Account("bench", "admin", "pw")]})
    client = app.test_client()
    load = os.getloadavg()
    print(f"load average at start: {' '.join(f'{x:.1f}' for x in load)} on {os.cpu_count()} cores")
    print(f"\n{'search':48} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} {'cpu p50':>8} {'cpu p95':>8} {'rows':>5}")
    results: list[dict[str, Any]] = []
    try:
        for kind, queries in kinds(url, args.requests):
            times, cpus = time_kind(client, url, queries)
            html = client.get("/search/?" + urlencode(queries[0]), auth=("bench", "pw")).get_data(as_text=True)
            found = html.count("data-job-id=")
            print(f"{kind:48} {statistics.median(times):8.1f} {p95(times):8.1f} {times[-1]:8.1f} "
                  f"{statistics.median(cpus):8.1f} {p95(cpus):8.1f} {found:5}", flush=True)
            results.append({"kind": kind, "example": "/search/?" + urlencode(queries[0]), "requests": len(times),
                            "p50_ms": round(statistics.median(times), 1), "p95_ms": round(p95(times), 1),
                            "max_ms": round(times[-1], 1), "cpu_p50_ms": round(statistics.median(cpus), 1),
                            "cpu_p95_ms": round(p95(cpus), 1), "rows_on_first_page": found,
                            "plans": explain(url, queries[0])})
    finally:
        close_app(app)
        if not args.keep:
            with psycopg.connect(args.admin_url, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
    for r in results:
        print(f"\n== {r['kind']}: {r['example']}")
        for plan in r["plans"]:
            print(plan + "\n")
    if args.json:
        RESULTS.write_text(json.dumps({
            "benchmark": "console search (tests/benchmarks/console_search.py)",
            "date": dt.date.today().isoformat(), "rows": args.rows, "requests_per_kind": args.requests,
            "command": "python tests/benchmarks/console_search.py " + " ".join(sys.argv[1:]),
            "load_average_at_start": [round(x, 1) for x in load], "server": facts,
            "kinds": results}, indent=2, default=str) + "\n")
        print(f"\nwrote {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
