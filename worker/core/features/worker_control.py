"""Operator commands to one worker process: quiet (finish running jobs, claim no more) and stop (the
graceful shutdown SIGTERM starts), as Sidekiq's Busy page offers. The console and CLI call `command`;
the worker reads its row's command with its registry heartbeat (runtime/runner.py) and obeys."""

from __future__ import annotations

from enum import StrEnum

import psycopg


class WorkerCommand(StrEnum):
    """What an operator may ask of a worker process (the workers_command_known constraint, migration 029)."""

    QUIET = "quiet"  # stop claiming; the jobs it runs finish; it keeps heartbeating until stopped
    STOP = "stop"  # graceful shutdown: stop claiming, let running jobs finish within the grace, exit 0


# A stop is final: a later quiet does not undo it. Only a worker that is still heartbeating is asked.
SET_COMMAND = """
UPDATE workers SET command = %(command)s, command_by = %(actor)s, command_at = now()
 WHERE id = %(id)s AND command IS DISTINCT FROM 'stop'
   AND last_seen > now() - make_interval(secs => %(live)s)
RETURNING id
"""


def command(conn: psycopg.Connection, worker_id: str, what: WorkerCommand, actor: str, live: float) -> bool:
    """Record `what` for worker `worker_id`; False when it is gone, silent (not live) or already stopping."""
    row = conn.execute(SET_COMMAND, {"id": worker_id, "command": str(what), "actor": actor, "live": live}).fetchone()
    return row is not None
