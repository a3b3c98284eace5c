"""Fixtures of the many-machines scenarios: a rig of namespaces, a PostgreSQL on its gateway, hosts' processes.

- `rig` (session): five hosts h1..h5 (tests/netrig/rig.py); the tests skip, with the reason,
  where namespaces cannot be made.
- `rig_cluster` (session): a ThrowawayCluster listening on loopback and on the rig's gateway,
  trusting the rig's network; never the shared server.
- `rig_db` (function): a fresh migrated database on it, as (direct URL, URL the hosts use).
- `on_host`: starts a process inside a host (a worker by default); SIGKILLed at teardown.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tests.conftest import REPO, TEST_TABLES_SQL, WorkerProcess, worker_env
from tests.netrig.rig import NetRig, unavailable
from tests.support.pgcluster import ThrowawayCluster

HOSTS = 5


@pytest.fixture(scope="session")
def rig() -> Iterator[NetRig]:
    reason = unavailable()
    if reason:
        pytest.skip(f"no network rig: {reason}")
    built = NetRig.create(HOSTS)
    yield built
    built.destroy()


@pytest.fixture(scope="session")
def rig_cluster(rig: NetRig) -> Iterator[ThrowawayCluster]:
    cluster = ThrowawayCluster()
    try:
        with open(cluster.datadir / "pg_hba.conf", "a") as hba:
            hba.write(f"\nhost all all {rig.network} trust\n")
        # server-side keepalives: a backend whose host vanished is noticed within ~20 s, not hours
        cluster.reconfigure({"listen_addresses": f"127.0.0.1,{rig.gateway}", "tcp_keepalives_idle": "5",
                             "tcp_keepalives_interval": "5", "tcp_keepalives_count": "3"})
        yield cluster
    finally:
        cluster.destroy()


@dataclass
class RigDatabase:
    direct: str  # for the test itself, over loopback
    remote: str  # for the rig's hosts, over their links


@pytest.fixture
def rig_db(rig: NetRig, rig_cluster: ThrowawayCluster, monkeypatch: pytest.MonkeyPatch) -> Iterator[RigDatabase]:
    name = f"rig_{uuid.uuid4().hex[:8]}"
    direct = rig_cluster.migrated_database(name, TEST_TABLES_SQL)
    monkeypatch.setenv("DATABASE_URL", direct)  # the in-process producer
    yield RigDatabase(direct, make_conninfo(direct, host=rig.gateway))
    from skiplock.core.producer import close_default_pool

    close_default_pool()
    with psycopg.connect(rig_cluster.url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def rig_conn(rig_db: RigDatabase) -> Iterator[psycopg.Connection]:
    with psycopg.connect(rig_db.direct, autocommit=True) as c:
        yield c


class HostProcess(WorkerProcess):
    """A process started inside a rig host by `ip netns exec`: `pid` is the process itself,
    not `ip` (netns exec execs in place, so they are the same)."""

    def __init__(self, proc: subprocess.Popen[bytes], log_path: Path, host: str) -> None:
        super().__init__(proc, log_path)
        self.host = host


@pytest.fixture
def on_host(rig: NetRig, rig_db: RigDatabase, tmp_path: Path) -> Iterator[Callable[..., HostProcess]]:
    started: list[HostProcess] = []

    def start(host: str, *args: str, argv: list[str] | None = None, **settings: str) -> HostProcess:
        log_path = tmp_path / f"{host}-{len(started)}.log"
        command = argv or [sys.executable, "-m", "skiplock", *args]
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(rig.argv(host, command), cwd=REPO, env=worker_env(rig_db.remote, **settings),
                                    stdout=log, stderr=subprocess.STDOUT)
        started.append(HostProcess(proc, log_path, host))
        return started[-1]

    yield start
    for hp in started:
        if hp.proc.poll() is None:
            hp.proc.send_signal(signal.SIGKILL)
        hp.proc.wait(timeout=30)
    for host in list(rig.cut_hosts):
        rig.heal(host)


def worker_id_of(conn: psycopg.Connection, pid: int) -> str | None:
    """The `workers` row id of the worker process `pid` (worker ids are host:pid:random)."""
    row = conn.execute("SELECT id FROM workers WHERE pid = %s ORDER BY started_at DESC LIMIT 1", (pid,)).fetchone()
    return None if row is None else str(row[0])


def hostname_of(url: str) -> str:
    return str(conninfo_to_dict(url).get("host"))


