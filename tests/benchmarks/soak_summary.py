"""Summarise soak CSVs as one Markdown table row each (the README's tuning table).

    python -m tests.benchmarks.soak_summary tests/benchmarks/results/tuning/*.csv

Samples from the first 30 s (workers starting, table filling) are left out.
"""

from __future__ import annotations

import csv
import statistics as st
import sys
from pathlib import Path

HEADER = ("| run | jobs/s (mean) | heap MB (peak) | indexes MB (peak) | jobs_ready_idx MB (peak) | "
          "dead tuples mean / peak | autovacuums | claim p50 ms | workers' claim mean ms |\n"
          "|---|---|---|---|---|---|---|---|---|")


def row(path: Path, warmup: float = 30.0) -> str:
    """One table row for one soak CSV."""
    with open(path) as f:
        rows = [r for r in csv.DictReader(f) if float(r["t"]) >= warmup]

    def col(key: str) -> list[float]:
        return [v for r in rows if (v := float(r[key])) == v]  # drop NaN (no claims in that sample)

    return (f"| {path.stem} | {st.mean(col('jobs_per_s')):.0f} | {max(col('heap_kb')) / 1024:.1f} | "
            f"{max(col('index_kb')) / 1024:.1f} | {max(col('ready_idx_kb')) / 1024:.1f} | "
            f"{st.mean(col('dead_tup')) / 1000:.0f}k / {max(col('dead_tup')) / 1000:.0f}k | "
            f"{rows[-1]['autovacuums']} | {st.median(col('probe_claim_p50_ms')):.1f} | "
            f"{st.median(col('worker_claim_mean_ms')):.1f} |")


def main(argv: list[str]) -> int:
    """Print the table for the CSVs named in argv."""
    print(HEADER)
    for name in argv:
        print(row(Path(name)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
