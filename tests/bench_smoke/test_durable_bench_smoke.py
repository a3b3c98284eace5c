"""`python -m tests.benchmarks.durable` end to end at toy sizes, so that the benchmark cannot rot: every
part runs, DBOS's included, and the results hold what the database counted (every step stored once, every
signalled job woken, the same workflows on both sides, no completed step run again after a SIGKILL, wake
plans that do not scan jobs). Its speed is not asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO


@pytest.mark.slow
def test_durable_benchmark_runs_every_part(pg_admin_url: str, tmp_path: Path) -> None:
    pytest.importorskip("dbos")
    env = {"PATH": "/usr/bin:/bin", "DATABASE_URL": pg_admin_url, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "tests.benchmarks.durable", "--jobs", "20", "--steps", "3",
                           "--signals", "10", "--signal-rate", "50", "--parked", "300", "--kill-leases", "2",
                           "--out", str(tmp_path)], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads((tmp_path / "durable.json").read_text())
    for run in result["steps"]["runs"]:
        assert run["stepped"]["steps_stored"] == 60 and run["plain"]["steps_stored"] == 0
    dbos = result["dbos"]
    assert dbos["dbos"]["steps"] == 200 and dbos["skiplock"]["steps"] == 200  # 20 workflows of 10 steps each
    assert dbos["dbos_kill"]["completed_steps_run_again"] == [] and dbos["dbos_kill"]["resumed_step"] >= 5
    (kill,) = dbos["skiplock_kill"]
    assert kill["completed_steps_run_again"] == [] and kill["resumed_step"] >= 5
    assert result["signals"]["woke"] == 10
    plans = result["parked"]["plans"]
    assert plans["parked"] == 300 and plans["woken_by_signal"] == 1
    assert "jobs_parked_idx" in plans["wake_pass"] and "Seq Scan on jobs" not in plans["wake_pass"]
    assert not any("Seq Scan on jobs" in p for p in plans["signal"])
    assert "DBOS side by side" in (tmp_path / "durable.md").read_text()
