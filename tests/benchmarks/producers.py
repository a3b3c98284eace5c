"""Many concurrent single-job producers: `INSERT INTO jobs` against the same INSERT into a copy of
jobs without the NOTIFY trigger, with pgbench, alternating, in one run (issue 19, part 1).

    python -m tests.benchmarks.producers [--clients 16 64] [--seconds 10] [--rounds 3]

It makes its own database on the server in DATABASE_URL (default: the local one), migrates it,
and prints tps per round and the ratio of medians. No worker runs, so no worker waits: this is the
producers' cost when every worker is busy, the case the NOTIFY used to serialise.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import uuid
from pathlib import Path

import psycopg

from skiplock.migrate import apply_migrations

INSERT = "INSERT INTO {table} (queue, payload) VALUES ('bench', '{{\"n\": 1}}');\n"


def _pgbench() -> str:
    found = shutil.which("pgbench")
    if found:
        return found
    bindir = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, check=True).stdout.strip()
    return str(Path(bindir) / "pgbench")


def _tps(url: str, script: Path, clients: int, seconds: int) -> float:
    out = subprocess.run([_pgbench(), "-n", "-c", str(clients), "-j", "2", "-T", str(seconds), "-f", str(script),
                          url], capture_output=True, text=True, check=True).stdout
    match = re.search(r"tps = ([\d.]+)", out)
    assert match, out
    return float(match.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    admin = os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
    name = f"skiplock_producers_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    url = re.sub(r"/[^/?]*(\?|$)", f"/{name}\\1", admin, count=1) if "/" in admin.split("@")[-1] else admin
    try:
        apply_migrations(url)
        with psycopg.connect(url, autocommit=True) as conn:
            # the same table, indexes and defaults, but no trigger
            conn.execute("CREATE TABLE jobs_no_trigger (LIKE jobs INCLUDING ALL)")
        with tempfile.TemporaryDirectory() as tmp:
            scripts = {t: Path(tmp) / f"{t}.sql" for t in ("jobs", "jobs_no_trigger")}
            for table, path in scripts.items():
                path.write_text(INSERT.format(table=table))
            for clients in args.clients:
                runs: dict[str, list[float]] = {"jobs": [], "jobs_no_trigger": []}
                for _ in range(args.rounds):
                    for table, path in scripts.items():
                        runs[table].append(_tps(url, path, clients, args.seconds))
                ratio = statistics.median(runs["jobs"]) / statistics.median(runs["jobs_no_trigger"])
                print(f"{clients:>3} producers: jobs {', '.join(f'{t:,.0f}' for t in runs['jobs'])} tps | "
                      f"trigger-free {', '.join(f'{t:,.0f}' for t in runs['jobs_no_trigger'])} tps | "
                      f"ratio of medians {ratio:.2f}")
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


if __name__ == "__main__":
    main()
