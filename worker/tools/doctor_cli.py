"""`skiplock doctor`: the doctor's checks (skiplock/monitor/doctor.py) on the command line.

Kept apart from the checks so that the console's Health page, which runs the same checks, does not
import the command line. Exit 1 when a check fails, so it can gate a deploy or page someone from cron.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from skiplock.core.plumbing.config import load_settings
from skiplock.monitor.doctor import FAIL, MAX_XACT_AGE, format_checks, run_checks
from skiplock.tools.commands import command


def _doctor_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-xact-age", type=float, default=MAX_XACT_AGE,
                   help=f"seconds after which an open transaction fails the check (default {MAX_XACT_AGE:g})")
    p.add_argument("--json", action="store_true", help="print the checks as JSON")
    p.add_argument("--all", action="store_true",
                   help="check every database of SKIPLOCK_DATABASES (name=url,...), one section each")


@command("doctor", "check the queue's health and say what to do (exit 1 if a check fails)", _doctor_args)
def _doctor(args: argparse.Namespace) -> int:
    from skiplock.core.plumbing.db import connect

    settings = load_settings()
    if args.all:
        from skiplock.tools.doctor_all import doctor_all

        return doctor_all(settings, args.max_xact_age, as_json=args.json)
    with connect(settings.require_database_url(), "skiplock-doctor") as conn:
        checks = run_checks(conn, settings, args.max_xact_age)
    if args.json:
        print(json.dumps([asdict(c) for c in checks], indent=2, default=str))
    else:
        print(format_checks(checks))
    return 1 if any(c.status == FAIL for c in checks) else 0
