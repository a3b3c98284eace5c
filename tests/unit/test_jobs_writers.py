"""Who writes `jobs`: every statement that does is a named statement of worker/core/sql/*.sql or one of the
listed PL/pgSQL functions of migrations/functions/, and only state_changes (and the producers' inserts)
execute them. So `grep -- '-- name:' worker/core/sql/*.sql` plus FUNCTIONS_THAT_WRITE_JOBS find them all."""

from __future__ import annotations

import re
from pathlib import Path

from skiplock.core.sql import all_files, queries

ROOT = Path(__file__).resolve().parents[2]
FUNCTIONS = ROOT / "migrations" / "functions"
_WRITES_JOBS = re.compile(r"\b(INSERT\s+INTO|UPDATE|DELETE\s+FROM|COPY)\s+jobs\b", re.I)
_HEADER = re.compile(r"^-- writes jobs: (yes, (because|through) .+|no)$", re.M)

# The PL/pgSQL functions that write jobs, directly or through another one; each file's header says why
# on its "-- writes jobs:" line.
FUNCTIONS_THAT_WRITE_JOBS = {
    "skiplock_batch_call_back", "skiplock_check_edge", "skiplock_count_batch_members", "skiplock_enqueue_after",
    "skiplock_delete_schedule", "skiplock_notify_jobs", "skiplock_park", "skiplock_rearm", "skiplock_reopen",
    "skiplock_settle", "skiplock_signal",
    # schedules changed from SQL: a backfill enqueues its slots' jobs; a change or a pause withdraws the
    # pending job (skiplock_withdraw_schedule_slots), like the delete
    "skiplock_backfill_schedule", "skiplock_withdraw_schedule_slots", "skiplock_update_schedule",
    "skiplock_pause_schedule",
}

# The Python modules that execute a statement that writes jobs. state_changes: every transition of a job
# that exists. The producers: their INSERTs (and a batch's seal, which may insert its callbacks) run in the
# caller's own transaction through whichever driver it holds (core/plumbing/adapters.py), sync or async.
# The benchmark's stand-in for a producer that knows only SQL (its documented INSERT). Durable jobs
# (core/durable/, statements in core/sql/durable.sql): a handler parks its own run (run.py, skiplock_park),
# a signal joins its caller's transaction like an enqueue (signals.py, skiplock_signal), and the service's
# wakes (parked -> queued: the timer's pass, an operator's wake, the sweeper's repair) are each one guarded
# statement.
PYTHON_THAT_WRITES_JOBS = {
    "worker/core/state_changes.py",
    "worker/core/producer.py", "worker/core/producer_async.py", "worker/core/linked_insert.py",
    "worker/core/unique_for.py",  # enqueue(unique_for=)'s INSERT, which takes the key in the same statement
    "worker/core/workflows/batches.py",
    # a worker writing its @task options into the jobs enqueued before any worker had recorded them
    "worker/core/task_options.py",
    "worker/tools/bench.py",
    "worker/core/durable/run.py", "worker/core/durable/signals.py", "worker/core/durable/service.py",
}


def _code(sql: str) -> str:
    return re.sub(r"--[^\n]*", "", sql)


def _functions_writing_jobs() -> set[str]:
    bodies = {path.stem: _code(path.read_text()) for path in FUNCTIONS.glob("*.sql")}
    calls = {name: {other for other in bodies if other != name and re.search(rf"\b{other}\s*\(", body)}
             for name, body in bodies.items()}
    writers = {name for name, body in bodies.items() if _WRITES_JOBS.search(body)}
    while more := {name for name, called in calls.items() if called & writers} - writers:
        writers |= more
    return writers


def _statements_writing_jobs() -> set[tuple[str, str]]:
    calls = re.compile(r"\b(" + "|".join(sorted(FUNCTIONS_THAT_WRITE_JOBS)) + r")\s*\(")
    found = set()
    for file in all_files():
        loaded = queries(file)
        for name in loaded.names:
            text = getattr(loaded, name)
            if _WRITES_JOBS.search(text) or calls.search(text):
                found.add((file, name))
    return found


def test_the_functions_that_write_jobs_are_listed_and_each_says_why() -> None:
    assert _functions_writing_jobs() == FUNCTIONS_THAT_WRITE_JOBS
    for path in sorted(FUNCTIONS.glob("*.sql")):
        header = path.read_text().split("CREATE", 1)[0]
        line = _HEADER.search(header)
        assert line, f"{path.name}: its header has no '-- writes jobs: yes, because ...' or '-- writes jobs: no' line"
        assert line.group(1).startswith("yes") == (path.stem in FUNCTIONS_THAT_WRITE_JOBS), (path.name, line.group(0))


def test_the_statements_that_write_jobs_are_named_in_the_core_sql_files() -> None:
    writing = _statements_writing_jobs()
    # the transitions, each one statement: a failure of this line names one that went missing
    for expected in [("jobs_claim", "claim"), ("jobs_ack", "ack_batch"), ("jobs_running", "give_back"),
                     ("jobs_operator", "lease_lost"), ("jobs_operator", "retry_finished"),
                     ("jobs_enqueue", "enqueue_plain"), ("workflow_repair", "settle")]:
        assert expected in writing, expected
    grep = {line.split("-- name: ")[1].strip() for path in (ROOT / "worker" / "core" / "sql").glob("*.sql")
            for line in path.read_text().splitlines() if line.startswith("-- name: ")}
    assert {name for _, name in writing} <= grep


def test_only_state_changes_and_the_producers_execute_statements_that_write_jobs() -> None:
    writing = _statements_writing_jobs()
    executing = set()
    for folder in ("worker", "webapp"):
        for path in (ROOT / folder).rglob("*.py"):
            text = path.read_text()
            aliases = dict(re.findall(r'^\s*(\w+)\s*=\s*queries\("(\w+)"\)', text, re.M))
            used = {(aliases[alias], name) for alias, name in re.findall(r"\b(\w+)\.(\w+)\b", text) if alias in aliases}
            used |= set(re.findall(r'queries\("(\w+)"\)\.(\w+)', text))
            if used & writing:
                executing.add(str(path.relative_to(ROOT)))
    assert executing == PYTHON_THAT_WRITES_JOBS, executing
