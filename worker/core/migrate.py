"""Apply migrations/*.sql in order, once each, under an advisory lock.

Web and worker processes may start together; the session-level advisory lock makes the second
one wait and then find nothing left to do. Each file runs in its own transaction together with
the row that records it, so a failed migration leaves no half-applied trace.
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass
from pathlib import Path

import psycopg

from skiplock.core.db import connect
from skiplock.core.errors import MigrationError
from skiplock.core.resources import migrations_dir

log = logging.getLogger("skiplock.migrate")

# Any fixed number works; this one spells "skiplock" closely enough to be recognised in pg_locks.
MIGRATION_LOCK_KEY = 0x5C1B_10C0
_FILENAME = re.compile(r"^(\d{3,})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    version: str
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def discover(directory: Path | None = None) -> list[Migration]:
    """The migration files in version order; a badly named .sql file is an error, not skipped."""
    directory = directory or migrations_dir()
    if not directory.is_dir():
        raise MigrationError(f"migrations folder not found: {directory}")
    found = []
    for path in sorted(directory.glob("*.sql")):
        match = _FILENAME.match(path.name)
        if not match:
            raise MigrationError(f"migration file {path.name} must be named NNN_lower_snake.sql")
        found.append(Migration(match.group(1), match.group(2), path.read_text()))
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise MigrationError(f"two migration files share a version number: {versions}")
    return found


def apply_migrations(url: str, directory: Path | None = None) -> list[str]:
    """Apply pending migrations to `url`; return the versions applied now (empty if none)."""
    migrations = discover(directory)
    applied_now: list[str] = []
    try:
        with connect(url, "skiplock-migrate", autocommit=True) as conn:
            conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_KEY,))
            try:
                conn.execute(
                    """CREATE TABLE IF NOT EXISTS skiplock_migrations (
                           version    text PRIMARY KEY,
                           name       text NOT NULL,
                           checksum   text NOT NULL,
                           applied_at timestamptz NOT NULL DEFAULT now())"""
                )
                done = {
                    row[0]: row[1]
                    for row in conn.execute("SELECT version, checksum FROM skiplock_migrations")
                }
                for migration in migrations:
                    if migration.version in done:
                        if done[migration.version] != migration.checksum:
                            log.warning("migration %s_%s changed after it was applied; not re-run",
                                        migration.version, migration.name)
                        continue
                    with conn.transaction():
                        conn.execute(migration.sql)
                        conn.execute(
                            "INSERT INTO skiplock_migrations (version, name, checksum) VALUES (%s, %s, %s)",
                            (migration.version, migration.name, migration.checksum),
                        )
                    log.info("applied migration %s_%s", migration.version, migration.name)
                    applied_now.append(migration.version)
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_KEY,))
    except psycopg.OperationalError:
        raise  # unreachable server: the CLI reports it as such
    except psycopg.Error as exc:
        raise MigrationError(f"migration failed: {str(exc).strip().splitlines()[0]}") from exc
    return applied_now
