"""What the acker and the heartbeat share: both write the rows of the jobs this worker holds.

Each writes on the row writers' own connection, under the lock that keeps the ack, the heartbeat and
the shutdown release from deadlocking on the same rows, tells the ledger what it learned, counts what
happened, and writes the runs' log lines in its transaction. What each writes, and when, is its own.
"""

from __future__ import annotations

from skiplock.runtime.parts import WorkerParts


class RowWriter:
    """The parts of WorkerParts a writer of held jobs' rows uses (the acker and the heartbeat)."""

    def __init__(self, parts: WorkerParts) -> None:
        self._connect = parts.rows_connection
        self.worker_id = parts.worker_id
        self.ledger = parts.ledger
        # the ack, the heartbeat and the shutdown release lock the same rows: one at a time (see WorkerParts)
        self._row_writes = parts.row_writes
        self.counters = parts.counters
        self.job_logs = parts.job_logs
