"""/healthz for load balancers: 200 when the database answers and is migrated, 503 when it does not
answer or lacks migrations ("not migrated": every page would fail, so the console is not healthy). No auth."""

from __future__ import annotations

import logging

from flask import Response
from psycopg_pool import PoolTimeout

from skiplock.core.schema_state import missing_migrations
from skiplock.webapp import db

log = logging.getLogger("skiplock.console")


def healthz() -> Response:
    """Check the database with one round trip; never cached."""
    try:
        with db.get_pool().connection(timeout=2.0) as conn:
            missing = missing_migrations(conn)  # one round trip, as SELECT 1 was, once migrated
    except (PoolTimeout, OSError, Exception) as exc:  # any failure means "not healthy", never a 500
        log.warning("healthz: database unavailable: %s", str(exc).splitlines()[0] if str(exc) else exc)
        return Response("database unavailable\n", 503, {"Cache-Control": "no-store"}, mimetype="text/plain")
    if missing:
        log.warning("healthz: the database is not migrated (%d migrations missing)", len(missing))
        return Response("not migrated: run `skiplock migrate`\n", 503, {"Cache-Control": "no-store"},
                        mimetype="text/plain")
    return Response("ok\n", 200, {"Cache-Control": "no-store"}, mimetype="text/plain")
