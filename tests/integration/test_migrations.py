"""Migrations you can read and trust (issue 37 part 4): numbered files for tables, applied once and
never changed; migrations/functions/ for functions and triggers, applied again when they change;
migrations/schema.sql, the whole schema in one file, kept current.
"""

from __future__ import annotations

import logging
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from skiplock.core.errors import MigrationError
from skiplock.core.plumbing.migrate import (
    ALLOW_CHANGED_ENV,
    DEFINITIONS_FOLDER,
    apply_migrations,
    discover,
    discover_definitions,
)
from skiplock.core.plumbing.resources import migrations_dir
from skiplock.tools.bench import scratch_database
from skiplock.tools.schema_cli import dump_schema, find_pg_dump, pg_dump_major, snapshot_path
from tests.integration.test_cli_and_config import run_cli
from tests.support.helpers import scalar

# Numbered files after 024 whose functions were moved to migrations/functions/ after they were applied:
# their text stays as it was (databases recorded its checksum), and the files there replace what it made.
_MOVED_LATER = {"026"}
_DEFINES = re.compile(r"CREATE\s+(?:OR\s+REPLACE\s+)?(?:FUNCTION|TRIGGER)\s+([a-z0-9_]+)", re.IGNORECASE)


@pytest.fixture
def empty_db(pg_admin_url: str) -> Iterator[str]:
    with scratch_database(pg_admin_url, prefix="skiplock_mig", migrate=False) as url:
        yield url


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A copy of the migrations folder, to change files in."""
    copy = tmp_path / "migrations"
    shutil.copytree(migrations_dir(), copy, ignore=shutil.ignore_patterns("__pycache__", "*.py"))
    return copy


def _definitions(url: str) -> dict[str, str]:
    """Every skiplock function's and trigger's definition in the database at `url`."""
    with psycopg.connect(url) as conn:
        functions = conn.execute(
            "SELECT p.proname, pg_get_functiondef(p.oid) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
            "WHERE n.nspname = 'public'").fetchall()
        triggers = conn.execute(
            "SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger WHERE NOT tgisinternal").fetchall()
    return dict(functions + triggers)


def test_a_database_migrated_before_the_functions_folder_upgrades_to_what_a_new_one_has(
        folder: Path, empty_db: str, pg_admin_url: str) -> None:
    # Before this change the migrator knew only the numbered files, which are unchanged: a database
    # it migrated is the numbered files applied. The upgrade applies every definition once, and the
    # functions and triggers are then those of a database migrated from nothing today.
    shutil.rmtree(folder / DEFINITIONS_FOLDER)
    applied = apply_migrations(empty_db, folder)
    assert applied == [m.version for m in discover()]
    upgraded = apply_migrations(empty_db)
    assert upgraded == [f"{DEFINITIONS_FOLDER}/{d.name}" for d in discover_definitions()] and upgraded
    assert apply_migrations(empty_db) == []
    with scratch_database(pg_admin_url, prefix="skiplock_mig_new") as new:
        assert _definitions(empty_db) == _definitions(new)


def test_a_changed_definition_is_applied_again_and_an_unchanged_one_is_not(folder: Path, empty_db: str) -> None:
    apply_migrations(empty_db, folder)
    hops = folder / DEFINITIONS_FOLDER / "skiplock_tenant_hops.sql"
    hops.write_text(hops.read_text().replace("    n int := 0;", "    n int := 0;  -- changed in place"))
    assert apply_migrations(empty_db, folder) == [f"{DEFINITIONS_FOLDER}/skiplock_tenant_hops"]
    with psycopg.connect(empty_db) as conn:
        assert "changed in place" in scalar(conn, "SELECT prosrc FROM pg_proc WHERE proname = 'skiplock_tenant_hops'")
    assert apply_migrations(empty_db, folder) == []


def test_an_applied_migration_whose_file_changed_is_an_error_unless_allowed(
        folder: Path, empty_db: str, caplog: pytest.LogCaptureFixture) -> None:
    apply_migrations(empty_db, folder)
    toolkit = folder / "012_toolkit.sql"
    toolkit.write_text(toolkit.read_text() + "ALTER TABLE jobs ADD COLUMN IF NOT EXISTS added_later text;\n")
    (folder / "999_next.sql").write_text("CREATE TABLE IF NOT EXISTS next_thing (id int);\n")
    with pytest.raises(MigrationError, match=r"012_toolkit\.sql.*--allow-changed.*" + ALLOW_CHANGED_ENV):
        apply_migrations(empty_db, folder, allow_changed=False)
    with psycopg.connect(empty_db) as conn:  # nothing was applied: not 999, and not the edit
        assert scalar(conn, "SELECT to_regclass('next_thing')") is None
    with caplog.at_level(logging.WARNING, logger="skiplock.migrate"):
        assert apply_migrations(empty_db, folder, allow_changed=True) == ["999"]
    assert "012_toolkit changed after it was applied" in caplog.text
    with psycopg.connect(empty_db) as conn:  # an applied migration is never re-run, even when allowed
        assert scalar(conn, "SELECT count(*) FROM information_schema.columns WHERE column_name = 'added_later'") == 0


def test_the_migrate_command_refuses_a_changed_migration_in_one_line_and_takes_the_override(
        fresh_db_url: str) -> None:
    with psycopg.connect(fresh_db_url, autocommit=True) as conn:
        conn.execute("UPDATE skiplock_migrations SET checksum = 'an older text' WHERE version = '022'")
    refused = run_cli("migrate", url=fresh_db_url)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "022_waiting_flag.sql" in refused.stderr and "--allow-changed" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert run_cli("migrate", "--allow-changed", url=fresh_db_url).returncode == 0
    assert run_cli("migrate", url=fresh_db_url, env_extra={ALLOW_CHANGED_ENV: "1"}).returncode == 0


def test_no_numbered_migration_redefines_a_function_or_trigger_of_the_functions_folder() -> None:
    """A numbered file that redefined one after its file here took it over would be undone on a new
    database, where the functions' files run after every numbered one: change migrations/functions/
    NAME.sql instead. (The numbered files up to 024, and 026 whose workflow functions moved here later,
    made the earlier versions, kept for old databases.)"""
    managed = {name.lower() for d in discover_definitions() for name in _DEFINES.findall(d.sql)}
    late = {f"{m.version}_{m.name}.sql": sorted(managed & {n.lower() for n in _DEFINES.findall(m.sql)})
            for m in discover() if int(m.version) > 24 and m.version not in _MOVED_LATER}
    assert {name: found for name, found in late.items() if found} == {}


def test_the_functions_files_are_replaceable_and_name_what_they_define() -> None:
    for definition in discover_definitions():
        created = _DEFINES.findall(definition.sql)
        assert definition.name in created, f"functions/{definition.name}.sql does not define {definition.name}"
        # re-applied whenever it changes: it must replace, never fail on an existing object
        assert not re.search(r"CREATE\s+FUNCTION", definition.sql, re.IGNORECASE), definition.name
        for trigger in re.findall(r"CREATE\s+TRIGGER\s+([a-z0-9_]+)", definition.sql, re.IGNORECASE):
            assert re.search(rf"DROP\s+TRIGGER\s+IF\s+EXISTS\s+{trigger}\b", definition.sql), trigger


def test_the_schema_snapshot_is_current(pg_admin_url: str) -> None:
    """migrations/schema.sql is what the migrations make: `skiplock schema --write` regenerates it."""
    pg_dump = find_pg_dump()
    written = snapshot_path().read_text()
    major = int(re.search(r"pg_dump major version: (\d+)", written).group(1))  # type: ignore[union-attr]
    if pg_dump_major(pg_dump) != major:
        pytest.skip(f"pg_dump {pg_dump_major(pg_dump)} lays a dump out differently from {major}'s, which wrote it")
    with scratch_database(pg_admin_url, prefix="skiplock_snapshot") as url:
        current = dump_schema(url, pg_dump)
    assert current == written, "migrations/schema.sql is stale: run `skiplock schema --write`"
