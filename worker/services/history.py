"""Monthly partitions of jobs_history (SKIPLOCK_HISTORY_MODE=partitioned): create ahead, drop old.

Dropping a month whose every row is past the retention window frees its space at once, with
no dead tuples and no vacuum work, where a DELETE of millions of rows would churn for hours
(seed 001, step 10). Any number of workers may run this service; an advisory lock lets one
pass at a time do the DDL.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool

log = logging.getLogger("skiplock.history")

MONTHS_AHEAD = 2  # partitions exist for this month and this many after it
LOCK_KEY = "skiplock_history_partitions"

# Partitions of jobs_history with their bounds, oldest first (the default partition has none).
LIST_PARTITIONS = """
SELECT c.relname, pg_get_expr(c.relpartbound, c.oid)
  FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
 WHERE i.inhparent = 'jobs_history'::regclass
 ORDER BY c.relname
"""


def month_start(day: date) -> date:
    """The first day of `day`'s month."""
    return day.replace(day=1)


def add_months(month: date, n: int) -> date:
    """`month` (a first day) moved by n months."""
    index = month.year * 12 + month.month - 1 + n
    return date(index // 12, index % 12 + 1, 1)


def partition_name(month: date) -> str:
    """jobs_history_pYYYYMM."""
    return f"jobs_history_p{month:%Y%m}"


def parse_partition_month(name: str) -> date | None:
    """The month of a jobs_history_pYYYYMM partition, None for anything else (the default)."""
    if not name.startswith("jobs_history_p") or len(name) != len("jobs_history_p202601"):
        return None
    digits = name[-6:]
    return date(int(digits[:4]), int(digits[4:]), 1) if digits.isdigit() else None


@dataclass
class PassResult:
    """What one pass did."""

    created: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    moved_from_default: int = 0


def create_month(conn: psycopg.Connection, month: date) -> int:
    """Create `month`'s partition, moving its rows out of the default partition first.

    Returns the number of rows moved. ATTACH checks the default partition holds no row of the
    new range, so the rows go into the new table before it is attached, in one transaction.
    """
    name = sql.Identifier(partition_name(month))
    lower = datetime(month.year, month.month, 1, tzinfo=UTC)
    nxt = add_months(month, 1)
    upper = datetime(nxt.year, nxt.month, 1, tzinfo=UTC)
    with conn.transaction():
        conn.execute(sql.SQL("CREATE TABLE {} (LIKE jobs_history INCLUDING DEFAULTS INCLUDING CONSTRAINTS)")
                     .format(name))
        moved = conn.execute(sql.SQL(
            "WITH moved AS (DELETE FROM jobs_history_default WHERE finished_at >= %s AND finished_at < %s "
            "RETURNING *) INSERT INTO {} SELECT * FROM moved").format(name), (lower, upper)).rowcount
        conn.execute(sql.SQL("ALTER TABLE jobs_history ATTACH PARTITION {} FOR VALUES FROM ({}) TO ({})")
                     .format(name, sql.Literal(lower), sql.Literal(upper)))
    return max(moved, 0)


class HistoryPartitions:
    """The partition service; the worker's scheduler calls `run_once()` hourly in partitioned mode."""

    def __init__(self, pool: ConnectionPool, retention_seconds: float, months_ahead: int = MONTHS_AHEAD) -> None:
        self.pool = pool
        self.retention = timedelta(seconds=retention_seconds)
        self.months_ahead = months_ahead

    def run_once(self, now: datetime | None = None) -> PassResult:
        """Create missing months up to `months_ahead`; drop months wholly older than the retention."""
        now = now or datetime.now(UTC)
        result = PassResult()
        # a transaction-scoped lock, held by one transaction: it also works through a PgBouncer in
        # transaction mode, where a session lock and its unlock could land on different servers
        with self.pool.connection() as conn, conn.transaction():
            got = conn.execute("SELECT pg_try_advisory_xact_lock(hashtext(%s))", (LOCK_KEY,)).fetchone()
            if not (got and got[0]):
                return result  # another worker is doing this pass
            existing = {m: name for name, _ in conn.execute(LIST_PARTITIONS)
                        if (m := parse_partition_month(name)) is not None}
            this_month = month_start(now.date())
            for n in range(self.months_ahead + 1):
                month = add_months(this_month, n)
                if month not in existing:
                    result.moved_from_default += create_month(conn, month)
                    result.created.append(partition_name(month))
            cutoff = now - self.retention
            for month, name in sorted(existing.items()):
                nxt = add_months(month, 1)
                # drop only when the newest possible row of the month is past retention
                if datetime(nxt.year, nxt.month, 1, tzinfo=UTC) <= cutoff:
                    conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(name)))
                    result.dropped.append(name)
        if result.created or result.dropped:
            log.info("history partitions: created %s, dropped %s, moved %d row(s) from default",
                     result.created, result.dropped, result.moved_from_default)
        return result
