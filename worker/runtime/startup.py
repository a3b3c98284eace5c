"""What a worker settles before it claims: its queues and their leases, a migrated database, the limits
its tasks declare. Functions of the settings and the task table, so the Worker only calls them."""

from __future__ import annotations

from psycopg_pool import ConnectionPool

from skiplock.core.errors import ConfigError, SchemaMissing
from skiplock.core.plumbing.config import Settings
from skiplock.core.plumbing.db import connect, is_connection_error
from skiplock.core.registry import Registry
from skiplock.core.schema_state import (
    missing_after_running_migration,
    not_migrated_message,
    shipped_versions,
)
from skiplock.runtime.flow import WorkerFlow


def resolve_queues(settings: Settings, registry: Registry, queues: list[str] | None) -> list[str]:
    """The queues to work: those asked for, else SKIPLOCK_QUEUES, else every registered one; each needs a handler."""
    chosen = list(queues or settings.queues or registry.queues())
    if not chosen:
        raise ConfigError("no queues to work: register handlers with @task in a module named by "
                          "SKIPLOCK_TASKS/--tasks, or pass --queues")
    missing = [q for q in chosen if registry.get(q) is None]
    if missing:
        raise ConfigError(f"no handler registered for queue(s) {', '.join(missing)}; "
                          f"known: {', '.join(registry.queues()) or 'none'}")
    return chosen


def lease_for(settings: Settings, registry: Registry, queue: str) -> float:
    """A queue's lease: its setting when there is one, else its task's `lease_seconds`, else the default."""
    task = registry.get(queue)
    if queue in settings.queue_leases or task is None or task.lease_seconds is None:
        return settings.lease_for(queue)
    return float(task.lease_seconds)


def check_schema(settings: Settings, pool: ConnectionPool, app_name: str, worker_id: str) -> None:
    """Start only on a migrated database: wait for a migration running now (a release line started
    beside this worker), then stop with the fix-it line when migrations are still missing."""
    try:
        # the direct URL, as `skiplock migrate` uses: a session lock needs a session (not PgBouncer's)
        with connect(settings.session_url, app_name, autocommit=True) as conn:
            missing = missing_after_running_migration(conn, f"worker {worker_id}")
    except Exception as exc:
        if is_connection_error(exc):
            return  # the database is not up yet; the claim loop waits for it
        raise
    if missing:
        pool.close()
        raise SchemaMissing(not_migrated_message(missing, len(shipped_versions())))


def start_flow(pool: ConnectionPool, flow: WorkerFlow) -> None:
    """Write @task-declared limits; a database still down leaves them to the next start."""
    try:
        with pool.connection() as conn:
            flow.start(conn)
    except Exception as exc:
        if not is_connection_error(exc):
            raise
