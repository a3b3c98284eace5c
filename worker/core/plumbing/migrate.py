"""Apply migrations/NNN_*.sql in order, once each, then migrations/functions/*.sql, under an advisory lock.

Two kinds of files (migrations/README.md):
- numbered migrations (`NNN_name.sql`) change tables. Each runs once, in its own transaction with
  the row that records it and its checksum. An applied file must never change: a checksum that
  differs from the recorded one is an error (the database ran another text than the file says),
  unless overridden with `skiplock migrate --allow-changed` or SKIPLOCK_MIGRATE_ALLOW_CHANGED=1.
- definitions (`functions/name.sql`): functions and triggers, `CREATE OR REPLACE`. After the
  numbered migrations, each file whose content hash differs from the one recorded for its name
  (or that was never applied) runs again, so the current definition lives in one file that is
  edited in place (Flyway's "repeatable migrations"). An unchanged file is not re-run: re-creating
  a trigger locks the jobs table.

Web and worker processes may start together; the session-level advisory lock makes the second
one wait and then find nothing left to do.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

import psycopg

from skiplock.core.errors import MigrationError
from skiplock.core.plumbing.db import connect
from skiplock.core.plumbing.resources import migrations_dir

log = logging.getLogger("skiplock.migrate")

# Any fixed number works; this one spells "skiplock" closely enough to be recognised in pg_locks.
MIGRATION_LOCK_KEY = 0x5C1B_10C0
_FILENAME = re.compile(r"^(\d{3,})_([a-z0-9_]+)\.sql$")
_DEFINITION = re.compile(r"^([a-z0-9_]+)\.sql$")
DEFINITIONS_FOLDER = "functions"
# Not a migration: the whole schema as a migrated database has it (`skiplock schema --write`).
SNAPSHOT = "schema.sql"
ALLOW_CHANGED_ENV = "SKIPLOCK_MIGRATE_ALLOW_CHANGED"


@dataclass(frozen=True)
class Migration:
    version: str
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


@dataclass(frozen=True)
class Definition:
    """One file of migrations/functions/: functions and triggers, applied again whenever it changes."""

    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def discover(directory: Path | None = None) -> list[Migration]:
    """The numbered migration files in version order; a badly named .sql file is an error, not skipped."""
    directory = directory or migrations_dir()
    if not directory.is_dir():
        raise MigrationError(f"migrations folder not found: {directory}")
    found = []
    for path in sorted(directory.glob("*.sql")):
        if path.name == SNAPSHOT:
            continue
        match = _FILENAME.match(path.name)
        if not match:
            raise MigrationError(f"migration file {path.name} must be named NNN_lower_snake.sql")
        found.append(Migration(match.group(1), match.group(2), path.read_text()))
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise MigrationError(f"two migration files share a version number: {versions}")
    return found


def discover_definitions(directory: Path | None = None) -> list[Definition]:
    """The files of migrations/functions/ by name (none when the folder is absent)."""
    folder = (directory or migrations_dir()) / DEFINITIONS_FOLDER
    found = []
    for path in sorted(folder.glob("*.sql")):
        match = _DEFINITION.match(path.name)
        if not match:
            raise MigrationError(f"definition file functions/{path.name} must be named lower_snake.sql")
        found.append(Definition(match.group(1), path.read_text()))
    return found


def allow_changed_from_env() -> bool:
    """SKIPLOCK_MIGRATE_ALLOW_CHANGED=1 (or true/yes/on): accept applied migrations whose file changed."""
    return os.environ.get(ALLOW_CHANGED_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def changed_message(changed: list[Migration]) -> str:
    """The error for applied migrations whose file is no longer the text the database ran."""
    names = ", ".join(f"{m.version}_{m.name}.sql" for m in changed)
    return (f"applied migration(s) changed since this database ran them: {names}. The database may lack "
            f"what was added to the file afterwards, and skiplock never re-runs an applied migration. "
            f"Compare the file with its history, make the database match it by hand if it needs to, then "
            f"run `skiplock migrate --allow-changed` (or set {ALLOW_CHANGED_ENV}=1) to go on.")


def apply_migrations(url: str, directory: Path | None = None, *, allow_changed: bool | None = None) -> list[str]:
    """Apply pending migrations and changed definitions to `url`; return what was applied now
    (versions, and `functions/NAME` for definitions; empty if the database was up to date)."""
    migrations = discover(directory)
    definitions = discover_definitions(directory)
    if allow_changed is None:
        allow_changed = allow_changed_from_env()
    try:
        with connect(url, "skiplock-migrate", autocommit=True) as conn:
            conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_KEY,))
            try:
                applied_now = _apply_numbered(conn, migrations, allow_changed)
                applied_now += _apply_definitions(conn, definitions)
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_KEY,))
    except psycopg.OperationalError:
        raise  # unreachable server: the CLI reports it as such
    except psycopg.Error as exc:
        raise MigrationError(f"migration failed: {str(exc).strip().splitlines()[0]}") from exc
    return applied_now


def _apply_numbered(conn: psycopg.Connection, migrations: list[Migration], allow_changed: bool) -> list[str]:
    conn.execute(
        """CREATE TABLE IF NOT EXISTS skiplock_migrations (
               version    text PRIMARY KEY,
               name       text NOT NULL,
               checksum   text NOT NULL,
               applied_at timestamptz NOT NULL DEFAULT now())"""
    )
    done = {row[0]: row[1] for row in conn.execute("SELECT version, checksum FROM skiplock_migrations")}
    changed = [m for m in migrations if m.version in done and done[m.version] != m.checksum]
    if changed and not allow_changed:
        raise MigrationError(changed_message(changed))  # before anything is applied
    for migration in changed:
        log.warning("migration %s_%s changed after it was applied; not re-run (allowed by --allow-changed / %s)",
                    migration.version, migration.name, ALLOW_CHANGED_ENV)
    applied_now = []
    for migration in migrations:
        if migration.version in done:
            continue
        with conn.transaction():
            conn.execute(migration.sql)
            conn.execute(
                "INSERT INTO skiplock_migrations (version, name, checksum) VALUES (%s, %s, %s)",
                (migration.version, migration.name, migration.checksum),
            )
        log.info("applied migration %s_%s", migration.version, migration.name)
        applied_now.append(migration.version)
    return applied_now


def _apply_definitions(conn: psycopg.Connection, definitions: list[Definition]) -> list[str]:
    conn.execute(
        """CREATE TABLE IF NOT EXISTS skiplock_definitions (
               name       text PRIMARY KEY,
               checksum   text NOT NULL,
               applied_at timestamptz NOT NULL DEFAULT now())"""
    )
    done = {row[0]: row[1] for row in conn.execute("SELECT name, checksum FROM skiplock_definitions")}
    applied_now = []
    for definition in definitions:
        if done.get(definition.name) == definition.checksum:
            continue
        with conn.transaction():
            conn.execute(definition.sql)
            conn.execute(
                "INSERT INTO skiplock_definitions (name, checksum) VALUES (%s, %s) "
                "ON CONFLICT (name) DO UPDATE SET checksum = excluded.checksum, applied_at = now()",
                (definition.name, definition.checksum),
            )
        log.info("applied definitions functions/%s.sql", definition.name)
        applied_now.append(f"{DEFINITIONS_FOLDER}/{definition.name}")
    return applied_now
