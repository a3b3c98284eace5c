"""Scenario four_hosts: four worker hosts and a console host; one worker host dies hard.

h1..h4 each run a worker, h5 runs the console (`skiplock web`), all against PostgreSQL on the
rig's gateway. Mid-drain h2 dies the way a machine dies: its link goes down first (so not even a
FIN or RST leaves it), then its processes are killed. The three others reap its jobs and finish
the drain; the console, asked over h5's own address, keeps answering and marks h2's worker stale.
"""

from __future__ import annotations

import re
import sys
import time
import urllib.request

import pytest

from skiplock import enqueue_many
from tests.fault.books import audit, record
from tests.fault.conftest import FAST_RECOVERY, remaining, running_of, stop
from tests.support.helpers import scalar, wait_for
from tests.support.pgcluster import free_port

JOBS = 2000
AUTH = {"Authorization": "Basic b3BzOnB3"}  # ops:pw


def console_page(address: str, port: int, path: str) -> tuple[int, str]:
    request = urllib.request.Request(f"http://{address}:{port}{path}", headers=AUTH)
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status, response.read().decode()


def worker_row(html: str, pid: int) -> str | None:
    """The workers page's <tr> of the worker with `pid`, or None."""
    # attributes in any order (the phone layout added id= and data-label=)
    for row in re.findall(r"<tr [^>]*data-worker-id=.*?</tr>", html, re.S):
        if re.search(rf'<td class="num"[^>]*>{pid}</td>', row):
            return str(row)
    return None


@pytest.mark.slow
def test_four_worker_hosts_survive_one_dying_hard(rig, rig_conn, on_host):
    conn = rig_conn
    port = free_port()
    console = on_host("h5", argv=[sys.executable, "-m", "skiplock.tools.cli", "web", "--host",
                                  rig.address("h5"), "--port", str(port)],
                      SKIPLOCK_WEB_USER="ops", SKIPLOCK_WEB_PASSWORD="pw", SKIPLOCK_SECRET_KEY="rig-secret")
    settings = dict(FAST_RECOVERY, SKIPLOCK_CONCURRENCY="4", SKIPLOCK_DB_DEADLINE="3")
    workers = {host: on_host(host, **settings) for host in ("h1", "h2", "h3", "h4")}
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM workers") == 4, timeout=60, message="four workers")
    ids = enqueue_many([("t1", {"sleep": 0.01, "n": i}) for i in range(JOBS)])

    def ran_on(pid: int) -> int:
        return int(scalar(conn, "SELECT count(*) FROM test_effects WHERE pid = %s", (pid,)))

    wait_for(lambda: all(ran_on(w.pid) >= 20 for w in workers.values()), timeout=60,
             message="every host to be running jobs")
    wait_for(lambda: _answers(rig.address("h5"), port, console), timeout=60, message="the console to answer")
    status, html = console_page(rig.address("h5"), port, "/workers/")
    victim = workers["h2"]
    assert status == 200 and worker_row(html, victim.pid) is not None

    rig.cut("h2")  # the machine is gone: nothing it does from now on reaches anyone
    victim.kill()
    killed_at = time.monotonic()
    held = running_of(conn, victim.pid)
    wait_for(lambda: remaining(conn) == 0, timeout=180, message="the three others to finish the drain")
    drained_after = time.monotonic() - killed_at
    assert not running_of(conn, victim.pid)

    # the console on h5 keeps answering, and shows the dead host's worker as stale
    assert console_page(rig.address("h5"), port, "/")[0] == 200
    wait_for(lambda: 'class="stale"' in (worker_row(console_page(rig.address("h5"), port, "/workers/")[1],
                                                       victim.pid) or 'class="stale"'),
             timeout=90, message="the console to mark h2's worker stale")
    stale_after = time.monotonic() - killed_at
    for host, w in workers.items():
        if host != "h2":
            assert stop(w, conn) == 0, w.log()[-3000:]
    assert console.proc.poll() is None

    books = record(audit(conn, "four_hosts_one_killed", ids), held_by_dead_host=len(held),
                   drained_after_kill_s=round(drained_after, 2), console_marked_stale_s=round(stale_after, 2),
                   per_host=",".join(str(ran_on(w.pid)) for w in workers.values()))
    assert books.lost == 0
    assert books.completed == JOBS
    assert books.dead == books.failed == books.queued == books.running == 0
    assert books.duplicated <= len(held)


def _answers(address: str, port: int, console) -> bool:
    if console.proc.poll() is not None:
        raise AssertionError(f"the console exited:\n{console.log()[-3000:]}")
    try:
        return console_page(address, port, "/")[0] == 200
    except OSError:
        return False
