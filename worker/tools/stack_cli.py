"""`skiplock jobs stack ID`: a running job's stack, taken by the worker that runs it, printed here.

jobs_cli.py registers `skiplock jobs` and hands its `stack` action to this module. The request is
audited like the console's "Show stack"; the wait is bounded (--wait); the job is not changed.
"""

from __future__ import annotations

import argparse
import getpass
import sys

from skiplock.core.features import audit, job_stacks
from skiplock.core.plumbing.config import load_settings
from skiplock.core.plumbing.db import connect


def stack(args: argparse.Namespace) -> int:
    """Ask for job `args.job_id`'s stack and print it; exit status 1 when the job does not run or no
    worker answered within `args.wait` seconds."""
    actor = args.actor or f"cli:{getpass.getuser()}"
    url = load_settings().require_database_url()

    with connect(url, "skiplock-cli", autocommit=False) as conn:
        try:
            asked = job_stacks.ask(conn, args.job_id, actor)
        except job_stacks.NotRunning as exc:
            print(exc)
            return 1
        audit.record(conn, actor, "cli", "show stack", 1, {"ids": [args.job_id]})  # with the request, or not at all
        conn.commit()
    row = job_stacks.wait(lambda: connect(url, "skiplock-cli"), args.job_id, args.wait)
    if row is None:
        print(f"job {args.job_id}: no stack within {args.wait:g}s of the request ({asked:%H:%M:%S} UTC): its "
              "worker answers at its next heartbeat; it may have finished, or its worker may be stuck or gone",
              file=sys.stderr)
        return 1
    taken = f"{row['captured_at']:%Y-%m-%d %H:%M:%S}"
    print(f"job {args.job_id}, attempt {row['attempt']}, on {row['worker_id']}, taken {taken} UTC "
          "(most recent call last):")
    print(row["stack"], end="")
    return 0
