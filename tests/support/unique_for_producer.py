"""One racing producer of test_unique_for: enqueue every key `rounds` times with unique_for, in a shuffled
order, after a start signal; print `key id` per call (the test checks all calls of a key agree).

    python -m tests.support.unique_for_producer KEYS ROUNDS SEED START_FILE
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

from skiplock import enqueue
from tests.support.helpers import wait_for


def main() -> None:
    keys, rounds, seed, start = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
    calls = [k for k in range(keys) for _ in range(rounds)]
    random.Random(seed).shuffle(calls)
    print("ready", flush=True)
    wait_for(start.exists, timeout=60, message="the start signal")
    out = []
    for k in calls:
        job_id = enqueue("uf", {"k": k}, unique_key=f"event:{k}", unique_for=3600)
        out.append(f"{k} {job_id}")
    print("\n".join(out), flush=True)


if __name__ == "__main__":
    main()
