"""`skiplock schedules list|pause|resume|run NAME`: recurring definitions from the shell."""

from __future__ import annotations

import argparse
import getpass
from datetime import datetime

from skiplock.core.errors import SkiplockError
from skiplock.core.features import audit
from skiplock.core.plumbing.config import load_settings
from skiplock.core.plumbing.db import connect
from skiplock.services.recurring_defs import list_schedules, pause_schedule, resume_schedule, run_schedule_now
from skiplock.tools.commands import command


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=("list", "pause", "resume", "run"),
                   help="list all; pause/resume a definition; run one extra instance now")
    p.add_argument("name", nargs="?", help="the definition's name (for pause, resume, run)")


def _when(value: datetime | None) -> str:
    return value.isoformat(timespec="seconds") if value else "-"


def _print_table(rows: list[dict]) -> None:
    header = ("name", "queue", "schedule", "timezone", "state", "last fire", "next fire")
    lines = [header]
    for r in rows:
        state = "inactive" if not r["active"] else ("enabled" if r["enabled"] else "paused")
        schedule = r["schedule"] if r["kind"] == "cron" else f"every {r['schedule']}"
        lines.append((r["name"], r["queue"], schedule, r["timezone"], state,
                      _when(r["last_fire_at"]), _when(r["next_fire_at"])))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for line in lines:
        print("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip())


@command("schedules", "list, pause, resume or run-now recurring definitions", _args)
def _schedules(args: argparse.Namespace) -> int:
    url = load_settings().require_database_url()
    if args.action != "list" and not args.name:
        raise SkiplockError(f"schedules {args.action} needs a NAME")
    with connect(url, "skiplock-cli") as conn:
        if args.action == "list":
            rows = list_schedules(conn)
            if rows:
                _print_table(rows)
            else:
                print("no recurring definitions (workers write them at start-up)")
            return 0
        known = {r["name"] for r in list_schedules(conn)}
        if args.name not in known:
            raise SkiplockError(f"no recurring definition named {args.name!r}")
        actor = f"cli:{getpass.getuser()}"
        # an operator action from the CLI is on the console's Audit page too, committed with the change
        with conn.transaction():
            if args.action == "pause":
                changed = pause_schedule(conn, args.name)
                audit.record(conn, actor, "cli", "pause schedule", 0, {"schedule": args.name, "changed": changed})
                print(f"paused {args.name}" if changed else f"{args.name} was already paused")
            elif args.action == "resume":
                changed = resume_schedule(conn, args.name)
                audit.record(conn, actor, "cli", "resume schedule", 0, {"schedule": args.name, "changed": changed})
                print(f"resumed {args.name}" if changed else f"{args.name} was not paused")
            else:
                job_id = run_schedule_now(conn, args.name)
                audit.record(conn, actor, "cli", "run schedule now", 1 if job_id is not None else 0,
                             {"schedule": args.name, "job_id": job_id})
                print(job_id)
    return 0
