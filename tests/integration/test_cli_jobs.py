"""`skiplock jobs list|show|retry|purge`: the console's dead-letter filters and actions from the shell.

The dead jobs are made by a real worker running handlers that fail (tests/handlers.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import psycopg
import pytest

from skiplock import enqueue
from tests.conftest import REPO, worker_env
from tests.support.helpers import scalar, wait_for

PERMANENT = "skiplock.PermanentFailure: planned permanent failure"


def cli(db_url: str, *args: str, user: str = "ops-user") -> subprocess.CompletedProcess[str]:
    # `python -m skiplock` is the worker; the CLI is the `skiplock` console script's module
    return subprocess.run([sys.executable, "-m", "skiplock.tools.cli", "jobs", *args], cwd=REPO,
                          env={**worker_env(db_url), "USER": user}, capture_output=True, text=True, timeout=60)


@pytest.fixture
def dead_jobs(db_url: str, conn: psycopg.Connection, spawn_worker: Any) -> dict[str, list[int]]:
    """Three jobs of t1 dead by PermanentFailure, one of t2 dead by a RuntimeError on its last attempt."""
    t1 = [enqueue("t1", {"permanent": True, "n": i}) for i in range(3)]
    t2 = [enqueue("t2", {"fail_times": 5, "order": "A-17"}, max_attempts=1)]
    worker = spawn_worker(SKIPLOCK_QUEUES="t1,t2")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'dead'") == 4,
             message="the worker to kill four jobs")
    assert worker.terminate() == 0  # nothing may run the retried jobs while the test looks at them
    return {"t1": [int(i) for i in t1 if i], "t2": [int(i) for i in t2 if i]}


def statuses(conn: psycopg.Connection) -> dict[int, str]:
    return dict(conn.execute("SELECT id, status::text FROM jobs").fetchall())


def test_list_and_show_use_the_consoles_filters(db_url: str, conn: psycopg.Connection,
                                                dead_jobs: dict[str, list[int]]) -> None:
    listed = cli(db_url, "list", "--queue", "t1")
    assert listed.returncode == 0, listed.stderr
    assert "3 job(s)" in listed.stdout and all(str(i) in listed.stdout for i in dead_jobs["t1"])
    assert PERMANENT in listed.stdout

    by_error = cli(db_url, "list", "--error", PERMANENT, "--json")
    rows = [json.loads(line) for line in by_error.stdout.splitlines()]
    assert sorted(r["id"] for r in rows) == sorted(dead_jobs["t1"])
    assert {r["status"] for r in rows} == {"dead"}
    assert [json.loads(line)["id"] for line in cli(db_url, "list", "--text", "A-17", "--json").stdout.splitlines()] \
        == dead_jobs["t2"]
    assert cli(db_url, "list", "--state", "failed").stdout.strip() == "0 job(s)"
    assert cli(db_url, "list", "--older-than", "1d").stdout.strip() == "0 job(s)"
    assert "4 job(s)" in cli(db_url, "list", "--within", "1h").stdout

    shown = cli(db_url, "show", str(dead_jobs["t2"][0]))
    assert shown.returncode == 0
    assert "status:       dead" in shown.stdout and "planned failure on attempt 1" in shown.stdout
    assert '"order": "A-17"' in shown.stdout
    detail = json.loads(cli(db_url, "show", str(dead_jobs["t1"][0]), "--json").stdout)
    assert detail["status"] == "dead" and detail["queue"] == "t1" and detail["attempts"] == 1
    missing = cli(db_url, "show", "987654321")
    assert missing.returncode == 1 and "does not exist" in missing.stdout and "SKIPLOCK_HISTORY_MODE" in missing.stdout


def test_retry_matching_with_dry_run_then_for_real_is_audited(db_url: str, conn: psycopg.Connection,
                                                               dead_jobs: dict[str, list[int]]) -> None:
    dry = cli(db_url, "retry", "--queue", "t1", "--dry-run")
    assert dry.returncode == 0 and dry.stdout.strip() == "would retry 3 job(s)"
    assert set(statuses(conn).values()) == {"dead"}
    assert scalar(conn, "SELECT count(*) FROM audit_log") == 0  # a dry run changes nothing, records nothing

    done = cli(db_url, "retry", "--queue", "t1", "--error", PERMANENT, "--actor", "ops-kim")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "retried 3 job(s)"
    now = statuses(conn)
    assert [now[i] for i in dead_jobs["t1"]] == ["queued"] * 3 and now[dead_jobs["t2"][0]] == "dead"
    assert scalar(conn, "SELECT sum(attempts) FROM jobs WHERE queue = 't1'") == 0
    actor, role, action, count, detail = conn.execute(
        "SELECT actor, role, action, count, detail FROM audit_log").fetchone()  # type: ignore[misc]
    assert (actor, role, action, count) == ("ops-kim", "cli", "retry all matching", 3)
    assert detail == {"status": "dead", "queue": "t1", "error": PERMANENT}


def test_purge_by_id_is_audited_under_the_shell_user(db_url: str, conn: psycopg.Connection,
                                                     dead_jobs: dict[str, list[int]]) -> None:
    target = dead_jobs["t1"][0]
    assert cli(db_url, "purge", str(target), "--dry-run").stdout.strip() == "would purge 1 job(s)"
    done = cli(db_url, "purge", str(target), user="night-shift")
    assert done.returncode == 0 and done.stdout.strip() == "purged 1 job(s)"
    assert target not in statuses(conn) and len(statuses(conn)) == 3
    assert conn.execute("SELECT actor, action, count, detail FROM audit_log").fetchone() == \
        ("night-shift", "purge selected", 1, {"ids": [target]})
    again = cli(db_url, "purge", str(target))
    assert again.returncode == 1 and "retried" not in again.stdout and "1 were not dead or failed" in again.stdout


def test_a_bulk_action_without_a_filter_needs_all(db_url: str, conn: psycopg.Connection,
                                                  dead_jobs: dict[str, list[int]]) -> None:
    refused = cli(db_url, "purge")
    assert refused.returncode == 2 and "--all" in refused.stderr
    both = cli(db_url, "retry", str(dead_jobs["t1"][0]), "--queue", "t1")
    assert both.returncode == 2 and "not both" in both.stderr
    assert cli(db_url, "retry", "--within", "soon").returncode == 2  # argparse: a duration it cannot read
    assert set(statuses(conn).values()) == {"dead"}
    assert cli(db_url, "purge", "--all").stdout.strip() == "purged 4 job(s)"
    assert statuses(conn) == {}


def test_retry_error_takes_the_line_jobs_list_prints_or_its_group(db_url: str, conn: psycopg.Connection,
                                                                  dead_jobs: dict[str, list[int]]) -> None:
    """What `jobs list` prints (the raw error, with its attempt number) pasted into `retry --error` names
    the same jobs as the masked group the console lists; a filter that matches nothing says so, exit 1."""
    from skiplock.core.error_summary import group_key

    listed = [json.loads(line) for line in cli(db_url, "list", "--queue", "t2", "--json").stdout.splitlines()]
    raw = listed[0]["error"]
    group = group_key(raw)
    assert raw != group and "<n>" in group  # the case that failed: the two forms differ
    for given in (raw, group):
        dry = cli(db_url, "retry", "--error", given, "--dry-run")
        assert (dry.returncode, dry.stdout.strip()) == (0, "would retry 1 job(s)"), (given, dry.stdout, dry.stderr)
    typo = cli(db_url, "retry", "--error", raw + " typo")
    assert typo.returncode == 1, typo.stdout
    assert typo.stdout.startswith("retried 0 job(s): no dead job matches error=") and "jobs list" in typo.stdout
    dry_typo = cli(db_url, "purge", "--error", "NoSuchError: x", "--dry-run")
    assert dry_typo.returncode == 1 and "no dead job matches" in dry_typo.stdout
    assert set(statuses(conn).values()) == {"dead"}


@pytest.mark.slow
def test_jobs_list_into_a_pipe_that_closes_early_ends_quietly(db_url: str, conn: psycopg.Connection,
                                                               spawn_worker: Any) -> None:
    """`skiplock jobs list --json | head -1`: no BrokenPipeError traceback when head stops reading (the
    listing is larger than a pipe's buffer, so the writer is still writing when head exits)."""
    from skiplock import enqueue_many

    enqueue_many([("t1", {"permanent": True, "n": i}) for i in range(3000)], conn=conn)
    worker = spawn_worker(SKIPLOCK_QUEUES="t1")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'dead'") == 3000, timeout=120,
             message="the worker to kill 3000 jobs")
    assert worker.terminate() == 0
    env = worker_env(db_url)
    command = f"{sys.executable} -m skiplock.tools.cli jobs list --json --limit 3000 | head -1"
    out = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=120)
    assert json.loads(out.stdout)["status"] == "dead"
    assert "Traceback" not in out.stderr and "BrokenPipe" not in out.stderr, out.stderr
