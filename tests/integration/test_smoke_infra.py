"""The test infrastructure itself: a migrated database and a worker subprocess."""

from skiplock import enqueue
from tests.support.helpers import scalar, wait_for


def test_worker_subprocess_runs_a_job(conn, spawn_worker):
    job_id = enqueue("t1", {"hello": "world"})
    worker = spawn_worker()
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM test_effects WHERE job_id = %s", (job_id,)) == 1,
             timeout=30, message="the handler's effect")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs") == 0, message="the ack (row deleted)")
    assert worker.terminate() == 0
