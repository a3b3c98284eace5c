"""Failed-login throttling: a temporary lockout per user name and per client address.

After SKIPLOCK_LOGIN_MAX_FAILURES failed logins within SKIPLOCK_LOGIN_LOCKOUT_SECONDS, that user
name (and, separately, that address) is refused with 429 for SKIPLOCK_LOGIN_LOCKOUT_SECONDS, even
with the right password. A successful login clears its counters. State lives in the
login_failures table (migration 008) so all gunicorn workers share it.
"""

from __future__ import annotations

import math

from flask import current_app, request

from skiplock.core.features import audit as audit_trail
from skiplock.webapp.db import connection

# Longer names are cut: the table key stays small whatever a client sends.
MAX_KEY_CHARS = 200


def _keys(user: str) -> list[str]:
    # PostgreSQL text cannot hold NUL; replacing it keeps hostile names countable rather than erroring
    clean = user.replace("\x00", "\ufffd")[:MAX_KEY_CHARS]
    return [f"user:{clean}", f"addr:{request.remote_addr or 'unknown'}"]


def locked_for(user: str) -> int:
    """Seconds until this user name or this client may try again; 0 when not locked."""
    return standing(user)[0]


def standing(user: str) -> tuple[int, bool]:
    """(seconds until this name or client may try again, 0 when not locked; whether failures are counted).
    One read, so HTTP Basic, which checks on every request, clears counters only when there are some."""
    with connection(primary=True) as conn:  # the counters live on the primary
        row = conn.execute("SELECT extract(epoch FROM max(locked_until) FILTER (WHERE locked_until > now()) - now()), "
                           "count(*) > 0 FROM login_failures WHERE key = ANY(%s)", (_keys(user),)).fetchone()
    wait = math.ceil(row[0]) if row and row[0] is not None else 0
    return wait, bool(row and row[1])


def record_failure(user: str, via: str = "form") -> list[str]:
    """Count one failed login for the name and the address; lock each that reaches the limit, and write
    each lockout to the audit trail. Returns the keys ("user:NAME", "addr:IP") locked by this failure."""
    limit = int(current_app.config.get("LOGIN_MAX_FAILURES", 5))
    window = int(current_app.config.get("LOGIN_LOCKOUT_SECONDS", 300))
    locked: list[str] = []
    with connection(primary=True) as conn:  # the counters live on the primary
        # one statement per key, atomic under concurrent workers; failures older than the window restart at 1
        for key in _keys(user):
            conn.execute(
                """
                INSERT INTO login_failures AS f (key, failures) VALUES (%(key)s, 1)
                ON CONFLICT (key) DO UPDATE SET
                    failures = CASE WHEN f.first_at < now() - make_interval(secs => %(window)s)
                                    THEN 1 ELSE f.failures + 1 END,
                    first_at = CASE WHEN f.first_at < now() - make_interval(secs => %(window)s)
                                    THEN now() ELSE f.first_at END
                """, {"key": key, "window": window})
            if conn.execute(
                    "UPDATE login_failures SET locked_until = now() + make_interval(secs => %(window)s), "
                    "failures = 0, first_at = now() WHERE key = %(key)s AND failures >= %(limit)s RETURNING key",
                    {"key": key, "window": window, "limit": limit}).fetchone():
                locked.append(key)
        for key in locked:
            # who was locked out, from where, through which door: an operator reads it on the Audit page
            audit_trail.record(conn, user[:MAX_KEY_CHARS].replace("\x00", "\ufffd"), None, "login lockout", 0,
                               {"locked": key, "via": via, "address": request.remote_addr or "unknown",
                                "seconds": window, "after failures": limit})
    return locked


def clear(user: str) -> None:
    """A good login forgets the failures of this name and this address."""
    with connection(primary=True) as conn:  # the counters live on the primary
        conn.execute("DELETE FROM login_failures WHERE key = ANY(%s)", (_keys(user),))
