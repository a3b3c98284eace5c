"""A handler the worker cannot call is found when it is registered, not when its jobs run (issue 35, defect 4).

The worker calls `handler(payload)`, or `handler(payload, job=context)` when it declares `job`. A
`def h(payload, ctx)` used to register without complaint; then every run raised TypeError and was
retried 20 times. Now @task refuses it, a worker importing it does not start, and a job whose handler
still cannot be called with it (a callable whose signature could not show it) is dead at once.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from skiplock import ConfigError, enqueue, task
from tests.conftest import REPO, worker_env
from tests.support.helpers import scalar, wait_for


def test_a_second_parameter_not_named_job_is_refused_at_registration() -> None:
    with pytest.raises(ConfigError) as refused:
        @task("signature_ctx")
        def handle(payload, ctx):
            return None
    message = str(refused.value)
    assert "handle(payload, ctx)" in message and "ctx" in message and "job" in message


def test_handlers_the_worker_can_call_still_register() -> None:
    @task("signature_ok_job")
    def with_job(payload, job):
        return None

    @task("signature_ok_default")
    def with_default(payload, retries=3, *, job=None):
        return None

    @task("signature_ok_varargs")
    def with_varargs(*args, **kwargs):
        return None


def test_a_worker_whose_task_module_has_such_a_handler_does_not_start(db_url: str, tmp_path: Path) -> None:
    (tmp_path / "ctx_tasks.py").write_text(textwrap.dedent("""
        from skiplock import task

        @task("reports")
        def build_report(payload, ctx):
            pass
    """))
    env = worker_env(db_url, SKIPLOCK_TASKS="ctx_tasks", PYTHONPATH=f"{REPO}:{tmp_path}")
    done = subprocess.run([sys.executable, "-m", "skiplock"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "build_report(payload, ctx)" in done.stderr and "`job`" in done.stderr


def test_a_job_whose_handler_cannot_be_called_with_it_is_dead_at_once(conn, spawn_worker, tmp_path: Path) -> None:
    # a callable object whose signature says one thing and whose call wants another: nothing at
    # registration can see it, so the worker must
    (tmp_path / "misreported_tasks.py").write_text(textwrap.dedent("""
        import inspect

        from skiplock import task


        class Report:
            __signature__ = inspect.Signature([inspect.Parameter("payload", inspect.Parameter.POSITIONAL_ONLY)])

            def __call__(self, payload, ctx):
                pass


        build_report = task("reports")(Report())
    """))
    worker = spawn_worker(SKIPLOCK_TASKS="misreported_tasks", PYTHONPATH=f"{REPO}:{tmp_path}")
    job_id = enqueue("reports", {"month": "2026-10"})
    wait_for(lambda: scalar(conn, "SELECT status FROM jobs WHERE id = %s", (job_id,)) == "dead", timeout=60,
             message="the job dead")
    attempts, error = conn.execute("SELECT attempts, last_error FROM jobs WHERE id = %s", (job_id,)).fetchone()
    assert attempts == 1
    assert "cannot be called with this job" in error and "ctx" in error
    assert worker.terminate() == 0
