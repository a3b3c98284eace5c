"""`skiplock jobs list|show|retry|purge|cancel|signal|wake|stack`: the console's dead-letter actions, for scripts
(signal and wake, for durable jobs, are tools/durable_cli.py's; stack is tools/stack_cli.py's).

The filters are the console's: state (dead or failed), queue, error group, age (finished within
a window, or older than a duration) and text. Retry and purge take job ids, or every job the
filters cover; `--dry-run` prints how many jobs that is and changes nothing. Each action writes
the console's audit row ("retry selected", "purge all matching", ...), with the actor from
--actor or $USER, so it shows on the console's Audit page beside the console's own.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import re
from datetime import datetime, timedelta
from typing import Any

import psycopg

from skiplock.core import state_changes
from skiplock.core.error_summary import group_key, headline
from skiplock.core.errors import SkiplockError
from skiplock.core.features import audit, payload_edit
from skiplock.core.plumbing.config import load_settings
from skiplock.core.plumbing.db import connect
from skiplock.tools import cancel_cli, durable_cli, stack_cli
from skiplock.tools.commands import command

# A duration as operators type it: 90s, 30m, 2h, 7d (a bare number is seconds).
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd]?)$")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def duration(text: str) -> timedelta:
    """Parse "90s", "30m", "2h", "7d" or a number of seconds.

    >>> duration("2h")
    datetime.timedelta(seconds=7200)
    """
    match = _DURATION.match(text.strip())
    if not match:
        raise argparse.ArgumentTypeError(f"expected a duration like 90s, 30m, 2h or 7d, got {text!r}")
    return timedelta(seconds=float(match.group(1)) * _UNIT_SECONDS[match.group(2)])


def _filters(p: argparse.ArgumentParser) -> None:
    p.add_argument("--state", choices=("dead", "failed"), default="dead", help="which finished jobs (default dead)")
    p.add_argument("--queue", help="only this queue")
    p.add_argument("--error", help="only this error: its group as the console's dead-letter page lists it, or "
                   "an error line as `jobs list` prints it (the same group)")
    p.add_argument("--within", type=duration, metavar="AGE",
                   help="finished in the last AGE (e.g. 24h; the console's time window)")
    p.add_argument("--older-than", type=duration, metavar="AGE", help="finished more than AGE ago (e.g. 7d)")
    p.add_argument("--text", help="text in the payload, unique key or error (the console's search box)")


def _actor(p: argparse.ArgumentParser) -> None:
    p.add_argument("--actor", "--as", dest="actor", default=None,
                   help="who does this, for the audit trail (default: $USER)")


def _add_args(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="jobs_action", required=True, metavar="ACTION")
    lst = sub.add_parser("list", help="list dead (or failed) jobs the filters cover, newest first")
    _filters(lst)
    lst.add_argument("--limit", type=int, default=50, help="most jobs to list (default 50)")
    lst.add_argument("--json", action="store_true", help="one JSON object per line")
    show = sub.add_parser("show", help="one job: state, attempts, times, payload, full last error, and why it is "
                                       "not running")
    show.add_argument("job_id", type=int)
    show.add_argument("--json", action="store_true", help="as one JSON object")
    for name, verb in (("retry", "queue again now, attempts reset"), ("purge", "delete")):
        action = sub.add_parser(name, help=f"{verb}: the given dead/failed jobs, or all the filters cover")
        action.add_argument("job_ids", type=int, nargs="*", metavar="ID", help="these jobs (else: the filters)")
        _filters(action)
        action.add_argument("--all", action="store_true", help="with no filter: every dead (or failed) job")
        action.add_argument("--dry-run", action="store_true", help="print how many jobs it covers; change nothing")
        _actor(action)
        if name == "retry":
            action.add_argument("--payload", metavar="JSON",
                                help="one dead job only: replace its payload with this JSON, then retry it (the "
                                     "original is kept in job_edits; the console's \"Edit and retry\")")
    durable_cli.add_actions(sub)
    cancel = sub.add_parser("cancel", help="cancel a running job (at its next heartbeat) or a queued one")
    cancel.add_argument("job_id", type=int, help="the job's id")
    cancel.add_argument("--as", "--actor", dest="actor", default=None,
                        help="who is asking (default: cli:<your user name>)")
    shown = sub.add_parser("stack", help="print a running job's stack, taken by the worker that runs it")
    shown.add_argument("job_id", type=int, help="the job's id")
    shown.add_argument("--wait", type=float, default=15.0, help="seconds to wait for the worker's answer (15)")
    shown.add_argument("--as", "--actor", dest="actor", default=None,
                       help="who is asking (default: cli:<your user name>)")


@command("jobs", "dead letters and single jobs: jobs list|show|retry|purge|cancel|signal|wake|stack", _add_args)
def _jobs(args: argparse.Namespace) -> int:
    if args.jobs_action == "cancel":
        return cancel_cli.cancel(args)
    if args.jobs_action in ("signal", "wake"):
        return durable_cli.run(args)
    if args.jobs_action == "stack":
        return stack_cli.stack(args)
    with connect(load_settings().require_database_url(), "skiplock-cli") as conn:
        if args.jobs_action == "list":
            return _list(conn, args)
        if args.jobs_action == "show":
            return _show(conn, args)
        return _change(conn, args)


def _finished_filter(conn: psycopg.Connection, args: argparse.Namespace) -> tuple[state_changes.FinishedFilter,
                                                                                  dict[str, Any]]:
    """The core's filter, measured from the database's clock, and the audit detail that names it."""
    now: datetime = conn.execute("SELECT now()").fetchone()[0]  # type: ignore[index]
    until = now - args.older_than if args.older_than else now  # jobs that finished later are not covered
    # the group of what was given: a raw error line (what `jobs list` prints) and its masked group
    # (what the console lists) name the same jobs
    error = group_key(headline(args.error)) if args.error else None
    flt = state_changes.FinishedFilter(status=args.state, queue=args.queue,
                                       since=(now - args.within) if args.within else None,
                                       until=until, error=error, text=args.text)
    detail = {"status": args.state, "queue": args.queue, "error": error, "q": args.text,
              "within": _age(args.within), "older_than": _age(args.older_than)}
    return flt, {k: v for k, v in detail.items() if v}


def _age(value: timedelta | None) -> str | None:
    return f"{value.total_seconds():g}s" if value else None


def _list(conn: psycopg.Connection, args: argparse.Namespace) -> int:
    flt, _ = _finished_filter(conn, args)
    rows = state_changes.list_finished_matching(conn, flt, limit=args.limit)
    for row in rows:
        if args.json:
            print(json.dumps(row, default=str))
        else:
            finished = row["finished_at"].strftime("%Y-%m-%d %H:%M:%S") if row["finished_at"] else "-"
            print(f"{row['id']:>10}  {row['queue']:<20} {row['status']:<6} {finished}  "
                  f"{row['attempts']}/{row['max_attempts']}  {row['error'] or ''}")
    if not args.json:
        more = f" (the newest {args.limit}; more may match)" if len(rows) == args.limit else ""
        print(f"{len(rows)} job(s){more}")
    return 0


def _show(conn: psycopg.Connection, args: argparse.Namespace) -> int:
    job = state_changes.job_detail(conn, args.job_id)
    if job is None:
        # the usual surprise on a first day: a job that succeeded is deleted by default
        print(f"job {args.job_id} does not exist: it never did, or it succeeded and was deleted "
              "(SKIPLOCK_HISTORY_MODE=keep or partitioned keeps finished jobs)")
        return 1
    if args.json:
        print(json.dumps(job, default=str))
        return 0
    for key, value in job.items():
        if key in ("payload", "last_error"):
            continue
        print(f"{key + ':':<13} {value if value is not None else '-'}")
    print("payload:\n" + json.dumps(job["payload"], indent=2, default=str))
    print("last_error:\n" + (job["last_error"] or "-"))
    from skiplock.monitor import why  # the console's "why isn't it running", in the same words

    reasons = why.for_job(conn, args.job_id) or []
    if reasons:
        print("why it is not running:\n" + "\n".join(f"  - {r.text}" for r in reasons))
    return 0


def _change(conn: psycopg.Connection, args: argparse.Namespace) -> int:
    what = args.jobs_action  # retry or purge
    actor = args.actor or os.environ.get("USER") or getpass.getuser()
    if getattr(args, "payload", None) is not None:
        return _edit_and_retry(conn, args, actor)
    narrowed = any((args.queue, args.error, args.within, args.older_than, args.text))
    if args.job_ids and (narrowed or args.all):
        raise SkiplockError(f"jobs {what}: give job ids or filters, not both")
    if not args.job_ids and not narrowed and not args.all:
        raise SkiplockError(f"jobs {what}: give job ids, a filter (--queue, --error, --within, --older-than, "
                            f"--text), or --all for every {args.state} job")
    if args.job_ids:
        ids = sorted(set(args.job_ids))
        if args.dry_run:
            print(f"would {what} {state_changes.count_finished_ids(conn, ids)} job(s)")
            return 0
        with conn.transaction():  # the change and its audit row commit together, as in the console
            done = (state_changes.retry_finished if what == "retry" else state_changes.purge_finished)(conn, ids)
            audit.record(conn, actor, "cli", f"{what} selected", len(done), {"ids": ids[:50]})
        skipped = len(ids) - len(done)
        print(f"{_past(what)} {len(done)} job(s)" + (f"; {skipped} were not dead or failed" if skipped else ""))
        return 0 if done else 1
    flt, detail = _finished_filter(conn, args)
    if args.dry_run:
        would = state_changes.count_finished_matching(conn, flt)
        print(f"would {what} {would} job(s)" + ("" if would else _matched_nothing(args, detail)))
        return 0 if would else 1
    # batches commit as they go (a million rows must not be one transaction); the audit row follows
    # the last batch with the count actually changed, as the console's "all matching" does
    count = (state_changes.retry_matching if what == "retry" else state_changes.purge_matching)(conn, flt)
    audit.record(conn, actor, "cli", f"{what} all matching", count, detail)
    print(f"{_past(what)} {count} job(s)" + ("" if count else _matched_nothing(args, detail)))
    return 0 if count else 1  # a filter that matched nothing is most often a typo: not a success


def _matched_nothing(args: argparse.Namespace, detail: dict[str, Any]) -> str:
    """The sentence after "retried 0 job(s)": what was asked, so that a typo shows."""
    asked = ", ".join(f"{k}={v!r}" for k, v in detail.items() if k != "status")
    return f": no {args.state} job matches {asked or 'the filter'} (`skiplock jobs list` shows what there is)"


def _edit_and_retry(conn: psycopg.Connection, args: argparse.Namespace, actor: str) -> int:
    """`jobs retry ID --payload JSON`: the console's "Edit and retry" (worker/core/payload_edit.py)."""
    if len(args.job_ids) != 1 or args.dry_run or args.all:
        raise SkiplockError("jobs retry --payload: give exactly one job id (and no --all or --dry-run)")
    job_id = args.job_ids[0]
    seen = payload_edit.seen(conn, job_id)
    if seen is None:
        print(f"job {job_id} does not exist")
        return 1
    try:
        new = payload_edit.parse(args.payload, seen.payload, load_settings().max_payload_bytes)
        with conn.transaction():  # the edit, the retry and the audit row commit together, as in the console
            done = payload_edit.edit_and_retry(conn, job_id, new, seen.digest, actor)
            audit.record(conn, actor, "cli", "edit and retry", 1,
                         {"ids": [job_id], "edit": done.edit_id, "changes": done.changes})
    except payload_edit.PayloadEditRefused as refused:
        print(str(refused))
        return 1
    print(f"retried job {job_id} with the edited payload ({len(done.changes)} change(s)); "
          f"the original is kept as edit {done.edit_id}")
    return 0


def _past(what: str) -> str:
    return "retried" if what == "retry" else "purged"
