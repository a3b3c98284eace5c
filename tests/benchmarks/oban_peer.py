"""oban-py's side of the backlog drain (tests/benchmarks/backlog.py): its worker class and its process.

    python -m tests.benchmarks.oban_peer URL LIMIT      (one Oban node, queue "bench" at LIMIT)

oban 0.7.0 needs Python 3.12: this module runs only in the benchmark's 3.12 virtualenv. The worker is
found by its import path (oban stores it in oban_jobs.worker), so it lives in an importable module.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from typing import Any

WORKER = "tests.benchmarks.oban_peer.BenchWorker"  # what the backlog's rows name in oban_jobs.worker


class BenchWorker:
    """A no-op job, as the other systems' handlers in the drain."""

    async def process(self, job: Any) -> None:
        return None


async def install(url: str) -> None:
    """Create oban's tables in a fresh database."""
    from oban import Oban
    from oban.schema import install as install_schema

    pool = await Oban.create_pool(url, min_size=1, max_size=1)
    try:
        await install_schema(pool)
    finally:
        await pool.close()


async def run(url: str, limit: int) -> None:
    """One Oban node running queue "bench" with `limit` jobs at once, until SIGTERM."""
    from oban import Oban, worker

    worker(queue="bench")(BenchWorker)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    pool = await Oban.create_pool(url, min_size=2, max_size=10)
    try:
        async with Oban(pool=pool, queues={"bench": limit}):
            await stop.wait()
    finally:
        await pool.close()


if __name__ == "__main__":
    asyncio.run(run(sys.argv[1], int(sys.argv[2])))
