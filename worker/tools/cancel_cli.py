"""`skiplock jobs cancel ID`: ask a running job to stop (or cancel a queued one) from the shell.

jobs_cli.py registers `skiplock jobs` and hands its `cancel` action to this module.
"""

from __future__ import annotations

import argparse
import getpass

from skiplock.core.features import audit
from skiplock.core.features.cancel import request_cancel
from skiplock.core.plumbing.config import load_settings
from skiplock.core.plumbing.db import connect


def cancel(args: argparse.Namespace) -> int:
    """Cancel job `args.job_id` as `args.actor`; exit status 1 when nothing changed."""
    actor = args.actor or f"cli:{getpass.getuser()}"
    with connect(load_settings().require_database_url(), "skiplock-cli", autocommit=False) as conn:
        # the request and its audit row commit together: an operator action from the CLI is on the
        # console's Audit page like one from the console
        result = request_cancel(conn, args.job_id, actor)
        audit.record(conn, actor, "cli", "cancel job", 1 if result.changed else 0, {"ids": [args.job_id]})
        conn.commit()
    print(result.message)
    return 0 if result.changed else 1  # scripts can tell "nothing changed" apart
