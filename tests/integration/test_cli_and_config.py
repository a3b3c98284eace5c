"""CLI and configuration: clear one-line errors, exit codes, migrations under concurrency."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from skiplock.core.errors import ConfigError
from skiplock.core.plumbing.config import load_settings
from skiplock.core.plumbing.migrate import apply_migrations
from tests.conftest import REPO
from tests.support.helpers import scalar


def run_cli(*args: str, env_extra: dict[str, str] | None = None, url: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKIPLOCK_") and k != "DATABASE_URL"}
    env["PYTHONPATH"] = str(REPO)
    if url:
        env["DATABASE_URL"] = url
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "skiplock.tools.cli", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=60)


def assert_one_line_error(result: subprocess.CompletedProcess, fragment: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("skiplock: error:") and fragment in lines[0]
    assert "Traceback" not in result.stderr


def test_cli_enqueue_then_bad_enqueues_write_nothing(db_url, conn):
    ok = run_cli("enqueue", "emails", '{"to": "a"}', "--priority", "3", "--unique-key", "k", url=db_url)
    assert ok.returncode == 0 and ok.stdout.strip().isdigit()
    again = run_cli("enqueue", "emails", "{}", "--unique-key", "k", url=db_url)
    assert again.returncode == 0 and "already queued or running" in again.stdout
    assert_one_line_error(run_cli("enqueue", "emails", "{not json", url=db_url), "not valid JSON")
    assert_one_line_error(run_cli("enqueue", "", "{}", url=db_url), "queue name")
    assert_one_line_error(run_cli("enqueue", "emails", "{}", "--delay", "-5", url=db_url), "negative")
    assert scalar(conn, "SELECT count(*) FROM jobs") == 1
    assert conn.execute("SELECT queue, priority, unique_key FROM jobs").fetchone() == ("emails", 3, "k")


@pytest.mark.parametrize(("env", "fragment"), [
    ({}, "DATABASE_URL is not set"),
    ({"DATABASE_URL": "postgresql://%%%bad url"}, "DATABASE_URL"),
    ({"DATABASE_URL": "not a url = = ="}, "not a valid PostgreSQL connection string"),
    ({"SKIPLOCK_CONCURRENCY": "lots"}, "SKIPLOCK_CONCURRENCY must be a whole number"),
    ({"SKIPLOCK_CONCURRENCY": "0"}, "SKIPLOCK_CONCURRENCY"),
    ({"SKIPLOCK_POLL_INTERVAL": "-1"}, "SKIPLOCK_POLL_INTERVAL"),
    ({"SKIPLOCK_LEASE_SECONDS": "abc"}, "SKIPLOCK_LEASE_SECONDS"),
    ({"SKIPLOCK_QUEUE_LEASES": "emails"}, "SKIPLOCK_QUEUE_LEASES"),
    ({"SKIPLOCK_KEEP_HISTORY": "maybe"}, "true or false"),
    ({"SKIPLOCK_LOG_FORMAT": "xml"}, "text, json"),
    ({"SKIPLOCK_CONCURENCY": "4"}, "did you mean SKIPLOCK_CONCURRENCY"),
    ({"SKIPLOCK_TASKS": "no_such_module_xyz"}, "cannot import task module 'no_such_module_xyz'"),
    ({"SKIPLOCK_TASKS": "tests.support.handlers", "SKIPLOCK_QUEUES": "nohandler"}, "no handler registered"),
])
def test_worker_config_errors_are_one_line(db_url, env, fragment):
    env = dict(env)
    url = None if "DATABASE_URL" in env or env == {} else db_url
    if env and "SKIPLOCK_TASKS" not in env:
        env["SKIPLOCK_TASKS"] = "tests.support.handlers"
    assert_one_line_error(run_cli("worker", env_extra=env, url=url), fragment)


def test_unreachable_database_is_one_line(pg_admin_url):
    result = run_cli("migrate", url="postgresql://postgres@127.0.0.1:1/postgres")
    assert_one_line_error(result, "cannot reach the database")


def test_settings_parse_and_defaults():
    s = load_settings({"DATABASE_URL": "postgresql://u@h/db", "SKIPLOCK_QUEUE_LEASES": "a=5, b=60",
                       "SKIPLOCK_ACK_INTERVAL_MS": "2"})
    assert s.lease_for("a") == 5 and s.lease_for("zzz") == 30 and s.ack_interval == 0.002
    assert s.effective_heartbeat == pytest.approx(5 / 3)
    with pytest.raises(ConfigError, match="SKIPLOCK_BACKOFF_CAP"):
        load_settings({"SKIPLOCK_BACKOFF_BASE": "10", "SKIPLOCK_BACKOFF_CAP": "1"})


@pytest.mark.slow  # 8-25 s each (fuzzing, a second cluster, a subprocess suite): the full run, not the edit-test loop
def test_migrations_are_recorded_idempotent_and_safe_to_race(fresh_db_url):
    errors: list[BaseException] = []

    def migrate() -> None:
        try:
            apply_migrations(fresh_db_url)
        except BaseException as exc:  # collect, then assert in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=migrate) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert apply_migrations(fresh_db_url) == []
    import psycopg

    with psycopg.connect(fresh_db_url) as c:
        versions = [r[0] for r in c.execute("SELECT version FROM skiplock_migrations ORDER BY version")]
        assert versions == sorted(set(versions)) and "001" in versions
        # re-running every file's SQL directly is harmless too (idempotent migrations)
        from skiplock.core.plumbing.migrate import discover

        for migration in discover():
            c.execute(migration.sql)
        c.commit()


def test_migrate_command(fresh_db_url):
    result = run_cli("migrate", url=fresh_db_url)
    assert result.returncode == 0 and "up to date" in result.stdout


def test_worker_on_an_unmigrated_database_says_to_migrate(pg_admin_url):
    import psycopg

    from tests.support.pgcluster import with_database

    name = f"skiplock_empty_{os.getpid()}"
    with psycopg.connect(pg_admin_url, autocommit=True) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{name}"')
        c.execute(f'CREATE DATABASE "{name}"')
    try:
        result = run_cli("worker", env_extra={"SKIPLOCK_TASKS": "tests.support.handlers"},
                         url=with_database(pg_admin_url, name))
        assert_one_line_error(result, "skiplock migrate")
    finally:
        with psycopg.connect(pg_admin_url, autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
