"""The plans of a wake with many parked jobs: the wake pass and a signal, neither of which may scan `jobs`.

Both run in a transaction that is rolled back, so the parked jobs stay as they were. The wake pass is one
statement (EXPLAIN ANALYZE); a signal is the function skiplock_signal, whose inner statements' plans come
from auto_explain (nested statements, reported to this client as NOTICEs).
"""

from __future__ import annotations

from typing import Any

import psycopg

from skiplock.core.sql import queries

Q = queries("durable")
DUE = 100  # sleeping jobs made due for the wake pass to find

# Benchmark data only: `DUE` of the seeded sleepers' times moved into the past, in the rolled-back
# transaction, so the wake pass has work to do among the parked jobs that are not due.
MAKE_DUE = """
UPDATE jobs SET run_at = now() - interval '1 second'
 WHERE id IN (SELECT id FROM jobs WHERE status = 'parked' AND run_at < '9999-12-31' ORDER BY id LIMIT %(n)s)
"""


def _explain(conn: psycopg.Connection[Any], statement: str, params: dict[str, Any]) -> str:
    cur = psycopg.ClientCursor(conn)  # EXPLAIN takes no bound parameters: the values are inlined
    rows = cur.execute("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF, SUMMARY OFF) " + statement,
                       params).fetchall()
    return "\n".join(r[0] for r in rows)


def wake_plans(url: str) -> dict[str, Any]:
    """{'wake_pass': plan, 'signal': [inner plans], 'parked': count, 'woken_by_pass', 'woken_by_signal'}."""
    with psycopg.connect(url) as conn:
        parked = conn.execute("SELECT count(*) FROM jobs WHERE status = 'parked'").fetchone()
        conn.execute(MAKE_DUE, {"n": DUE})
        wake = _explain(conn, Q.wake_due, {"limit": 1000})
        key_row = conn.execute("SELECT key FROM job_waits WHERE key IS NOT NULL ORDER BY job_id LIMIT 1").fetchone()
        assert key_row is not None
        notices: list[str] = []
        conn.add_notice_handler(lambda diag: notices.append(diag.message_primary or ""))
        conn.execute("LOAD 'auto_explain'")
        for setting, value in (("log_min_duration", "0"), ("log_nested_statements", "on"),
                               ("log_analyze", "on"), ("log_buffers", "on"), ("log_timing", "off"),
                               ("log_level", "notice")):
            conn.execute(f"SET LOCAL auto_explain.{setting} = {value}")
        woken = conn.execute("SELECT skiplock_signal(%s, '{\"paid\": true}')", (key_row[0],)).fetchone()
        conn.execute("SET LOCAL auto_explain.log_min_duration = -1")
        conn.rollback()
    return {"parked": int(parked[0]) if parked else 0, "made_due": DUE, "wake_pass": wake,
            "signal_key": key_row[0], "woken_by_signal": int(woken[0]) if woken else 0, "signal": notices}


def scans_jobs(plan: str) -> bool:
    """Whether a plan reads `jobs` by a sequential scan."""
    return "Seq Scan on jobs" in plan
