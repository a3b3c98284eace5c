"""The job's own log lines in the database: one row per attempt that logged anything (migration 041).

The worker captures them (worker/runtime/job_logs.py) and writes each attempt's lines whole with
`write`, at its heartbeats and with its ack; the console reads them with `of_job` and finds jobs by
their lines with `find`; the pruner calls `prune`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import psycopg
from psycopg.rows import dict_row

from skiplock.core.sql import queries

Q = queries("job_logs")


class AttemptLines(NamedTuple):
    """One attempt's lines so far, as written."""

    job_id: int
    attempt: int
    lines: str
    line_count: int
    dropped: int


def write(conn: psycopg.Connection, worker_id: str, attempts: Sequence[AttemptLines]) -> None:
    """Write each attempt's lines, replacing what an earlier write of the same attempt left."""
    if not attempts:
        return
    conn.execute(Q.write_attempts, {
        "worker_id": worker_id,
        "job_ids": [a.job_id for a in attempts], "attempts": [a.attempt for a in attempts],
        "lines": [a.lines for a in attempts], "line_counts": [a.line_count for a in attempts],
        "dropped": [a.dropped for a in attempts]})


def of_job(conn: psycopg.Connection, job_id: int, limit: int = 1000) -> list[dict[str, Any]]:
    """The log lines of a job's latest `limit` attempts that logged anything, oldest first (empty when
    its handler logged nothing)."""
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(Q.of_job, {"job_id": job_id, "limit": limit}).fetchall()[::-1]


def counts_of_job(conn: psycopg.Connection, job_id: int) -> dict[int, int]:
    """Each attempt's number of lines logged (kept and dropped), by attempt."""
    return {a: kept + dropped for a, kept, dropped in conn.execute(Q.counts_of_job, {"job_id": job_id})}


def find(conn: psycopg.Connection, text: str, limit: int) -> list[dict[str, Any]]:
    """Up to `limit` jobs whose log lines contain `text` (case-insensitive), newest first."""
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(Q.jobs_logging, {"text": text, "limit": limit}).fetchall()


def prune(conn: psycopg.Connection, keep_seconds: float, batch: int) -> int:
    """Delete at most `batch` attempts' lines older than `keep_seconds`; return how many."""
    return conn.execute(Q.prune, {"retention": keep_seconds, "limit": batch}).rowcount
