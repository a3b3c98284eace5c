"""Failed-login throttling: a temporary lockout per user name and per client address.

After SKIPLOCK_LOGIN_MAX_FAILURES failed logins within SKIPLOCK_LOGIN_LOCKOUT_SECONDS, that user
name (and, separately, that address) is refused with 429 for SKIPLOCK_LOGIN_LOCKOUT_SECONDS, even
with the right password. A successful login clears its counters. State lives in the
login_failures table (migration 008) so all gunicorn workers share it.
"""

from __future__ import annotations

import math

from flask import current_app, request

from skiplock.webapp.db import connection

# Longer names are cut: the table key stays small whatever a client sends.
MAX_KEY_CHARS = 200


def _keys(user: str) -> list[str]:
    # PostgreSQL text cannot hold NUL; replacing it keeps hostile names countable rather than erroring
    clean = user.replace("\x00", "\ufffd")[:MAX_KEY_CHARS]
    return [f"user:{clean}", f"addr:{request.remote_addr or 'unknown'}"]


def locked_for(user: str) -> int:
    """Seconds until this user name or this client may try again; 0 when not locked."""
    with connection() as conn:
        row = conn.execute("SELECT extract(epoch FROM max(locked_until) - now()) FROM login_failures "
                           "WHERE key = ANY(%s) AND locked_until > now()", (_keys(user),)).fetchone()
    return math.ceil(row[0]) if row and row[0] is not None else 0


def record_failure(user: str) -> None:
    """Count one failed login for the name and the address; lock each that reaches the limit."""
    limit = int(current_app.config.get("LOGIN_MAX_FAILURES", 5))
    window = int(current_app.config.get("LOGIN_LOCKOUT_SECONDS", 300))
    with connection() as conn:
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
            conn.execute(
                "UPDATE login_failures SET locked_until = now() + make_interval(secs => %(window)s), "
                "failures = 0, first_at = now() WHERE key = %(key)s AND failures >= %(limit)s",
                {"key": key, "window": window, "limit": limit})


def clear(user: str) -> None:
    """A good login forgets the failures of this name and this address."""
    with connection() as conn:
        conn.execute("DELETE FROM login_failures WHERE key = ANY(%s)", (_keys(user),))
