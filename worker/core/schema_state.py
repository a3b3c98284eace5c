"""Is this database migrated? What a worker and the console ask before they use the schema.

A process started beside `skiplock migrate` (a Procfile's release line, a Kubernetes init job) must not
read a half-made schema: while the migrations' advisory lock is held it waits for the migration to end,
then compares the versions applied with the migrations this package ships.
"""

from __future__ import annotations

import logging
from functools import cache
from typing import Any

from skiplock.core.plumbing.migrate import MIGRATION_LOCK_KEY, discover
from skiplock.core.sql import queries

log = logging.getLogger("skiplock.schema")
Q = queries("schema_state")


@cache
def shipped_versions() -> tuple[str, ...]:
    """The versions of the migrations this package ships (read from its files once per process:
    /healthz asks on every probe)."""
    return tuple(m.version for m in discover())


def missing_migrations(conn: Any) -> list[str]:
    """The versions of this package's migrations not applied to the database of `conn` (all of them on
    a database never migrated); read without waiting."""
    shipped = shipped_versions()
    if not conn.execute(Q.migration_record_exists).fetchone()[0]:
        return list(shipped)
    applied = {row[0] for row in conn.execute(Q.applied_versions)}
    return [version for version in shipped if version not in applied]


def missing_after_running_migration(conn: Any, who: str) -> list[str]:
    """As missing_migrations, after waiting for a migration that runs now (its advisory lock) to end.

    `conn` must be autocommit: the session lock is taken and released at once."""
    if not conn.execute(Q.try_migration_lock, {"key": MIGRATION_LOCK_KEY}).fetchone()[0]:
        log.warning("%s: the database is being migrated by another process; waiting for it to finish", who)
        conn.execute(Q.wait_migration_lock, {"key": MIGRATION_LOCK_KEY})
    conn.execute(Q.release_migration_lock, {"key": MIGRATION_LOCK_KEY})
    return missing_migrations(conn)


def not_migrated_message(missing: list[str], total: int) -> str:
    """The one line a process prints on a database that lacks migrations."""
    if len(missing) == total:
        return "the database is not migrated (no skiplock schema): run `skiplock migrate` first"
    return (f"the database is not migrated ({len(missing)} of {total} migrations missing, from "
            f"{missing[0]}): run `skiplock migrate` first")
