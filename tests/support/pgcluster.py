"""Find a PostgreSQL server for the tests, or start a throwaway cluster the tests own.

Order: DATABASE_URL if it answers, else 127.0.0.1:5432 as postgres, else initdb + pg_ctl in a
temporary folder (as a non-root user when run as root, since postgres refuses to run as root).
The fault suite also uses ThrowawayCluster directly to restart a server under live workers.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo


def answers(url: str) -> bool:
    """True if a connection to `url` succeeds within a couple of seconds."""
    try:
        with psycopg.connect(url, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
        return True
    except psycopg.Error:
        return False


def with_database(url: str, dbname: str) -> str:
    """`url` pointing at another database on the same server."""
    params = conninfo_to_dict(url)
    params["dbname"] = dbname
    return make_conninfo("", **params)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pg_bindir() -> Path:
    """Folder of initdb/pg_ctl: `pg_config --bindir`, else the newest /usr/lib/postgresql/*/bin."""
    try:
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, check=True).stdout.strip()
        if (Path(out) / "initdb").exists():
            return Path(out)
    except (OSError, subprocess.CalledProcessError):
        pass
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    if not candidates:
        raise RuntimeError("no PostgreSQL server binaries found (install postgresql)")
    return candidates[-1].parent


class ThrowawayCluster:
    """A private PostgreSQL cluster on a free loopback port; `stop()`, `start()`, `restart()`."""

    def __init__(self) -> None:
        self.bindir = pg_bindir()
        self.root = Path(tempfile.mkdtemp(prefix="skiplock-pg-"))
        self.datadir = self.root / "data"
        self.port = free_port()
        self.user = self._run_as_user()
        if self.user:
            uid = pwd.getpwnam(self.user)
            os.chown(self.root, uid.pw_uid, uid.pw_gid)
            self.root.chmod(0o700)
        self._run([str(self.bindir / "initdb"), "-D", str(self.datadir), "-A", "trust", "-U", "postgres",
                   "--no-sync", "-E", "UTF8"])
        with open(self.datadir / "postgresql.conf", "a") as conf:
            conf.write(f"\nport = {self.port}\nlisten_addresses = '127.0.0.1'\n"
                       f"unix_socket_directories = '{self.root}'\nmax_connections = 200\nfsync = on\n")
        self.start()

    @staticmethod
    def _run_as_user() -> str | None:
        if os.geteuid() != 0:
            return None
        for name in ("postgres", "nobody"):
            try:
                pwd.getpwnam(name)
                return name
            except KeyError:
                continue
        raise RuntimeError("running as root and no 'postgres' or 'nobody' user to run PostgreSQL as")

    def _run(self, argv: list[str]) -> None:
        if self.user:
            argv = ["runuser", "-u", self.user, "--", *argv]
        subprocess.run(argv, check=True, capture_output=True, timeout=120)

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        self._run([str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "-l", str(self.root / "log"),
                   "-w", "-t", "60", "start"])

    def stop(self, mode: str = "fast") -> None:
        self._run([str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "-m", mode, "-w", "-t", "60", "stop"])

    def restart(self, mode: str = "fast") -> None:
        self._run([str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "-m", mode, "-w", "-t", "60",
                   "-l", str(self.root / "log"), "restart"])

    def reconfigure(self, settings: dict[str, str], lines: str = "") -> None:
        """Append `lines` and `settings` (name -> value) to postgresql.conf and restart (benchmarks' levers,
        shared_buffers among them, take effect only at start)."""
        with open(self.datadir / "postgresql.conf", "a") as conf:
            conf.write("\n" + lines)
            conf.writelines(f"{k} = '{v}'\n" for k, v in settings.items())
        self.restart()

    def migrated_database(self, name: str, extra_sql: str | None = None) -> str:
        """Create database `name` on this cluster, apply skiplock's migrations (and `extra_sql`); return its URL."""
        from skiplock.core.plumbing.migrate import apply_migrations

        with psycopg.connect(self.url, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        url = with_database(self.url, name)
        apply_migrations(url)
        if extra_sql:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(extra_sql)
        return url

    def destroy(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


def shared_server() -> str | None:
    """The admin URL (database 'postgres') of DATABASE_URL's server if it answers, else of 127.0.0.1:5432."""
    env_url = os.environ.get("DATABASE_URL")
    if env_url and answers(env_url):
        return with_database(env_url, "postgres")
    local = "postgresql://postgres@127.0.0.1:5432/postgres"
    return local if answers(local) else None


def find_server() -> tuple[str, ThrowawayCluster | None]:
    """An admin URL (database 'postgres') and, if we had to start one, the cluster to destroy."""
    url = shared_server()
    if url is not None:
        return url, None
    cluster = ThrowawayCluster()
    return cluster.url, cluster
