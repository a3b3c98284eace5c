"""`skiplock schedules list|create|edit|pause|resume|delete|backfill|run NAME`: recurring schedules from the shell.

create, edit, delete and backfill work on schedules made at runtime (skiplock.schedules); list, pause,
resume and run also on those defined in code. Every change is on the console's Audit page too.
"""

from __future__ import annotations

import argparse
import getpass
import json
from datetime import datetime
from typing import Any

from skiplock.core.errors import ConfigError, SkiplockError
from skiplock.core.features import audit
from skiplock.core.plumbing.config import load_settings
from skiplock.core.plumbing.db import connect
from skiplock.services import schedules
from skiplock.services.recurring_defs import list_schedules, run_schedule_now
from skiplock.tools.commands import command

ACTIONS = ("list", "create", "edit", "pause", "resume", "delete", "backfill", "run")


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=ACTIONS,
                   help="list all; create/edit/delete a runtime schedule; pause/resume one; backfill its "
                        "missed slots; run one extra instance now")
    p.add_argument("name", nargs="?", help="the schedule's name (all actions but list)")
    p.add_argument("--queue", help="create/edit: the queue its jobs go to")
    p.add_argument("--cron", help="create/edit: a 5-field crontab, e.g. '0 7 * * *'")
    p.add_argument("--every", help="create/edit: an interval, e.g. 30s, 5m, 1h30m, 1d")
    p.add_argument("--payload", help="create/edit: the jobs' payload as JSON (default null)")
    p.add_argument("--timezone", help="create/edit: the IANA time zone the crontab is read in (default UTC)")
    p.add_argument("--tenant", help="create/edit: the tenant its jobs are for")
    p.add_argument("--catch-up", choices=("once", "skip"), help="create/edit: after downtime, one catch-up run or none")
    p.add_argument("--from", dest="start", help="backfill: the first moment, ISO 8601 with an offset")
    p.add_argument("--to", dest="end", help="backfill: the last moment (default now)")


def _when(value: datetime | None) -> str:
    return value.isoformat(timespec="seconds") if value else "-"


def _print_table(rows: list[dict]) -> None:
    header = ("name", "queue", "schedule", "timezone", "origin", "state", "last fire", "next fire")
    lines = [header]
    for r in rows:
        state = "inactive" if not r["active"] else ("enabled" if r["enabled"] else "paused")
        schedule = r["schedule"] if r["kind"] == "cron" else f"every {r['schedule']}"
        lines.append((r["name"], r["queue"], schedule, r["timezone"], r["origin"], state,
                      _when(r["last_fire_at"]), _when(r["next_fire_at"])))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for line in lines:
        print("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip())


def _moment(text: str | None, flag: str) -> datetime | None:
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ConfigError(f"{flag} must be an ISO 8601 time like 2026-01-01T00:00:00+00:00, got {text!r}") from None
    if moment.tzinfo is None:
        raise ConfigError(f"{flag} needs an offset or Z, e.g. 2026-01-01T00:00:00Z")
    return moment


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    """The create/edit options given on the command line."""
    given: dict[str, Any] = {}
    if args.payload is not None:
        try:
            given["payload"] = json.loads(args.payload)
        except ValueError as exc:
            raise ConfigError(f"--payload is not valid JSON: {exc}") from None
    for option in ("queue", "cron", "every", "timezone", "tenant", "catch_up"):
        if getattr(args, option) is not None:
            given[option] = getattr(args, option)
    return given


def _change(conn: Any, args: argparse.Namespace) -> tuple[str, int, dict[str, Any]]:
    """Do one changing action; (what the audit calls it, how many things, the detail). Prints the outcome."""
    name = args.name
    if args.action == "create":
        given = _settings(args)
        if "queue" not in given:
            raise ConfigError("schedules create needs --queue")
        made = schedules.create(name, given.pop("queue"), given.pop("payload", None), conn=conn, **given)
        print(f"created {name}; next fire {_when(made.next_fire_at)}")
        return "create schedule", 1, {"schedule": name, **_settings(args)}
    if args.action == "edit":
        changed = schedules.update(name, conn=conn, **_settings(args))
        print(f"changed {name}; next fire {_when(changed.next_fire_at)}")
        return "edit schedule", 1, {"schedule": name, **_settings(args)}
    if args.action == "delete":
        deleted = schedules.delete(name, conn=conn)
        if not deleted:
            raise ConfigError(f"no schedule named {name!r}")
        print(f"deleted {name}")
        return "delete schedule", 1, {"schedule": name}
    if args.action == "backfill":
        start = _moment(args.start, "--from")
        if start is None:
            raise ConfigError("schedules backfill needs --from")
        end = _moment(args.end, "--to") or conn.execute("SELECT now()").fetchone()[0]
        ids = schedules.backfill(name, start, end, conn=conn)
        print(f"backfilled {len(ids)} slot(s) of {name}")
        return "backfill schedule", len(ids), {"schedule": name, "from": start.isoformat(), "to": end.isoformat()}
    if args.action in ("pause", "resume"):
        flip = schedules.pause if args.action == "pause" else schedules.resume
        changed_state = flip(name, conn=conn)
        print(f"{args.action}d {name}" if changed_state else
              f"{name} was already paused" if args.action == "pause" else f"{name} was not paused")
        return f"{args.action} schedule", 0, {"schedule": name, "changed": changed_state}
    job_id = run_schedule_now(conn, name)
    if job_id is None:
        raise ConfigError(f"no schedule named {name!r}")
    print(job_id)
    return "run schedule now", 1, {"schedule": name, "job_id": job_id}


@command("schedules", "list, create, edit, pause, resume, delete, backfill or run-now recurring schedules", _args)
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
                print("no recurring schedules (workers write the code's at start-up; "
                      "`skiplock schedules create` makes one)")
            return 0
        # the change and its audit row commit together; bad input raises before anything is written
        with conn.transaction():
            action, count, detail = _change(conn, args)
            audit.record(conn, f"cli:{getpass.getuser()}", "cli", action, count, detail)
    return 0
