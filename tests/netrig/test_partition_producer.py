"""Scenario partition_producer: a producer host loses its link in the middle of a transaction of enqueues.

The application on h3 (tests/netrig/producer_host.py) enqueues 40 jobs in one transaction; the
link goes down after 20 of them, or just before COMMIT. The application must get a clear error
(an exception, within seconds, not a hang), and once the link is back and the server has noticed
the dead session, either the whole transaction is in the jobs table or none of it is.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid

import pytest

from tests.conftest import REPO, worker_env
from tests.fault.books import Books, record
from tests.support.helpers import scalar, wait_for

JOBS = 40
ERROR_BOUND = 30.0  # seconds the application may wait before it hears of the cut


@pytest.mark.slow
@pytest.mark.parametrize("pause_at", [JOBS // 2, JOBS], ids=["mid_enqueue", "before_commit"])
def test_cut_producer_gets_an_error_and_its_transaction_is_all_or_nothing(rig, rig_db, rig_conn, pause_at):
    tag = uuid.uuid4().hex[:8]
    app = subprocess.Popen(rig.argv("h3", [sys.executable, "-m", "tests.netrig.producer_host", "t2", tag, str(JOBS),
                                           str(pause_at)]),
                           cwd=REPO, env=worker_env(rig_db.remote), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    try:
        assert app.stdout is not None and app.stdin is not None
        assert app.stdout.readline().strip() == "paused"
        rig.cut("h3")
        cut_at = time.monotonic()
        app.stdin.write("go\n")
        app.stdin.flush()
        status = app.wait(timeout=ERROR_BOUND)
        heard_after = time.monotonic() - cut_at
        said = app.stdout.read().strip()
    finally:
        if app.poll() is None:
            app.kill()
            app.wait()
        rig.heal("h3")

    assert status == 1, said
    assert said.startswith("error OperationalError"), said
    # the server drops the dead session (its keepalive probe meets the producer host's RST) and
    # rolls its transaction back; only then is the jobs table's answer final
    wait_for(lambda: scalar(rig_conn, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'rig-producer'")
             == 0, timeout=60, message="the server to drop the cut producer's session")
    there = int(scalar(rig_conn, "SELECT count(*) FROM jobs WHERE payload->>'batch' = %s", (tag,)))
    record(Books(f"partition_producer[{pause_at}]", JOBS, 0, 0, 0, 0, 0, there, 0),
           error_after_s=round(heard_after, 2), in_table=there, error=said)
    assert there in (0, JOBS), f"{there} of {JOBS} jobs of one transaction are in the table"
