"""`skiplock jobs signal KEY --payload JSON` and `skiplock jobs wake ID...`: durable jobs from a shell.

A signal wakes every job parked on its key (or is kept for the wait to come); `wake` moves parked jobs
back to their queues now (a sleeping job re-runs and parks again if its time has not come). Each writes
an audit row with the actor, in the same transaction, as the console's buttons do.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os

from skiplock.core.durable import service
from skiplock.core.durable.signals import signal
from skiplock.core.errors import SkiplockError
from skiplock.core.features import audit
from skiplock.core.plumbing.config import load_settings
from skiplock.core.plumbing.db import connect


def add_actions(sub: argparse._SubParsersAction) -> None:
    """The `signal` and `wake` actions of `skiplock jobs`."""
    send = sub.add_parser("signal", help="send a durable job's signal: wakes every job waiting on KEY")
    send.add_argument("key", metavar="KEY", help="the signal key a handler waits on with job.wait_for(KEY)")
    send.add_argument("--payload", metavar="JSON", default="null", help="the JSON the wait returns (default null)")
    send.add_argument("--actor", "--as", dest="actor", default=None,
                      help="who sends it, for the audit (default: $USER)")
    wake = sub.add_parser("wake", help="wake parked jobs now (a sleep not yet over parks again on its re-run)")
    wake.add_argument("job_ids", type=int, nargs="+", metavar="ID")
    wake.add_argument("--actor", "--as", dest="actor", default=None,
                      help="who wakes them, for the audit (default: $USER)")


def run(args: argparse.Namespace) -> int:
    actor = args.actor or os.environ.get("USER") or getpass.getuser()
    with connect(load_settings().require_database_url(), "skiplock-cli") as conn:
        if args.jobs_action == "signal":
            try:
                payload = json.loads(args.payload)
            except json.JSONDecodeError as exc:
                raise SkiplockError(f"jobs signal: --payload is not JSON ({exc})") from None
            with conn.transaction():  # the signal and its audit row commit together
                woken = signal(args.key, payload, conn=conn)
                audit.record(conn, actor, "cli", "send signal", woken, {"key": args.key})
            print(f"signal {args.key!r} sent: woke {woken} job(s)" if woken else
                  f"signal {args.key!r}: woke no job (kept for a wait to come, unless it was sent before)")
            return 0
        ids = sorted(set(args.job_ids))
        with conn.transaction():
            woken_ids = service.wake_now(conn, ids)
            audit.record(conn, actor, "cli", "wake now", len(woken_ids), {"ids": ids[:50]})
        skipped = len(ids) - len(woken_ids)
        print(f"woke {len(woken_ids)} job(s)" + (f"; {skipped} were not parked" if skipped else ""))
        return 0 if woken_ids else 1
