"""One batch of jobs at a time, against its size: what the latency curve's points are made of (issue 19, part 2).

    python -m tests.benchmarks.bursts [--sizes 1,10,25,50,100,200,400] [--bursts 40] [--gap-ms 30]
        [--systems skiplock,pgqueuer-b50,celery-redis] [--out tests/benchmarks/results] [--name bursts]
        [--quick]

The curve's producer (curve.py) sends the jobs due every 20 ms tick as one batch: one enqueue call,
one transaction. At X% of a system's own capacity a batch therefore holds X% x capacity x 20 ms
jobs, and with a capacity ~6x PgQueuer's, skiplock's batches are ~6x larger at every point of the
curve (at 25%: ~220 jobs against ~37). This takes that apart: one batch at a time, at each size,
sent to idle workers (the same 2 worker processes, adapters and private cluster as the curve), every
job reporting its start over loopback UDP; the next batch follows --gap-ms after the last job of
this one started. Per batch, from the stamp taken just before the enqueue call: the commit (the
call's return), and the first, median and last job's start. Reported: medians over --bursts
batches after WARMUP uncounted ones (prepared statements, a first claim's plan), and the p90 of
the last start. Writes <name>.json and <name>.md to --out.
Not collected by pytest (no test_ prefix).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import signal
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

from skiplock.tools import bench
from skiplock.tools.bench import ProbeReceiver, percentile, wait_until
from tests.benchmarks import compare, curve
from tests.benchmarks.report import write_results

REPO = Path(__file__).resolve().parents[2]
SIZES = [1, 10, 25, 50, 100, 200, 400]
SYSTEMS = ["skiplock", "pgqueuer-b50", "celery-redis"]
WARMUP = 5  # batches per size not counted
CPU_GROUPS = ("bench", "workers", "pg_other")  # the producer, the worker processes, PostgreSQL's backends
IDLE_SECONDS = 3.0  # the idle CPU reading after the batches
BATCH_TIMEOUT = 30.0  # seconds for one batch's jobs to start: far past any batch here; a lost job fails the run


class CpuNanoseconds:
    """On-CPU time of the bench process, its worker processes and PostgreSQL's backends, in ns.

    Summed over every thread from /proc/<pid>/task/<tid>/schedstat (the scheduler's own count, in
    nanoseconds): psutil's cpu_times count 10 ms clock ticks, too coarse for batches of a few ms.
    A thread or backend that ends between two readings loses its time: the workers' threads and the
    pooled backends live through the whole measurement. Autovacuum workers are left out.
    """

    def __init__(self, postmaster: int) -> None:
        self.postmaster = postmaster

    def read(self) -> dict[str, int]:
        me = psutil.Process()
        groups: dict[str, list[int]] = {"bench": [me.pid], "workers": [], "pg_other": []}
        with contextlib.suppress(psutil.Error):
            groups["workers"] = [p.pid for p in me.children(recursive=True)]
        with contextlib.suppress(psutil.Error):
            for child in psutil.Process(self.postmaster).children():
                with contextlib.suppress(psutil.Error):
                    if "autovacuum worker" not in " ".join(child.cmdline()):
                        groups["pg_other"].append(child.pid)
        return {group: sum(_task_ns(pid) for pid in pids) for group, pids in groups.items()}


def _task_ns(pid: int) -> int:
    """Nanoseconds on CPU of every thread of `pid` (0 for a process that is gone)."""
    total = 0
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
    return total


def every_job_probes(seq: int, enqueued_at: float) -> dict[str, Any]:
    """A bench job that reports its start (bench_tasks.bench_job), whatever its number."""
    return {"p": seq, "t": enqueued_at}


def _all_reported(probe: ProbeReceiver, jobs: int) -> bool:
    """The first `jobs` jobs have all reported their start (each job reports once)."""
    return len(probe.samples) >= jobs


def measure(name: str, url: str, sizes: list[int], bursts: int, gap: float, postmaster: int) -> list[dict[str, Any]]:
    """`bursts` batches of each size for `name`'s 2 workers: per size, the batches' medians (ms), and
    the CPU the counted batches took per batch (the gaps between them included), by process group."""
    probe = ProbeReceiver()
    cpu = CpuNanoseconds(postmaster)
    adapter = curve.ADAPTERS[name](url, probe.port, {})
    adapter.payload = every_job_probes
    rows = []
    try:
        with adapter.workers():
            sent = 0
            for size in sizes:
                batches = []
                for n in range(WARMUP + bursts):
                    if n == WARMUP:
                        cpu_before = cpu.read()  # counted from here
                    stamp = time.time()
                    adapter.send(sent, size, stamp)
                    committed = time.time()
                    first, sent = sent, sent + size
                    # every earlier job has reported, so the count says when this batch has started
                    wait_until(functools.partial(_all_reported, probe, sent), BATCH_TIMEOUT,
                               f"{name}'s batch of {size}", interval=0.0005)
                    starts = sorted(probe.samples[seq][1] - stamp for seq in range(first, sent))
                    if n >= WARMUP:
                        batches.append({"commit": committed - stamp, "first": starts[0],
                                        "median": starts[len(starts) // 2], "last": starts[-1]})
                    time.sleep(gap)  # idle workers before the next batch: pacing, not synchronisation
                cpu_after = cpu.read()
                used = {group: (cpu_after[group] - cpu_before[group]) / 1e6 / len(batches) for group in CPU_GROUPS}
                ms = {key: [b[key] * 1000 for b in batches] for key in ("commit", "first", "median", "last")}
                rows.append({"system": name, "size": size, "bursts": len(batches),
                             **{f"{key}_ms": statistics.median(values) for key, values in ms.items()},
                             "last_p90_ms": percentile(ms["last"], 90),
                             "cpu_ms_per_batch": {group: round(used[group], 2) for group in CPU_GROUPS}})
            # what the same processes cost with nothing to do: polling, heartbeats, the sampler's own reads
            before = cpu.read()
            time.sleep(IDLE_SECONDS)  # a measurement window, not synchronisation
            after = cpu.read()
    finally:
        probe.close()
        adapter.close()
    idle = {group: round((after[group] - before[group]) / 1e6 / IDLE_SECONDS, 2) for group in CPU_GROUPS}
    return [{**row, "idle_cpu_ms_per_s": idle} for row in rows]


def _table(results: dict[str, Any], systems: list[str], heading: str, cell: Any) -> list[str]:
    """A row per batch size, a column per system: cell(row) of that system's measurement, or '-'."""
    lines = ["| jobs in the batch | " + " | ".join(f"{s}: {heading}" for s in systems) + " |",
             "|---|" + "---|" * len(systems)]
    for size in dict.fromkeys(r["size"] for r in results["rows"]):
        found = {r["system"]: r for r in results["rows"] if r["size"] == size}
        lines.append(f"| {size:,} | " + " | ".join(cell(found[s]) if s in found else "-" for s in systems) + " |")
    return lines


def markdown(results: dict[str, Any]) -> str:
    facts = results["facts"]
    systems = list(dict.fromkeys(r["system"] for r in results["rows"]))
    lines = [f"Batches alone (tests/benchmarks/bursts.py), {facts['date']}, {facts['cpu_count']} CPUs, private cluster "
             f"({facts['server_version']}), 2 worker processes each, {facts['bursts']} batches per size, "
             f"{facts['gap_ms']:.0f} ms between them; ms from the stamp before the enqueue call, medians "
             "(last start: median, p90). Command: `" + facts["command"] + "`.", ""]
    lines += _table(results, systems, "commit / first / median / last (p90) start",
                    lambda r: f"{r['commit_ms']:.2f} / {r['first_ms']:.2f} / {r['median_ms']:.2f} / "
                              f"{r['last_ms']:.2f} ({r['last_p90_ms']:.2f})")
    idle = {r["system"]: r["idle_cpu_ms_per_s"] for r in results["rows"]}
    lines += ["", "CPU ms per batch (the threads' on-CPU time from /proc/*/task/*/schedstat, over the counted "
              "batches and the gaps between them): the bench process (the producer) / the worker processes / "
              "PostgreSQL's backends. The same processes with no jobs, CPU ms per second (after the batches, "
              f"over {IDLE_SECONDS:.0f} s): " + "; ".join(f"{s} " + " / ".join(f"{idle[s][g]:.1f}" for g in CPU_GROUPS)
                                                        for s in systems) + ".", ""]
    lines += _table(results, systems, "bench / workers / PostgreSQL",
                    lambda r: " / ".join(f"{r['cpu_ms_per_batch'][g]:.2f}" for g in CPU_GROUPS))
    if results["errors"]:
        lines += ["", "Errors: " + "; ".join(results["errors"])]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="jobs per batch")
    parser.add_argument("--bursts", type=int, default=40, help="batches counted per size")
    parser.add_argument("--gap-ms", type=float, default=30.0, help="ms between a batch's last start and the next")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--out", default=str(REPO / "tests/benchmarks/results"))
    parser.add_argument("--name", default="bursts", help="file name stem of the results")
    parser.add_argument("--quick", action="store_true", help="a smoke run: sizes 1 and 10, 3 batches each")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwinds: workers and the private cluster stop
    sizes = [1, 10] if args.quick else [int(s) for s in args.sizes.split(",")]
    bursts = 3 if args.quick else args.bursts
    began = time.monotonic()
    results: dict[str, Any] = {"rows": [], "errors": []}
    with curve.private_cluster({}) as cluster:
        facts = bench.server_facts(cluster.url)
        for name in [s for s in args.systems.split(",") if s]:
            print(f"[{time.monotonic() - began:5.0f}s] {name}", file=sys.stderr, flush=True)
            try:
                with curve.point_database(cluster.url, name, {}) as url:
                    results["rows"] += measure(name, url, sizes, bursts, args.gap_ms / 1000,
                                               curve.postmaster_pid(cluster))
            except Exception as exc:
                results["errors"].append(f"{name}: {type(exc).__name__}: {exc}")
    facts.update(compare.versions(), date=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), bursts=bursts,
                 gap_ms=args.gap_ms, wall_seconds=round(time.monotonic() - began), skiplock_module=bench.__file__,
                 command=" ".join(["python -m tests.benchmarks.bursts", *(argv if argv is not None else sys.argv[1:])]))
    results["facts"] = facts
    write_results(args.out, args.name, results, markdown(results))
    return 1 if results["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
