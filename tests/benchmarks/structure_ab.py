"""Two commits in one run: the drain against PgQueuer and the fault suite, before and after a change.

    python -m tests.benchmarks.structure_ab --before 1266e69 --after HEAD
    python -m tests.benchmarks.structure_ab --before 1266e69 --after HEAD --rounds 2 --drain 20000 --no-fault

For a change that should cost nothing (issue 37's moves: "the drain ratio and every fault scenario
unchanged or better, measured in one run before and after"). Each commit gets a detached
`git worktree` under --work (a temporary folder by default, removed at the end) and a venv of its own: the
commit installed editable without its dependencies (`pip install --no-deps -e`), the dependencies
seen from the venv that runs this script (its base's site-packages and a .pth line), and the
drain's peers (pgqueuer, asyncpg, procrastinate, matplotlib) installed into it where they are
missing. Each commit runs its own code and its own tests, from its own worktree.

The machine is shared, so the drains alternate (before, after, before, after ... for --rounds)
and every figure is written with the load average (`/proc/loadavg`) taken just before it. The drain
is tests/benchmarks/compare.py's drain_w2 (2 worker processes, no-op jobs) for skiplock and
PgQueuer (batch 50), one repetition each per round, on DATABASE_URL's server. Then the fault suite
of each commit (it starts its own clusters), before then after: its pass/fail counts and the
books it prints. Writes a markdown report to --out (and the raw figures beside it as JSON).
Not collected by pytest (no test_ prefix).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SYSTEMS = ("skiplock", "pgqueuer-b50")
PEERS = {"pgqueuer": "pgqueuer", "asyncpg": "asyncpg", "procrastinate": "procrastinate", "matplotlib": "matplotlib"}
FAULT_TIMEOUT = 3600.0  # one commit's fault suite; a hung suite is stopped and reported as such


@dataclass
class Checkout:
    """One commit: its worktree and the python of its venv."""

    label: str
    sha: str
    path: Path

    @property
    def python(self) -> str:
        return str(self.path / ".venv/bin/python")


def git(*args: str, cwd: Path = REPO) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def load() -> str:
    """The 1, 5 and 15 minute load averages, as `uptime` prints them."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def prepare(label: str, commit: str, work: Path) -> Checkout:
    """A detached worktree of `commit` with a venv that runs that commit's code."""
    sha = git("rev-parse", "--verify", f"{commit}^{{commit}}")
    path = work / f"{label}-{sha[:9]}"
    if not path.exists():
        git("worktree", "add", "--detach", str(path), sha)
    elif git("rev-parse", "HEAD", cwd=path) != sha:
        raise SystemExit(f"{path} holds another commit: remove it (git worktree remove {path})")
    checkout = Checkout(label, sha, path)
    if not Path(checkout.python).exists():
        # the dependencies of the venv that runs this script, without copying them: its base's site-packages
        # (the project's venvs are made with --system-site-packages) and its own, by a .pth line
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(path / ".venv")], check=True)
        site = subprocess.run([checkout.python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              capture_output=True, text=True, check=True).stdout.strip()
        Path(site, "structure_ab_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
        pip = [checkout.python, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        subprocess.run([*pip, "--no-deps", "-e", str(path)], check=True)
        missing = [package for module, package in PEERS.items()
                   if subprocess.run([checkout.python, "-c", f"import {module}"], capture_output=True).returncode]
        if missing:
            subprocess.run([*pip, *missing], check=True)
    where = subprocess.run([checkout.python, "-c", "import skiplock; print(skiplock.__file__)"], cwd=path,
                           capture_output=True, text=True, check=True).stdout.strip()
    if not where.startswith(str(path)):  # each commit must run its own code, not this checkout's
        raise SystemExit(f"{label}: skiplock is imported from {where}, not from {path}")
    return checkout


def drain(checkout: Checkout, jobs: int, url: str) -> dict[str, Any]:
    """One repetition of drain_w2 for skiplock and PgQueuer; jobs/s of each, with the load before it."""
    with tempfile.TemporaryDirectory(prefix="structure_ab_") as out:
        before = load()
        started = time.monotonic()
        subprocess.run([checkout.python, "-m", "tests.benchmarks.compare", "--only", "drain_w2", "--systems",
                        ",".join(SYSTEMS), "--reps", "1", "--drain", str(jobs), "--out", out],
                       cwd=checkout.path, env={**os.environ, "DATABASE_URL": url}, check=True,
                       stdout=subprocess.DEVNULL)
        results = json.loads(Path(out, "results.json").read_text())
    rates = {system: runs[0]["jobs_per_s"] for system, runs in results["results"]["drain_w2"].items()}
    row = {"commit": checkout.label, "load": before, "seconds": round(time.monotonic() - started), **rates,
           "errors": results["facts"]["errors"]}
    if len(rates) == len(SYSTEMS):
        row["ratio"] = rates["skiplock"] / rates["pgqueuer-b50"]
    print(json.dumps(row), file=sys.stderr, flush=True)
    return row


SUMMARY = re.compile(r"^=+ (?P<text>.*\d+ (passed|failed|error).*) in [\d.]+s")


def fault_suite(checkout: Checkout, log: Path) -> dict[str, Any]:
    """The commit's own fault suite: its closing counts and the books it prints."""
    before = load()
    started = time.monotonic()
    try:
        done = subprocess.run([checkout.python, "-m", "pytest", "-n", "0", "tests/fault", "-p", "no:cacheprovider"],
                              cwd=checkout.path, capture_output=True, text=True, timeout=FAULT_TIMEOUT)
        output, code = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired as exc:
        output = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        code = None
    log.write_text(output)
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|errors?|skipped)", _summary(output))}
    return {"commit": checkout.label, "load": before, "seconds": round(time.monotonic() - started),
            "exit": code, "counts": counts, "books": _books(output),
            "failed": re.findall(r"^FAILED (\S+)", output, re.M), "log": str(log)}


def _summary(output: str) -> str:
    lines = [m["text"] for line in output.splitlines() if (m := SUMMARY.match(line))]
    return lines[-1] if lines else ""


def _books(output: str) -> list[str]:
    """The lines of the suite's "fault suite books" section (tests/fault/conftest.py)."""
    lines = output.splitlines()
    start = next((i for i, line in enumerate(lines) if "fault suite books" in line), None)
    if start is None:
        return []
    books = []
    for line in lines[start + 1:]:
        if line.startswith("="):
            break
        if line.strip():
            books.append(line)
    return books


def _figures(line: str) -> tuple[str, dict[str, str]]:
    """A books line ("scenario: key=value ...") as its scenario and figures."""
    scenario, _, rest = line.partition(": ")
    return scenario, dict(item.split("=", 1) for item in rest.split() if "=" in item)


# The books' figures the table shows (each scenario prints more: the JSON keeps the whole lines).
BOOK_FIGURES = ("enqueued", "completed", "lost", "duplicated", "dead", "queued", "running")


def report(checkouts: list[Checkout], drains: list[dict[str, Any]], faults: list[dict[str, Any]],
           command: str, date: str | None = None) -> str:
    date = date or datetime.now(UTC).strftime("%Y-%m-%d")
    cpu = os.cpu_count()
    pg = subprocess.run(["psql", os.environ.get("DATABASE_URL", ""), "-Atc", "SHOW server_version"],
                        capture_output=True, text=True).stdout.strip() or "?"
    out = [f"# Before and after in one run ({date})", "",
           f"Machine: {cpu} cores, shared with other work (the load average before each figure is given), "
           f"PostgreSQL {pg}, private cluster. Command: `{command}`.", "",
           "Commits: " + ", ".join(f"`{c.sha[:9]}` ({c.label})" for c in checkouts) + ".", "",
           "## Drain, 2 worker processes, no-op jobs (jobs/s)", "",
           "| round | commit | load (1/5/15 min) | skiplock | PgQueuer b50 | ratio |", "|---|---|---|---|---|---|"]
    for index, row in enumerate(drains):
        out.append(f"| {index // len(checkouts) + 1} | {row['commit']} | {row['load']} | "
                   f"{row.get('skiplock', 0):,.0f} | {row.get('pgqueuer-b50', 0):,.0f} | {row.get('ratio', 0):.2f} |")
    out += ["", "| commit | median skiplock | median PgQueuer b50 | median ratio |", "|---|---|---|---|"]
    for checkout in checkouts:
        rows = [r for r in drains if r["commit"] == checkout.label and "ratio" in r]
        if rows:
            out.append(f"| {checkout.label} | {statistics.median(r['skiplock'] for r in rows):,.0f} | "
                       f"{statistics.median(r['pgqueuer-b50'] for r in rows):,.0f} | "
                       f"{statistics.median(r['ratio'] for r in rows):.2f} |")
    if faults:
        out += ["", "## Fault suite (each commit's own tests/fault)", "",
                "| commit | load before | minutes | result | failed |", "|---|---|---|---|---|"]
        for row in faults:
            result = ", ".join(f"{n} {word}" for word, n in row["counts"].items()) or f"no summary (exit {row['exit']})"
            out.append(f"| {row['commit']} | {row['load']} | {row['seconds'] / 60:.0f} | {result} | "
                       f"{' '.join(row['failed']) or '-'} |")
        books = {row["commit"]: dict(_figures(line) for line in row["books"]) for row in faults}
        labels = [row["commit"] for row in faults]
        scenarios = sorted({scenario for by in books.values() for scenario in by})
        out += ["", "The books of each scenario (jobs; " + " / ".join(labels) + "), and the scenario's own timing:", "",
                "| scenario | " + " | ".join(BOOK_FIGURES) + " | recovery_s or jobs_per_s |",
                "|---|" + "---|" * (len(BOOK_FIGURES) + 1)]
        for scenario in scenarios:
            cells = [" / ".join(books[label].get(scenario, {}).get(key, "-") for label in labels)
                     for key in (*BOOK_FIGURES, "recovery_s")]
            if cells[-1].replace(" / ", "").strip("-") == "":
                cells[-1] = " / ".join(books[label].get(scenario, {}).get("jobs_per_s", "-") for label in labels)
            out.append(f"| {scenario} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="1266e69", help="the commit before the change")
    parser.add_argument("--after", default="HEAD", help="the commit after it")
    parser.add_argument("--rounds", type=int, default=2, help="drain rounds; each runs before, then after")
    parser.add_argument("--drain", type=int, default=20_000, help="jobs per drain")
    parser.add_argument("--no-fault", action="store_true", help="the drains alone")
    parser.add_argument("--work", default=None, help="folder for the worktrees (default: a temporary one)")
    parser.add_argument("--out", default=str(REPO / "tests/benchmarks/results/structure_ab.md"))
    parser.add_argument("--from-json", default=None, help="rebuild the report of an earlier run from its JSON")
    args = parser.parse_args(argv)
    if args.from_json:
        return rebuild(Path(args.from_json), Path(args.out))
    url = os.environ.get("DATABASE_URL") or "postgresql://postgres@127.0.0.1:5432/postgres"
    work = Path(args.work or tempfile.mkdtemp(prefix="skiplock_ab_"))
    checkouts = [prepare("before", args.before, work), prepare("after", args.after, work)]
    drains = [drain(checkout, args.drain, url) for _ in range(args.rounds) for checkout in checkouts]
    faults = [] if args.no_fault else [fault_suite(c, work / f"fault-{c.label}.log") for c in checkouts]
    command = "python -m tests.benchmarks.structure_ab " + " ".join(
        [f"--before {args.before}", f"--after {args.after}", f"--rounds {args.rounds}", f"--drain {args.drain}"]
        + (["--no-fault"] if args.no_fault else []))
    if not args.work:  # a temporary folder: its worktrees are unregistered with it (a --work one is kept to reuse)
        for checkout in checkouts:
            git("worktree", "remove", "--force", str(checkout.path))
    out = Path(args.out)
    out.with_suffix(".json").write_text(json.dumps({"commits": {c.label: c.sha for c in checkouts}, "command": command,
                                                    "drains": drains, "faults": faults}, indent=1))
    return rebuild(out.with_suffix(".json"), out)


def rebuild(raw: Path, out: Path) -> int:
    """The markdown report of a run from its JSON (the fault logs are read again where they still exist)."""
    data = json.loads(raw.read_text())
    for row in data["faults"]:
        if Path(row["log"]).exists():
            row["books"] = _books(Path(row["log"]).read_text())
    raw.write_text(json.dumps(data, indent=1))
    checkouts = [Checkout(label, sha, Path()) for label, sha in data["commits"].items()]
    out.write_text(report(checkouts, data["drains"], data["faults"], data["command"], data.get("date")))
    print(out.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
