"""skiplock.signal(key, payload): wake the jobs waiting on a key, or leave the signal for the wait to come.

One call of the SQL function skiplock_signal (migrations/functions/skiplock_signal.sql): the first signal
of a key is kept (SKIPLOCK_SIGNAL_RETENTION, 7 days by default), every job parked on it wakes with its
payload, and a wait that starts later returns it at once. With `conn=`, the signal is part of the
caller's transaction: a webhook handler that rolls back wakes nobody.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from skiplock.core.plumbing import adapters
from skiplock.core.producer import default_pool
from skiplock.core.sql import queries

Q = queries("durable")


def _params(key: str, payload: Any) -> dict[str, Any]:
    if not isinstance(key, str) or not key:
        raise ValueError(f"a signal key must be a non-empty string, got {key!r}")
    try:
        text = json.dumps(payload)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"a signal's payload must be JSON-serialisable: {exc}") from None
    return {"key": key, "payload": text}


def signal(key: str, payload: Any = None, conn: Any = None) -> int:
    """Send the signal `key` with a JSON-serialisable `payload`; returns how many parked jobs it woke.

    The first signal of a key wins: a repeated one changes nothing and returns 0. Every job waiting on the
    key wakes and receives the payload; a job that waits for it later receives it at once while the
    signal is kept. `conn`: any connection enqueue(conn=) accepts; the signal then commits or rolls back
    with the caller's transaction (the jobs it wakes are woken only if it commits).
    """
    params = _params(key, payload)
    if conn is not None:
        rows = adapters.run_sync(conn, Q.signal, params)
    else:
        with default_pool().connection() as own:
            rows = own.execute(Q.signal, params).fetchall()
    return int(rows[0][0])


async def signal_async(key: str, payload: Any = None, conn: Any = None) -> int:
    """signal() for asyncio code: `conn` is any connection enqueue_async(conn=) accepts; without one, the
    signal is sent from a thread on the producer's pool."""
    params = _params(key, payload)
    if conn is None:
        return await asyncio.to_thread(signal, key, payload)
    rows = await adapters.run_async(conn, Q.signal, params)
    return int(rows[0][0])
