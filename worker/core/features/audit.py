"""The operator audit trail: one row per action in audit_log (migration 008)."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.types.json import Jsonb


def _clean(value: Any) -> Any:
    # PostgreSQL text and jsonb cannot hold NUL: keep the row (with a visible mark) rather than fail the action
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return str(value)


def record(conn: psycopg.Connection, actor: str, role: str | None, action: str, count: int,
           detail: dict[str, Any]) -> None:
    """Write one audit row on `conn` (inside the caller's transaction when it has one)."""
    conn.execute("INSERT INTO audit_log (actor, role, action, count, detail) VALUES (%s, %s, %s, %s, %s)",
                 (_clean(actor), role, _clean(action), count, Jsonb(_clean(detail))))


def prune(conn: psycopg.Connection, keep_seconds: float, batch: int) -> int:
    """Delete at most `batch` audit rows older than `keep_seconds`, oldest first; return how many."""
    cur = conn.execute("DELETE FROM audit_log WHERE id IN (SELECT id FROM audit_log WHERE at < now() - "
                       "make_interval(secs => %s) ORDER BY id LIMIT %s)", (keep_seconds, batch))
    return cur.rowcount
