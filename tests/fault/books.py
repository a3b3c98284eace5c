"""The books of a fault scenario: every enqueued job is completed, dead, failed or still queued.

One function, `audit()`, computes the figures from the database alone (the jobs table and the
test_effects rows that tests/support/handlers.py writes), so the assertions and the reported numbers
come from the same code. `record()` keeps them for the end-of-run summary (see conftest.py).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any

import psycopg

REPORT_VARIABLE = "FAULT_REPORT"  # a file that record() appends each scenario's books to, as a JSON line
# Filled by record(); printed by tests/fault/conftest.py at the end of the session.
RESULTS: list[dict[str, Any]] = []

AUDIT_SQL = """
WITH enq AS (
    SELECT unnest(%(ids)s::bigint[]) AS id
), eff AS (
    SELECT job_id, count(*) AS runs FROM test_effects WHERE job_id = ANY(%(ids)s::bigint[]) GROUP BY job_id
)
SELECT
    count(*) FILTER (WHERE j.id IS NULL AND coalesce(e.runs, 0) > 0)           AS completed_deleted,
    count(*) FILTER (WHERE j.status = 'succeeded')                              AS completed_kept,
    count(*) FILTER (WHERE j.status = 'dead')                                   AS dead,
    count(*) FILTER (WHERE j.status = 'failed')                                 AS failed,
    count(*) FILTER (WHERE j.status = 'queued')                                 AS queued,
    count(*) FILTER (WHERE j.status = 'running')                                AS running,
    count(*) FILTER (WHERE j.id IS NULL AND coalesce(e.runs, 0) = 0)            AS lost,
    coalesce(sum(greatest(e.runs - 1, 0)), 0)                                   AS duplicated_effects,
    coalesce(sum(greatest(j.attempts - 1, 0)) FILTER (WHERE j.status = 'succeeded'), 0) AS extra_attempts
  FROM enq
  LEFT JOIN jobs j ON j.id = enq.id
  LEFT JOIN eff e ON e.job_id = enq.id
"""


@dataclass
class Books:
    """Where every enqueued job ended up. `lost` must be 0."""

    scenario: str
    enqueued: int
    completed: int
    duplicated: int
    lost: int
    dead: int
    failed: int
    queued: int
    running: int
    extra: dict[str, Any] = field(default_factory=dict)

    def line(self) -> str:
        """One printable line with every figure."""
        figures = {k: v for k, v in asdict(self).items() if k not in ("scenario", "extra")}
        figures.update(self.extra)
        return f"{self.scenario}: " + " ".join(f"{k}={_fmt(v)}" for k, v in figures.items())


def _fmt(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def audit(conn: psycopg.Connection, scenario: str, ids: list[int], *, effects: bool = True) -> Books:
    """Account for `ids`: completed (effect written and row deleted, or row 'succeeded'), dead,
    failed, queued, running, and lost (row gone without any effect).

    `effects=False` is for handlers that write no effect (the noop queue): run those with
    SKIPLOCK_KEEP_HISTORY so a completed job stays visible as 'succeeded'; a deleted row then
    counts as lost, and duplicates are counted from attempts instead of effect rows.
    """
    row = conn.execute(AUDIT_SQL, {"ids": ids}).fetchone()
    assert row is not None
    (completed_deleted, completed_kept, dead, failed, queued, running, lost, dup_effects, extra_attempts) = row
    if not effects:
        lost += completed_deleted  # a deleted noop job left no proof that it ran
        completed_deleted = 0
    duplicated = int(dup_effects) if effects else int(extra_attempts)
    return Books(scenario, len(ids), completed_deleted + completed_kept, duplicated, lost, dead, failed,
                 queued, running)


def record(books: Books, **extra: Any) -> Books:
    """Keep the figures for the session summary (and $FAULT_REPORT as JSON lines)."""
    books.extra.update(extra)
    RESULTS.append({"scenario": books.scenario, **asdict(books)})
    print(books.line())
    # Not a SKIPLOCK_* name: load_settings refuses any SKIPLOCK_* name it does not know, and the test
    # process reads its settings too (every enqueue does). As SKIPLOCK_FAULT_REPORT, setting it made
    # each scenario's first enqueue fail with "unknown setting SKIPLOCK_FAULT_REPORT".
    path = os.environ.get(REPORT_VARIABLE)
    if path:
        with open(path, "a") as out:
            out.write(json.dumps({k: v for k, v in asdict(books).items()}, default=str) + "\n")
    return books
