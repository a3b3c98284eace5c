"""Celery on the Redis broker: the anchor of compare.py that a user would pick instead of skiplock.

The compare process imports the functions below; each Celery worker process imports `app`:

    python -m celery -A tests.benchmarks.celery_peer worker --pool=solo -Q bench ...

Broker: BENCH_CELERY_BROKER (default redis://127.0.0.1:6379/11), a Redis database of its own that
`flush()` empties before every run. No result backend. The handler is a no-op unless its kwargs
carry "p": then it sends (seq, enqueue time, start time) to BENCH_PROBE_PORT over loopback UDP,
as the other peers' handlers do (tests/benchmarks/peers.py).

Worker flags: --without-heartbeat/--without-gossip/--without-mingle (cluster events a benchmark
does not need), default prefetch (4 per process) and early acks (Celery's defaults: a task is
acked when the worker takes it, before it runs).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from celery import Celery
from celery.signals import worker_ready

from skiplock.tools.bench import latency_summary, stop_processes, wait_until

REPO = Path(__file__).resolve().parents[2]
BROKER = os.environ.get("BENCH_CELERY_BROKER", "redis://127.0.0.1:6379/11")
QUEUE = "bench"
# The drain's jobs are published here first, then RENAMEd onto QUEUE in one atomic command, so
# the workers see all of them at once (as with the other systems' single-commit fill) instead of
# racing a fill that takes seconds. kombu keeps a priority-0 queue as a Redis list of that name.
STAGING = "bench_fill"
READY_KEY = "bench:ready"  # each worker INCRs it once its consumer is running
# Flags of every worker: heartbeats, gossip and mingle are cluster events a benchmark does not need.
WORKER_FLAGS = ["--without-heartbeat", "--without-gossip", "--without-mingle", "-l", "WARNING"]

app = Celery("skiplock_bench", broker=BROKER, set_as_current=False)
app.conf.update(
    task_ignore_result=True,  # no result backend: nothing is written after a task
    task_default_queue=QUEUE,
    task_serializer="json",
    accept_content=["json"],
    worker_hijack_root_logger=False,
    broker_connection_retry_on_startup=True,
)

_sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
_probe_port = int(os.environ.get("BENCH_PROBE_PORT", "0"))


@app.task(name="bench")
def bench(**kwargs: Any) -> None:
    """The no-op job; with "p" in its kwargs it reports its start (one datagram, no round trip)."""
    if "p" in kwargs:
        _sock.sendto(f"{kwargs['p']} {kwargs.get('t', 0.0)!r} {time.time()!r}".encode(), ("127.0.0.1", _probe_port))


@worker_ready.connect
def _announce_ready(**_: Any) -> None:
    # worker_ready fires after every bootstep, the task consumer included, has started
    with app.connection_for_write() as conn:
        conn.default_channel.client.incr(READY_KEY)


def redis_client() -> Any:
    """A plain redis-py client on the broker's database (for set-up and polling, not for publishing)."""
    import redis

    return redis.Redis.from_url(BROKER)


def flush() -> None:
    """Empty this benchmark's Redis database: queues, unacked messages, bindings, counters."""
    redis_client().flushdb()


def server_version() -> str:
    """The Redis server's version, for the report."""
    try:
        return "Redis " + str(redis_client().info("server")["redis_version"])
    except Exception as exc:  # the report still gets written when Redis is not there
        return f"Redis unavailable ({type(exc).__name__})"


# ---- workers ----------------------------------------------------------------------------------


@contextlib.contextmanager
def workers(processes: int, pool: str = "solo", concurrency: int = 1, probe_port: int = 0,
            broker: str | None = None) -> Iterator[None]:
    """Start `processes` Celery workers on QUEUE, wait until each consumes, SIGTERM them at the end.

    `broker`: the workers' own address of the same Redis (network_latency.py: through a delay proxy);
    this process keeps BROKER for its producer and its polls."""
    client = redis_client()
    client.delete(READY_KEY)
    env = {**os.environ, "BENCH_CELERY_BROKER": broker or BROKER, "BENCH_PROBE_PORT": str(probe_port)}
    procs = [subprocess.Popen([sys.executable, "-m", "celery", "-A", "tests.benchmarks.celery_peer", "worker",
                               f"--pool={pool}", f"--concurrency={concurrency}", "-Q", QUEUE,
                               "-n", f"bench{i}@%h",  # two workers on one host need distinct node names
                               *WORKER_FLAGS],
                              cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for i in range(processes)]
    try:
        def ready() -> bool:
            if any(p.poll() is not None for p in procs):
                raise RuntimeError("a Celery worker exited during start-up")
            return int(client.get(READY_KEY) or 0) >= processes
        wait_until(ready, 60, "Celery workers to consume")
        time.sleep(0.5)  # their first BRPOP follows the ready signal; compare.py's peers settle alike
        yield
    finally:
        stop_processes(procs, grace=15.0)


# ---- producers --------------------------------------------------------------------------------


def _publish(n: int, queue: str = QUEUE) -> None:
    for i in range(n):
        bench.apply_async(kwargs={"n": i}, queue=queue)


def _warm() -> None:
    # The first publish opens the broker connection and declares the queue; do that before timing,
    # as the other systems open their connections before their clocks start.
    with app.producer_or_acquire() as producer:
        producer.channel.client.ping()


def enqueue_single(jobs: int, producers: int) -> dict[str, Any]:
    """Workload 1: `jobs` one-message publishes (apply_async), from `producers` threads."""
    flush()
    _warm()
    counts = [jobs // producers + (1 if i < jobs % producers else 0) for i in range(producers)]
    threads = [threading.Thread(target=_publish, args=(n,)) for n in counts]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    _check_count(QUEUE, jobs)
    return {"jobs": jobs, "seconds": elapsed, "jobs_per_s": jobs / elapsed}


def _bulk(jobs: int, queue: str) -> float:
    """Publish `jobs` through kombu's Producer.batch (pipelined LPUSHes, 1,000 per flush); seconds taken."""
    with app.producer_or_acquire() as producer:
        producer.channel.client.ping()
        started = time.perf_counter()
        with producer.batch():
            for i in range(jobs):
                bench.apply_async(kwargs={"n": i}, queue=queue, producer=producer)
        return time.perf_counter() - started


def enqueue_bulk(jobs: int) -> dict[str, Any]:
    """Workload 2: the fastest bulk path Celery offers on Redis."""
    flush()
    elapsed = _bulk(jobs, QUEUE)
    _check_count(QUEUE, jobs)
    return {"jobs": jobs, "seconds": elapsed, "jobs_per_s": jobs / elapsed}


def _check_count(queue: str, jobs: int) -> None:
    found = redis_client().llen(queue)
    if found != jobs:
        raise RuntimeError(f"{found} messages in {queue}, expected {jobs}")


def drain(jobs: int, processes: int, pool: str = "solo", concurrency: int = 1) -> dict[str, Any]:
    """Workload 3: idle workers, then `jobs` messages appear at once; time until every one is acked.

    With early acks a message leaves `unacked` when its task starts, so "QUEUE empty and nothing
    unacked" is "every task has started" (the last no-op then runs for microseconds): the same end
    as "the job table is empty" for the PostgreSQL peers. Polled every 5 ms, like theirs.
    """
    flush()
    client = redis_client()
    _bulk(jobs, STAGING)
    _check_count(STAGING, jobs)
    with workers(processes, pool, concurrency):
        client.rename(STAGING, QUEUE)  # one command: every job becomes visible at once
        started = time.monotonic()

        def drained() -> bool:
            pipe = client.pipeline(transaction=False)
            pipe.llen(QUEUE).hlen("unacked")
            queued, unacked = pipe.execute()
            return queued == 0 and unacked == 0
        wait_until(drained, max(60.0, jobs / 200), "Celery to drain", interval=0.005)
        elapsed = time.monotonic() - started
    return {"jobs": jobs, "seconds": elapsed, "jobs_per_s": jobs / elapsed, "pool": pool,
            "processes": processes, "concurrency": concurrency}


def pickup_latency(jobs: int, gap: float = 0.05) -> dict[str, Any]:
    """Workload 4: one solo worker, one publish every `gap` s; apply_async's return -> handler start."""
    from skiplock.tools.bench import ProbeReceiver

    flush()
    probe = ProbeReceiver()
    committed: dict[int, float] = {}
    called: dict[int, float] = {}
    try:
        with workers(1, "solo", 1, probe.port), app.producer_or_acquire() as producer:
            producer.channel.client.ping()
            for seq in range(jobs):
                called[seq] = time.time()
                bench.apply_async(kwargs={"p": seq, "t": 0}, producer=producer)
                committed[seq] = time.time()
                time.sleep(gap)  # pacing the producer, not synchronisation
            wait_until(lambda: len(probe.samples) >= jobs, 10, "every probe")
    finally:
        probe.close()
    return latency_summary(probe, committed, jobs, called)


if __name__ == "__main__":  # a quick look without compare.py: python -m tests.benchmarks.celery_peer
    print(enqueue_single(500, 1), enqueue_bulk(5000), drain(5000, 2), drain(5000, 1, "prefork", 2),
          pickup_latency(40), sep="\n")
