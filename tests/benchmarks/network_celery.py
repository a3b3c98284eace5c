"""Celery's drain for tests/benchmarks/network.py, in a process of its own: the broker URL is read at import.

    BENCH_CELERY_BROKER=redis://127.0.0.1:PROXY/0 python -m tests.benchmarks.network_celery DIRECT_URL JOBS

The workers (and their publishes) reach Redis through the delay proxy named by BENCH_CELERY_BROKER;
the staging fill, the atomic RENAME and the 5 ms "drained?" polls use DIRECT_URL, so that only the
workers' traffic crosses the delayed link (as only skiplock's and PgQueuer's workers do). Prints
"ready" when the workers consume and the jobs are staged, waits for a line on stdin (the harness
resets the proxy's counters), then drains and prints one JSON line.
"""

from __future__ import annotations

import json
import sys
import time

import redis

from tests.benchmarks import celery_peer


def main() -> int:
    direct_url, jobs = sys.argv[1], int(sys.argv[2])
    direct = redis.Redis.from_url(direct_url)
    direct.flushdb()
    celery_peer._bulk(jobs, celery_peer.STAGING)
    with celery_peer.workers(1, "solo", 1):
        print("ready", flush=True)
        sys.stdin.readline()
        direct.rename(celery_peer.STAGING, celery_peer.QUEUE)
        started = time.monotonic()

        def drained() -> bool:
            pipe = direct.pipeline(transaction=False)
            pipe.llen(celery_peer.QUEUE)
            pipe.hlen("unacked")
            queued, unacked = pipe.execute()
            return bool(queued == 0 and unacked == 0)
        celery_peer.wait_until(drained, max(120.0, jobs / 20), "Celery to drain", interval=0.005)
        elapsed = time.monotonic() - started
    print(json.dumps({"jobs": jobs, "seconds": elapsed, "jobs_per_s": jobs / elapsed}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
