"""`skiplock doctor --all`: the doctor's checks on every database of SKIPLOCK_DATABASES.

Each database is checked on its own connection with a short connect timeout, so one that is down
is reported as such (a failing check) and the others are still checked. Exit 1 if any check of
any database fails or a database cannot be reached.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

import psycopg

from skiplock.core.errors import ConfigError
from skiplock.core.plumbing.config import Settings
from skiplock.core.plumbing.databases import configured_databases
from skiplock.monitor.doctor import FAIL, Check, format_checks, run_checks


def check_database(url: str, settings: Settings, max_xact_age: float) -> list[Check]:
    """The checks of one database, or one failing check saying it cannot be reached."""
    from skiplock.core.plumbing.db import connect

    try:
        with connect(url, "skiplock-doctor") as conn:
            return run_checks(conn, settings, max_xact_age)
    except psycopg.OperationalError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return [Check("database", FAIL, f"cannot reach the database: {first}",
                      "check that it is running and that this host may connect to it")]


def doctor_all(settings: Settings, max_xact_age: float, *, as_json: bool = False) -> int:
    """Check every configured database; print a section each; 1 if anything failed."""
    databases = configured_databases()
    if not databases:
        raise ConfigError("doctor --all needs SKIPLOCK_DATABASES=name=url,name=url")
    results: dict[str, list[Check]] = {name: check_database(url, settings, max_xact_age)
                                       for name, url in databases.items()}
    if as_json:
        payload: dict[str, Any] = {name: [asdict(c) for c in checks] for name, checks in results.items()}
        print(json.dumps(payload, indent=2, default=str))
    else:
        for name, checks in results.items():
            failed = any(c.status == FAIL for c in checks)
            print(f"== {name}: {'FAIL' if failed else 'ok'}")
            print(format_checks(checks))
    return 1 if any(c.status == FAIL for checks in results.values() for c in checks) else 0
