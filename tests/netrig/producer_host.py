"""The application on a producer host: enqueue jobs in one transaction, the link may die midway.

    python -m tests.netrig.producer_host QUEUE BATCH_TAG JOBS PAUSE_AT

Connects to $DATABASE_URL the way the network guide recommends (TCP keepalives, and
tcp_user_timeout so that unacknowledged data fails the connection within seconds instead of
the kernel's ~15 minutes of retransmissions), opens a transaction, enqueues JOBS jobs with
`skiplock.enqueue(conn=...)`, and before the PAUSE_AT-th one (JOBS = before COMMIT) prints
"paused" and waits for a line on stdin. It then carries on and prints one line: "committed",
or "error <ExceptionClass>: <message>" (exit status 1), which is what the application sees.
"""

from __future__ import annotations

import os
import sys
import time

import psycopg
from psycopg.conninfo import make_conninfo

from skiplock import enqueue

# What an application on an unreliable network should put in its conninfo (docs/explanation/scaling.md).
NETWORK_SAFE = {"connect_timeout": "5", "keepalives": "1", "keepalives_idle": "5", "keepalives_interval": "2",
                "keepalives_count": "3", "tcp_user_timeout": "3000"}


def main() -> int:
    queue, tag, jobs, pause_at = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    conninfo = make_conninfo(os.environ["DATABASE_URL"], application_name="rig-producer", **NETWORK_SAFE)
    conn = psycopg.connect(conninfo)
    started = 0.0
    try:
        with conn.transaction():
            for n in range(jobs):
                if n == pause_at:
                    print("paused", flush=True)
                    sys.stdin.readline()
                    started = time.monotonic()
                enqueue(queue, {"batch": tag, "n": n}, conn=conn)
            if pause_at >= jobs:
                print("paused", flush=True)
                sys.stdin.readline()
                started = time.monotonic()
        print("committed", flush=True)
        return 0
    except psycopg.Error as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        print(f"error {type(exc).__name__}: {first_line} (after {time.monotonic() - started:.1f}s)", flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
