"""Worker processes of the systems skiplock is compared with (run by compare.py, one per process).

    python -m tests.benchmarks.peers pgqueuer URL BATCH PROBE_PORT
    python -m tests.benchmarks.peers procrastinate URL CONCURRENCY PROBE_PORT
    python -m tests.benchmarks.peers rawloop URL BATCH      (prints "ready", waits for "go" on stdin)
    python -m tests.benchmarks.peers pgqueuer-sleep URL BATCH / procrastinate-sleep URL CONCURRENCY

The -sleep variants run the async drain's handler instead: `await asyncio.sleep(ASYNC_SLEEP)`,
at most ASYNC_SLOTS at once (what compare.py's drain_async gives skiplock too).

Handlers behave like skiplock.tools.bench_tasks: a payload with "p" sends (seq, enqueue time, start
time) to the probe port over loopback UDP; anything else is a no-op. SIGTERM stops them.
"""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import sys
import time
from typing import Any

_sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
_probe_port = 0

ASYNC_SLEEP = 0.01  # seconds each async-drain handler awaits
ASYNC_SLOTS = 200  # handlers in flight at once per worker process, for every system in that drain

# The raw ceiling's two statements: claim 50 with the SKIP LOCKED CTE (one transaction), then
# delete them (a second transaction). The same text runs in pgbench (see compare.py).
RAW_CLAIM = """
WITH c AS (
    SELECT id FROM jobs
     WHERE queue = 'skiplock_bench' AND status = 'queued' AND run_at <= now()
     ORDER BY priority DESC, run_at, id
     LIMIT %(limit)s
       FOR UPDATE SKIP LOCKED
)
UPDATE jobs j
   SET status = 'running', attempts = j.attempts + 1, started_at = now(),
       lease_until = now() + interval '30 seconds', worker_id = 'raw'
  FROM c WHERE j.id = c.id
RETURNING j.id
"""
RAW_DELETE = "DELETE FROM jobs WHERE id = ANY(%(ids)s::bigint[]) AND worker_id = 'raw' AND status = 'running'"


def probe(payload: Any) -> None:
    """Report this handler's start to the bench process when the payload asks for it."""
    if isinstance(payload, dict) and "p" in payload:
        _sock.sendto(f"{payload['p']} {payload.get('t', 0.0)!r} {time.time()!r}".encode(),
                     ("127.0.0.1", _probe_port))


async def _until_sigterm() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


async def run_pgqueuer(url: str, batch: int, sleep: float = 0.0) -> None:
    """A PgQueuer QueueManager on its default asyncpg driver, batch size `batch`.

    With `sleep`, each job awaits that long, ASYNC_SLOTS jobs at most at once.
    """
    import asyncpg
    from pgqueuer import AsyncpgDriver, Queries, QueueManager

    conn = await asyncpg.connect(url)
    qm = QueueManager(Queries(AsyncpgDriver(conn)))

    @qm.entrypoint("bench")
    async def bench(job: Any) -> None:
        if sleep:
            await asyncio.sleep(sleep)
        if job.payload:
            probe(json.loads(job.payload))

    from datetime import timedelta

    runner = asyncio.create_task(qm.run(batch_size=batch, dequeue_timeout=timedelta(seconds=1),
                                        max_concurrent_tasks=ASYNC_SLOTS if sleep else None))
    await _until_sigterm()
    qm.shutdown.set()
    await asyncio.wait_for(runner, timeout=10)


def procrastinate_app(url: str, sleep: float = 0.0) -> Any:
    """A Procrastinate app with the bench task (queue 'bench'); with `sleep`, an async task awaiting it."""
    import procrastinate

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url))

    if sleep:
        @app.task(name="bench", queue="bench")
        async def bench_async(**kwargs: Any) -> None:
            await asyncio.sleep(sleep)
    else:
        @app.task(name="bench", queue="bench")
        def bench(**kwargs: Any) -> None:
            probe(kwargs)

    return app


async def run_procrastinate(url: str, concurrency: int, sleep: float = 0.0) -> None:
    """A Procrastinate worker that deletes successful jobs (as skiplock does)."""
    app = procrastinate_app(url, sleep)
    async with app.open_async():
        await app.run_worker_async(queues=["bench"], concurrency=concurrency, delete_jobs="successful",
                                   install_signal_handlers=True)


def run_rawloop(url: str, batch: int) -> None:
    """The minimal psycopg loop: claim `batch`, delete them, until nothing is left."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        print("ready", flush=True)
        sys.stdin.readline()
        while True:
            ids = [r[0] for r in conn.execute(RAW_CLAIM, {"limit": batch}, prepare=True).fetchall()]
            if not ids:
                return
            conn.execute(RAW_DELETE, {"ids": ids}, prepare=True)


def main(argv: list[str]) -> None:
    """Dispatch to the system named in argv[0]."""
    global _probe_port
    system, url, size = argv[0], argv[1], int(argv[2])
    _probe_port = int(argv[3]) if len(argv) > 3 else 0
    if system == "pgqueuer":
        asyncio.run(run_pgqueuer(url, size))
    elif system == "procrastinate":
        asyncio.run(run_procrastinate(url, size))
    elif system == "pgqueuer-sleep":
        asyncio.run(run_pgqueuer(url, size, ASYNC_SLEEP))
    elif system == "procrastinate-sleep":
        asyncio.run(run_procrastinate(url, size, ASYNC_SLEEP))
    elif system == "rawloop":
        run_rawloop(url, size)
    else:
        raise SystemExit(f"unknown system {system!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
