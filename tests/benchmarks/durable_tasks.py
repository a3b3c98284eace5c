"""The handlers the durable-jobs benchmark runs in its worker processes
(SKIPLOCK_TASKS=tests.benchmarks.durable_tasks, queue `durable_bench`), told by the payload what to do:
  {"steps": n}                  n no-op steps (`job.step`), then done; n = 0 is a plain no-op job
  {"slow": n, "marks": path}    n steps that sleep SLOW_STEP_S each; each appends "start <i> <epoch>" to
                                the file `path` when it begins (the SIGKILL measurement)
  {"key": k, "p": seq}          wait for the signal k; once it arrived, report (seq, the signal's send
                                time from its payload, now) by UDP to BENCH_PROBE_PORT
  {"p": seq, "t": epoch}        report (seq, t, now) at once (the plain idle pickup, for comparison)
A UDP datagram on loopback costs microseconds and no database work, so the probe does not change what
is measured.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any

from skiplock.core.job_context import JobContext
from skiplock.core.task_decorator import task

QUEUE = "durable_bench"
SLOW_STEP_S = 0.2
_sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)


def _probe(seq: int, sent_at: float, started_at: float) -> None:
    port = int(os.environ.get("BENCH_PROBE_PORT", "0"))
    _sock.sendto(f"{seq} {sent_at!r} {started_at!r}".encode(), ("127.0.0.1", port))


def _noop(i: int) -> int:
    return i


def _slow(i: int, marks: str) -> int:
    with open(marks, "a") as out:  # O_APPEND: one line per write, from any process
        out.write(f"start {i} {time.time():.6f}\n")
    time.sleep(SLOW_STEP_S)
    return i


@task(QUEUE)
def durable_bench(payload: dict[str, Any], job: JobContext) -> None:
    """Do what the payload asks (see the module docstring)."""
    if "key" in payload:
        received = job.wait_for(payload["key"])
        _probe(payload["p"], float(received["t"]), time.time())
    elif "p" in payload:
        _probe(payload["p"], float(payload["t"]), time.time())
    elif "slow" in payload:
        for i in range(int(payload["slow"])):
            job.step(f"slow-{i}", _slow, i, payload["marks"])
    else:
        for i in range(int(payload.get("steps", 0))):
            job.step(f"s{i}", _noop, i)
