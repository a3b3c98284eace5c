"""PgBouncer on loopback in transaction pooling mode, for the scenario behind a connection pooler.

Debian's `pgbouncer` package is installed when missing (as root, like chromium for the browser
tests), so CI needs nothing by hand. PgBouncer refuses to run as root: it is started as `nobody`
then, with its files in a folder that user can read and write.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tests.support.helpers import wait_for

PGBOUNCER = "/usr/sbin/pgbouncer"


def ensure_pgbouncer() -> str:
    if shutil.which("pgbouncer") or os.path.exists(PGBOUNCER):
        return shutil.which("pgbouncer") or PGBOUNCER
    if os.geteuid() != 0:
        pytest.fail("pgbouncer is missing and we are not root to run `apt-get install pgbouncer`")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["apt-get", "install", "-y", "pgbouncer"], check=True, stdout=subprocess.DEVNULL, env=env)
    # the package starts a system instance on 6432; ours runs on a free port of its own
    subprocess.run(["service", "pgbouncer", "stop"], check=False, capture_output=True)
    return shutil.which("pgbouncer") or PGBOUNCER


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def pgbouncer(db_url: str) -> Iterator[str]:
    """Run PgBouncer (transaction pooling) in front of `db_url`'s server; yields the pooled URL."""
    exe = ensure_pgbouncer()
    # a folder of its own directly in /tmp: pytest's tmp_path is private to root, and PgBouncer runs
    # as `nobody` when we are root
    folder = Path(tempfile.mkdtemp(prefix="skiplock-pgbouncer-"))
    params = conninfo_to_dict(db_url)
    user = str(params.get("user", "postgres"))
    port = _free_port()
    folder.chmod(0o777)
    (folder / "users.txt").write_text(f'"{user}" ""\n')
    (folder / "pgbouncer.ini").write_text(f"""[databases]
* = host={params.get('host', '127.0.0.1')} port={params.get('port', 5432)}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {folder / 'users.txt'}
pool_mode = transaction
default_pool_size = 10
max_client_conn = 200
server_reset_query =
ignore_startup_parameters = extra_float_digits,options
logfile = {folder / 'pgbouncer.log'}
pidfile = {folder / 'pgbouncer.pid'}
""")
    for f in folder.iterdir():
        f.chmod(0o666)
    cmd = [exe, str(folder / "pgbouncer.ini")]
    if os.geteuid() == 0:
        cmd[1:1] = ["-u", "nobody"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = make_conninfo(db_url, host="127.0.0.1", port=str(port))

    def listening() -> bool:
        if proc.poll() is not None:
            return True
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    try:
        wait_for(listening, timeout=30, message="pgbouncer to listen")
        assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else "pgbouncer exited"
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(folder, ignore_errors=True)
