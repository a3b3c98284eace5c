"""`skiplock capacity`: the capacity model (skiplock/monitor/capacity.py) on the command line."""

from __future__ import annotations

import argparse
import json
import os

from psycopg.conninfo import conninfo_to_dict

from skiplock.core.plumbing.config import load_settings
from skiplock.tools.commands import command


def _capacity_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seconds", type=float, default=30.0, help="measurement window (default 30 s of live traffic)")
    p.add_argument("--db-cores", type=float, default=None,
                   help="the database server's CPUs (default: this machine's, when the database is local)")
    p.add_argument("--target-rate", type=float, default=None, help="jobs/s to size the workers for")
    p.add_argument("--concurrency", type=float, default=None,
                   help="slots per worker process (default: the live workers' setting)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")


def _local(url: str) -> bool:
    host = str(conninfo_to_dict(url).get("host") or "")
    return host in ("", "localhost", "127.0.0.1", "::1") or host.startswith("/")


@command("capacity", "measure what one job costs this database and project rates and worker counts",
         _capacity_args)
def _capacity(args: argparse.Namespace) -> int:
    from skiplock.core.plumbing.db import connect
    from skiplock.monitor.autoscale import queue_loads
    from skiplock.monitor.capacity import format_report, measure, project, report

    url = load_settings().require_database_url()
    cores = args.db_cores or (float(os.cpu_count() or 1) if _local(url) else None)
    with connect(url, "skiplock-capacity") as conn:
        measured = measure(conn, args.seconds)
        loads = queue_loads(conn)  # the same sizing as /metrics' skiplock_desired_workers, undamped
    projected = project(measured, db_cores=cores, target_rate=args.target_rate, concurrency=args.concurrency)
    desired = {load.queue: load.desired for load in loads}
    if args.json:
        print(json.dumps({**report(measured, projected), "desired_workers": desired}, indent=2))
    else:
        print(format_report(measured, projected))
        print("desired workers now: " + (", ".join(f"{q} {n}" for q, n in desired.items()) or "none (idle)"))
    return 0
