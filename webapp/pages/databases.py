"""One console over several databases: a switcher, a row per database, every page scoped to one.

    SKIPLOCK_DATABASES=orders=postgresql://...,billing=postgresql://... skiplock web

`create_multi_app()` (webapp/multi_app.py) builds one complete console per database, each with its own connection pool
and deadline, and serves them under /db/<name>/ (skiplock.webapp.mount). The first database's
console also answers at the root, where the operator logs in; the consoles under /db/ accept that
login (or HTTP Basic). /databases/ shows one row per database, each read in parallel under its
own deadline, so a database that is down shows as down and never slows the others' rows or pages.
Audit rows and log lines name their database.
"""

from __future__ import annotations

import concurrent.futures
import hmac
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from flask import Blueprint, Flask, Request, current_app, render_template, request, session
from flask.typing import ResponseReturnValue

from skiplock.core.plumbing.deadline import WATCHDOG
from skiplock.webapp import db

bp = Blueprint("databases", __name__, url_prefix="/databases")

CONSOLES = "skiplock_consoles"  # host app extension: name -> that database's console app
ROW_DEADLINE = 3.0  # seconds one database's row may take before it shows as not answering

# One database's health in one short read-only statement (capped counts: a huge queue stays cheap).
HEALTH_SQL = """
SELECT (SELECT count(*) FROM (SELECT 1 FROM jobs WHERE status = 'queued' AND run_at <= now() LIMIT 10000) r),
       (SELECT count(*) FROM jobs WHERE status = 'running'),
       (SELECT count(*) FROM (SELECT 1 FROM jobs WHERE status = 'dead' LIMIT 10000) d),
       (SELECT count(*) FROM workers WHERE last_seen > now() - interval '30 seconds'),
       (SELECT extract(epoch FROM now() - min(run_at))::float8 FROM jobs
         WHERE status = 'queued' AND run_at <= now())
"""


@dataclass
class DatabaseRow:
    """The overview's row of one database."""

    name: str
    up: bool
    ready: int = 0
    running: int = 0
    dead: int = 0
    workers: int = 0
    oldest_ready_s: float | None = None
    error: str = ""
    took_ms: float = 0.0


def _read(name: str, console: Flask, deadline: float) -> DatabaseRow:
    started = time.perf_counter()
    try:
        with db.get_pool(console).connection(timeout=deadline) as conn, WATCHDOG.guard(conn, deadline):
            row = conn.execute(HEALTH_SQL).fetchone()
        assert row is not None
        return DatabaseRow(name, True, int(row[0]), int(row[1]), int(row[2]), int(row[3]), row[4],
                           took_ms=(time.perf_counter() - started) * 1000)
    except Exception as exc:  # any failure is this database's row, never the page's
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return DatabaseRow(name, False, error=text[:200], took_ms=(time.perf_counter() - started) * 1000)


def database_rows(consoles: Mapping[str, Flask], deadline: float = ROW_DEADLINE) -> list[DatabaseRow]:
    """Every database's row, read in parallel, each under `deadline` seconds."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(len(consoles), 1)) as pool:
        futures = {name: pool.submit(_read, name, app, deadline) for name, app in consoles.items()}
        rows = []
        for name, future in futures.items():
            try:
                rows.append(future.result(timeout=deadline + 1))
            except concurrent.futures.TimeoutError:
                rows.append(DatabaseRow(name, False, error=f"no answer within {deadline:g} s"))
    return rows


@bp.route("/")
def index() -> ResponseReturnValue:
    """A row per database with its health; each name links to that database's console."""
    consoles = current_app.extensions[CONSOLES]
    rows = database_rows(consoles, float(current_app.config.get("DATABASE_ROW_DEADLINE", ROW_DEADLINE)))
    return render_template("databases/databases.html", rows=rows, script_root=request.script_root)


def host_login(req: Request) -> tuple[str, str] | None:
    """The mounted consoles' authorize hook, run in the host's request context: the host's login
    (its session) or HTTP Basic against the same accounts."""
    from skiplock.webapp.auth import check_credentials

    accounts = current_app.config["ACCOUNTS"]
    if not current_app.config.get("AUTH", True):
        return "admin", "anonymous"
    if req.authorization and req.authorization.type == "basic":
        account = check_credentials(accounts, req.authorization.username or "", req.authorization.password or "")
        return (account.role, account.user) if account else None
    user, role = session.get("user"), session.get("role")
    for account in accounts:
        if user and hmac.compare_digest(account.user, str(user)) and account.role == role:
            return account.role, account.user
    return None


def context() -> dict[str, Any]:
    """The switcher's data for every page of every console: the databases and which one this is."""
    names = current_app.config.get("DATABASES") or []
    if not names:
        return {}
    home = request.script_root.rsplit("/db/", 1)[0]
    return {"databases_nav": [(n, f"{home}/db/{n}/") for n in names], "databases_home": f"{home}/databases/",
            "database_name": current_app.config.get("DATABASE_NAME")}
