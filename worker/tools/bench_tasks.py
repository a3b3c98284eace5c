"""The handler `skiplock bench` runs in its worker processes (SKIPLOCK_TASKS=skiplock.tools.bench_tasks).

One queue, one handler, told by its payload what to do, so every workload uses the same worker:
  {}                      no-op (drain)
  {"s": 1}                sleep 2-5 ms at random (the seeds' recipe)
  {"p": seq, "t": secs}   report (seq, enqueue time, start time) by UDP to BENCH_PROBE_PORT
  {"fan_out": n}          enqueue n no-op jobs and a summary depending on them (the workflow benchmark)
A UDP datagram on loopback costs microseconds and no database work, so probing does not
change what is measured.
"""

from __future__ import annotations

import os
import random
import socket
import time
from typing import Any

from skiplock.core.task_decorator import task
from skiplock.tools.bench import BENCH_QUEUE

_probe_addr: tuple[str, int] | None = None
_sock: socket.socket | None = None


def _probe(seq: int, enqueued_at: float, started_at: float) -> None:
    global _probe_addr, _sock
    if _sock is None:
        port = int(os.environ.get("BENCH_PROBE_PORT", "0"))
        _probe_addr = ("127.0.0.1", port)
        _sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    assert _probe_addr is not None
    _sock.sendto(f"{seq} {enqueued_at!r} {started_at!r}".encode(), _probe_addr)


@task(BENCH_QUEUE)
def bench_job(payload: Any) -> None:
    """Do what the payload asks (see the module docstring)."""
    started = time.time()
    if "p" in payload:
        _probe(payload["p"], payload.get("t", 0.0), started)
    if "s" in payload:
        time.sleep(random.uniform(0.002, 0.005))
    if "fan_out" in payload:
        _fan_out(int(payload["fan_out"]))


def _fan_out(children: int) -> None:
    """The workflow benchmark's root (tests/benchmarks/workflows.py): `children` no-op jobs and one
    summary that depends on them all, enqueued in one transaction when the root runs."""
    import psycopg

    from skiplock.core.producer import enqueue, enqueue_many

    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        ids = enqueue_many([(BENCH_QUEUE, {}) for _ in range(children)], conn=conn)
        enqueue(BENCH_QUEUE, {"summary": 1}, depends_on=ids, conn=conn)
