"""Bad configuration: `python -m skiplock` exits non-zero with ONE clear line on stderr, no traceback.

Each case starts a real worker process with a broken environment. The in-process tests below
check every numeric setting against the values float()/int() would wrongly accept.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from skiplock.core.errors import ConfigError
from skiplock.core.plumbing.config import _PARSERS, load_settings
from skiplock.tools.cli import main as cli_main
from tests.conftest import REPO, worker_env

# A value each setting must reject: a word where a number is expected, a bad choice, a bad list.
NOT_NAMES = {"SKIPLOCK_TASKS", "SKIPLOCK_QUEUES"}  # any text is a valid list of names
BAD_VALUE = {"SKIPLOCK_KEEP_HISTORY": "maybe", "SKIPLOCK_LOG_FORMAT": "xml", "SKIPLOCK_LOG_LEVEL": "loud",
             "SKIPLOCK_QUEUE_LEASES": "emails:60", "SKIPLOCK_DIRECT_URL": "host=a b",
             "SKIPLOCK_PREPARED_STATEMENTS": "maybe", "SKIPLOCK_JOB_LOGS": "maybe"}
NUMERIC = [n for n in _PARSERS if n not in NOT_NAMES and n not in BAD_VALUE]


def run_worker(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """Run `python -m skiplock`; a worker that starts anyway is killed and fails the test."""
    try:
        return subprocess.run([sys.executable, "-m", "skiplock", *args], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("the worker started instead of refusing its configuration")


def assert_one_clear_line(proc: subprocess.CompletedProcess[str], *expected: str) -> str:
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("skiplock: error: ")
    for text in expected:
        assert text in lines[0]
    return lines[0]


def test_missing_database_url(db_url):
    env = worker_env(db_url)
    del env["DATABASE_URL"]
    assert_one_clear_line(run_worker(env), "DATABASE_URL is not set")


@pytest.mark.parametrize("url", [
    "garbage",
    "postgresql://[::1",
    "host=127.0.0.1 port=notaport",
    "postgresql://postgres@127.0.0.1:5432/postgres?sslmode=bogus",
    "postgresql://postgres@127.0.0.1:5432/skiplock_no_such_database",
])
def test_garbled_or_unusable_database_url(url, db_url):
    line = assert_one_clear_line(run_worker(worker_env(db_url, DATABASE_URL=url)), "DATABASE_URL")
    assert "password" not in line.lower() or "password=" not in url


def test_database_without_schema(pg_admin_url, db_url):
    # the admin database answers but was never migrated
    assert_one_clear_line(run_worker(worker_env(db_url, DATABASE_URL=pg_admin_url)), "skiplock migrate")


def test_missing_task_module(db_url):
    assert_one_clear_line(run_worker(worker_env(db_url, SKIPLOCK_TASKS="no_such_module_xyz")),
                          "no_such_module_xyz", "ModuleNotFoundError")


@pytest.mark.parametrize("source,error", [
    ("raise RuntimeError('boom at import')\n", "RuntimeError: boom at import"),
    ("def broken(:\n", "SyntaxError"),
    ("from worker import task\n@task('')\ndef h(p): pass\n", "non-empty queue name"),
])
def test_task_module_that_fails_to_import(source, error, db_url, tmp_path: Path):
    (tmp_path / "bad_tasks.py").write_text(source)
    env = worker_env(db_url, SKIPLOCK_TASKS="bad_tasks")
    env["PYTHONPATH"] = f"{tmp_path}:{env['PYTHONPATH']}"
    assert_one_clear_line(run_worker(env), "bad_tasks", error)


def test_no_task_modules(db_url):
    env = worker_env(db_url)
    del env["SKIPLOCK_TASKS"]
    assert_one_clear_line(run_worker(env), "SKIPLOCK_TASKS")


def test_misspelt_setting_gets_a_suggestion(db_url):
    assert_one_clear_line(run_worker(worker_env(db_url, SKIPLOCK_CONCURENCY="4")),
                          "SKIPLOCK_CONCURENCY", "did you mean SKIPLOCK_CONCURRENCY")


# A process per setting would cost a minute of interpreter start-ups; three go through a real
# process, and every setting goes through the same CLI entry point in-process below.
@pytest.mark.parametrize("name", ["SKIPLOCK_CONCURRENCY", "SKIPLOCK_LOG_LEVEL", "SKIPLOCK_RECONNECT_TIMEOUT"])
def test_bad_setting_value_in_a_worker_process(name, db_url):
    value = BAD_VALUE.get(name, "ten")
    assert_one_clear_line(run_worker(worker_env(db_url, **{name: value})), name)


@pytest.mark.parametrize("name", [*NUMERIC, *BAD_VALUE])
def test_bad_setting_value_through_the_cli(name, monkeypatch, capsys):
    for key in [k for k in os.environ if k.startswith("SKIPLOCK_")]:
        monkeypatch.delenv(key)
    # parses, but nothing listens there: the run must stop at the setting, before connecting
    monkeypatch.setenv("DATABASE_URL", "postgresql://postgres@127.0.0.1:1/unused")
    monkeypatch.setenv("SKIPLOCK_TASKS", "tests.support.handlers")
    monkeypatch.setenv(name, BAD_VALUE.get(name, "ten"))
    assert cli_main(["worker"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("skiplock: error: ") and name in err


@pytest.mark.parametrize("name", NUMERIC)
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e999", "-1", "", "1,5", "0x10"])
def test_every_numeric_setting_rejects_non_numbers(name, value):
    with pytest.raises(ConfigError, match=name):
        load_settings({name: value})


def test_port_and_heartbeat_bounds():
    with pytest.raises(ConfigError, match="SKIPLOCK_HEALTH_PORT"):
        load_settings({"SKIPLOCK_HEALTH_PORT": "70000"})
    with pytest.raises(ConfigError, match="shorter than the shortest lease"):
        load_settings({"SKIPLOCK_LEASE_SECONDS": "10", "SKIPLOCK_HEARTBEAT_INTERVAL": "10"})
    assert load_settings({"SKIPLOCK_HEARTBEAT_INTERVAL": "0"}).effective_heartbeat == 0


def test_bad_cli_number_is_one_line(db_url):
    assert_one_clear_line(run_worker(worker_env(db_url), "--concurrency", "0"), "--concurrency")
