"""The console's workflow and batch pages on a 10,000-job workflow (issue 33: p95 under 100 ms).

    python -m tests.benchmarks.workflow_pages [--admin-url postgresql://postgres@127.0.0.1:5432/postgres]
                                              [--requests 20] [--keep] [--reuse] [--out FILE.json]

Builds a scratch database holding one workflow made through the public API: a root, 10,000 children
that depend on it (the 10,000 are a batch with an on_complete callback) and a summary that depends on
all of them; then runs the root and 2,000 children with skiplock.testing.drain (history mode delete:
their rows are gone, so the page also walks what outlives them), leaving the DAG in three states.
Each page is requested through the Flask test client (in process: routing, SQL, templates) once to
warm up, then --requests times (the DAG page also with its kept shape dropped before each request,
as on a first view); printed per page: wall time p50/p95/max and the CPU time per request
(this process plus the console's database backends, from /proc), which a busy machine disturbs much
less than the wall time. The load average is printed with them. Nothing is asserted (not collected
by pytest: no test_ prefix). The figures go to docs/benchmarks/workflows.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
from datetime import UTC, datetime
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from skiplock.core.plumbing.migrate import apply_migrations
from skiplock.webapp import create_app
from skiplock.webapp.db import close_app
from skiplock.webapp.settings import Account
from skiplock.webapp.shared import workflow_structure
from tests.benchmarks.console_pages import build_workflow, p95, time_page_cpu, workflow_pages

DB = "skiplock_workflow_pages"


def build(admin_url: str, reuse: bool) -> tuple[str, dict[str, int]]:
    """The scratch database with the workflow (the one a --keep run left, if `reuse`); its URL and the
    ids the pages are timed on."""
    url = psycopg.conninfo.make_conninfo(admin_url, dbname=DB)
    if reuse:
        with psycopg.connect(url) as conn:
            row = conn.execute("""SELECT min(workflow_id), (SELECT max(id) FROM job_batches),
                                         max(id) FILTER (WHERE status = 'waiting'),
                                         max(id) FILTER (WHERE status <> 'waiting')
                                    FROM jobs WHERE workflow_id IS NOT NULL""").fetchone()
        assert row is not None and None not in row, f"{DB} holds no workflow: run once with --keep"
        return url, dict(zip(("root", "batch", "summary", "child"), row, strict=True))
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{DB}"')
    apply_migrations(url)
    os.environ["DATABASE_URL"] = url  # the producer and testing.drain use it
    return url, build_workflow(url)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--admin-url", default=os.environ.get("DATABASE_URL",
                                                              "postgresql://postgres@127.0.0.1:5432/postgres"))
    parser.add_argument("--requests", type=int, default=20, help="requests per page (after one warm-up)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch database afterwards")
    parser.add_argument("--reuse", action="store_true", help="reuse the scratch database of a --keep run")
    parser.add_argument("--out", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args()

    url, wf = build(args.admin_url, args.reuse)
    app = create_app({"DATABASE_URL": url, "SECRET_KEY": "bench", "ACCOUNTS": [Account("bench", "admin", "pw")]})
    dropping = {"shapes": False}

    @app.before_request
    def _drop_shapes() -> None:
        if dropping["shapes"]:
            workflow_structure.forget()

    client = app.test_client()
    load = os.getloadavg()
    print(f"load average at start: {' '.join(f'{x:.1f}' for x in load)} on {os.cpu_count()} cores")
    print(f"\n{'page':34} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} {'cpu p50':>8} {'cpu p95':>8}")
    rows = []
    # the DAG page once more with its kept shape dropped before every request: a first view, or one
    # SHAPE_TTL after the last (webapp/shared/workflow_structure.py)
    cold = ("workflow 10k DAG, shape read", f"/workflows/{wf['root']}", {"cold": True})
    try:
        for label, path, extra in [*workflow_pages(wf), cold]:
            dropping["shapes"] = extra.pop("cold", False)
            times, cpus = time_page_cpu(client, path, extra, args.requests, url)
            rows.append({"page": label, "path": path, "p50_ms": statistics.median(times), "p95_ms": p95(times),
                         "max_ms": times[-1], "cpu_p50_ms": statistics.median(cpus), "cpu_p95_ms": p95(cpus)})
            print(f"{label:34} {rows[-1]['p50_ms']:8.1f} {rows[-1]['p95_ms']:8.1f} {times[-1]:8.1f} "
                  f"{rows[-1]['cpu_p50_ms']:8.1f} {rows[-1]['cpu_p95_ms']:8.1f}", flush=True)
    finally:
        close_app(app)
        if not args.keep:
            with psycopg.connect(args.admin_url, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
    if args.out:
        args.out.write_text(json.dumps({
            "date": datetime.now(UTC).date().isoformat(), "machine": f"{os.cpu_count()} cores, {platform.platform()}",
            "load_at_start": [round(x, 1) for x in load], "requests": args.requests, "pages": rows,
            "command": f"python -m tests.benchmarks.workflow_pages --requests {args.requests}"}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
