"""The jobs vacuum: a worker vacuums `jobs` itself once its dead rows pile up between autovacuum's visits.

Every job leaves dead rows behind (the claim's UPDATE cannot be HOT, the ack deletes), and the
claim's walk of jobs_ready_idx passes every dead entry at a queue's head until a vacuum removes
it. Autovacuum looks at a database at most once per autovacuum_naptime (a server setting, 1 min by
default), so at a high job rate a million dead rows built up between its visits, every claim walked
thousands of index and heap pages, and the backlog ran away (README "Latency against load").

So each worker checks the table's dead rows every VACUUM_CHECK_SECONDS and, past
SKIPLOCK_VACUUM_DEAD_ROWS plus LIVE_SHARE of its live rows, vacuums it:
- the live rows' share, as autovacuum's scale factor: a vacuum reads every index of jobs whole, so
  on a big table (a backlog of a million, or millions of rows kept in `keep` mode) it waits for
  proportionally more dead rows. With a flat threshold, tests/benchmarks/growth.py's drain beside
  millions of kept rows ran slower than with no vacuum of ours; with this share, faster;
- one worker of the database at a time (a session advisory try-lock), never waiting for a running
  autovacuum or manual VACUUM (SKIP_LOCKED). Behind a transaction-pooling PgBouncer
  (db.session_settings() says no) a session lock could be left on a server connection that other
  clients then use, and every later try would fail: there SKIP_LOCKED alone keeps two vacuums apart;
- INDEX_CLEANUP ON: removing the dead index entries is the point, so index vacuuming is never
  bypassed;
- TRUNCATE false: truncating the heap's empty tail takes an ACCESS EXCLUSIVE lock that would stall
  every claim and enqueue; the space is reused by the next inserts anyway;
- a duty cycle: after a vacuum that took d seconds the next waits at least d * (1 - DUTY) / DUTY,
  so a big table (history mode keep) never has a vacuum running more than DUTY of the time.
Only the table's owner (or, on PostgreSQL 17+, a role with MAINTAIN) may vacuum it; any other role
logs that once and leaves the table to autovacuum.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

log = logging.getLogger("skiplock.vacuum")

VACUUM_CHECK_SECONDS = 1.0  # how often a worker reads the dead-row count (one pg_stat row)
DUTY = 0.25  # most of the time a vacuum of jobs may be running (measured by the vacuum's own duration)
VACUUM_LOCK_CLASS = 1936422241  # advisory lock namespace ('skva'); key 0: the one vacuum of jobs

LIVE_SHARE = 0.05  # the threshold grows by this share of the live rows (module docstring)
ROWS = "SELECT n_dead_tup, n_live_tup FROM pg_stat_user_tables WHERE relid = 'jobs'::regclass"
# The owner's members (and superusers) may vacuum; PostgreSQL 17 adds the MAINTAIN privilege.
MAY_VACUUM = "SELECT pg_has_role(relowner, 'USAGE') FROM pg_class WHERE oid = 'jobs'::regclass"
MAY_MAINTAIN = "SELECT has_table_privilege('jobs', 'MAINTAIN')"
VACUUM = "VACUUM (SKIP_LOCKED, INDEX_CLEANUP ON, TRUNCATE false) jobs"


@dataclass(frozen=True)
class VacuumPass:
    """One vacuum this worker ran: the dead rows that triggered it and how long it took."""

    dead_rows: int
    seconds: float


class JobsVacuum:
    """One check per `run_once()`; the worker's scheduler calls it every VACUUM_CHECK_SECONDS."""

    def __init__(self, pool: ConnectionPool, dead_rows: int, *, advisory_lock: bool = True,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.pool = pool
        self.dead_rows = dead_rows  # 0: never (SKIPLOCK_VACUUM_DEAD_ROWS=0)
        self.advisory_lock = advisory_lock  # False behind a transaction pooler (module docstring)
        self.clock = clock
        self.allowed: bool | None = None  # may this role vacuum jobs? asked once
        self.not_before = 0.0  # the duty cycle's next allowed start (clock seconds)

    def run_once(self) -> VacuumPass | None:
        """Vacuum jobs past `dead_rows` dead rows plus LIVE_SHARE of its live ones, unless a vacuum of it runs."""
        if not self.dead_rows or self.allowed is False or self.clock() < self.not_before:
            return None
        with self.pool.connection() as conn:
            if self.allowed is None:
                self.allowed = self._may_vacuum(conn)
                if not self.allowed:
                    log.info("not vacuuming jobs: this role does not own it; autovacuum alone cleans it "
                             "(README \"Latency against load\")")
                    return None
            row = conn.execute(ROWS).fetchone()
            dead, live = (int(row[0] or 0), int(row[1] or 0)) if row else (0, 0)
            if dead < self.dead_rows + LIVE_SHARE * live:
                return None
            if self.advisory_lock:
                got = conn.execute("SELECT pg_try_advisory_lock(%s, 0)", (VACUUM_LOCK_CLASS,)).fetchone()
                if not got or not got[0]:
                    return None  # another worker is vacuuming it now
            try:
                started = self.clock()
                conn.execute(VACUUM)
                took = self.clock() - started
            finally:
                if self.advisory_lock:
                    conn.execute("SELECT pg_advisory_unlock(%s, 0)", (VACUUM_LOCK_CLASS,))
        self.not_before = self.clock() + took * (1 - DUTY) / DUTY
        log.debug("vacuumed jobs: %d dead rows, %.3f s", dead, took)
        return VacuumPass(dead, took)

    @staticmethod
    def _may_vacuum(conn: psycopg.Connection[Any]) -> bool:
        row = conn.execute(MAY_VACUUM).fetchone()
        if row and row[0]:
            return True
        if conn.info.server_version >= 170000:
            granted = conn.execute(MAY_MAINTAIN).fetchone()
            return bool(granted and granted[0])
        return False
