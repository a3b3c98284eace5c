"""Failed-login throttling per account and address together, with a growing delay rather than a wall.

Each (user name, client address) pair has its own count. Its first SKIPLOCK_LOGIN_MAX_FAILURES - 1
failures cost nothing; from the limit on, each failure makes that pair wait 1, 2, 4 ... seconds (at most
SKIPLOCK_LOGIN_LOCKOUT_SECONDS) before its next try, which is refused with 429 until then, even with the
right password. A guesser is slowed exponentially; the on-call, behind the same NAT as a failing script
or typing their own password wrong, is not locked out: another account there is untouched, and their own
right password works after a short wait. A good login clears the pair; a pair quiet for
SKIPLOCK_LOGIN_LOCKOUT_SECONDS starts again. Every delay is written to the audit trail ("login throttled"),
and the Health page lists the last day's. State lives in the login_failures table so all gunicorn workers
share it (worker/core/sql/login_throttle.sql).
"""

from __future__ import annotations

import math

from flask import current_app, request

from skiplock.core.features import audit as audit_trail
from skiplock.core.sql import queries
from skiplock.webapp.db import connection

Q = queries("login_throttle")

# Longer names are cut: the table key stays small whatever a client sends.
MAX_KEY_CHARS = 200


def _clean(user: str) -> str:
    # PostgreSQL text cannot hold NUL; replacing it keeps hostile names countable rather than erroring
    return user.replace("\x00", "\ufffd")[:MAX_KEY_CHARS]


def _address() -> str:
    return request.remote_addr or "unknown"


def _key(user: str) -> str:
    return f"pair:{_clean(user)}|{_address()}"


def delay_after(failures: int, limit: int, cap: int) -> int:
    """Seconds a pair waits after its `failures`-th failure: none under `limit`, then doubling up to `cap`.

    >>> [delay_after(n, 5, 300) for n in (4, 5, 6, 7, 13, 14, 40)]
    [0, 1, 2, 4, 256, 300, 300]
    """
    if failures < limit:
        return 0
    return min(cap, 2 ** min(failures - limit, 30))


def locked_for(user: str) -> int:
    """Seconds until this user name may try again from this address; 0 when it may now."""
    return standing(user)[0]


def standing(user: str) -> tuple[int, bool]:
    """(seconds until this pair may try again, 0 when it may now; whether failures are counted). One read,
    so HTTP Basic, which checks on every request, clears counters only when there are some."""
    with connection(primary=True) as conn:  # the counters live on the primary
        row = conn.execute(Q.standing, {"key": _key(user)}).fetchone()
    wait = math.ceil(row[0]) if row and row[0] is not None else 0
    return wait, bool(row and row[1])


def record_failure(user: str, via: str = "form") -> int:
    """Count one failed login for this name from this address; past the limit, make the pair wait and write
    the throttle to the audit trail. Returns the seconds the pair now waits (0 while under the limit)."""
    limit = int(current_app.config.get("LOGIN_MAX_FAILURES", 5))
    cap = int(current_app.config.get("LOGIN_LOCKOUT_SECONDS", 300))
    key = _key(user)
    with connection(primary=True) as conn, conn.transaction():  # the counters live on the primary
        row = conn.execute(Q.count_failure, {"key": key, "window": cap}).fetchone()
        failures = int(row[0]) if row else 1
        seconds = delay_after(failures, limit, cap)
        if seconds:
            conn.execute(Q.delay, {"key": key, "seconds": seconds})
            # who, from where, through which door, for how long: the Audit and Health pages show it
            audit_trail.record(conn, _clean(user), None, "login throttled", 0,
                               {"address": _address(), "via": via, "failures": failures, "seconds": seconds})
    return seconds


def clear(user: str) -> None:
    """A good login forgets the failures of this name from this address."""
    with connection(primary=True) as conn:  # the counters live on the primary
        conn.execute(Q.clear, {"key": _key(user)})
