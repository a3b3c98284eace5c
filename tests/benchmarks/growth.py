"""Cost as the work grows (issue 19, part 3): drain rate and claim latency against the table's size.

    python -m tests.benchmarks.growth [--reps 3] [--quick] [--out tests/benchmarks/results]

Runs on a PRIVATE PostgreSQL cluster (initdb + pg_ctl in a temporary folder, stock settings plus the
migrations, so migration 005's per-table autovacuum settings; autovacuum on), stopped at the end. Three
databases, each measured in every repetition, states alternating:

- ``empty``: only the jobs being measured (delete history mode, the default);
- ``empty-keep``: the same, workers in ``keep`` history mode (the baseline of ``kept``);
- ``backlog``: 1,000,000 ready jobs in the same queue; the drain takes a fixed count from it;
- ``kept``: 5,000,000 succeeded rows kept (``keep`` history mode) plus 10,000 ready, and a few
  thousand dead jobs with multi-line tracebacks for the console.

In each state and repetition: the claim's own latency (the worker's lean claim statement of 50 jobs,
``state_changes.claim`` timed from this process, each claim acked before the next, 200 claims), then a drain
of 20,000 no-op jobs by 2 worker processes. The drain: the queue is paused, the workers started
and connected, the queue resumed (its NOTIFY wakes them) and timed until job_stats has counted
20,000 acks. Every state is topped up to its size and VACUUM ANALYZEd before it is measured.
Then the console's pages on the ``kept`` database (5,000,000 rows), in process through the Flask
test client, many requests per page: p50/p95 per page. Writes growth.json and growth.md. Each
state's measurement starts from a CHECKPOINT (see prepare()).
Rows are written through skiplock.tools.bench_seed (seed_ready_jobs, seed_finished_jobs), never by SQL here.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from skiplock.core import state_changes  # noqa: E402
from skiplock.tools import bench, bench_seed  # noqa: E402
from skiplock.tools.bench import BENCH_QUEUE, skiplock_workers, wait_until  # noqa: E402
from tests.support.pgcluster import ThrowawayCluster  # noqa: E402

FULL = {"drain": 20_000, "backlog": 1_000_000, "kept": 5_000_000, "kept_ready": 10_000, "dead": 5_000,
        "claims": 200, "batch": 50, "requests": 100}
QUICK = {"drain": 2_000, "backlog": 50_000, "kept": 200_000, "kept_ready": 1_000, "dead": 500,
         "claims": 20, "batch": 50, "requests": 5}

# Other queues of the kept history, so the console has several queues to list and group.
HISTORY_QUEUES = [BENCH_QUEUE, "emails", "reports", "webhooks"]

# Real-looking dead letters: multi-line tracebacks of a few kinds (the console groups them by kind).
TRACEBACKS = [
    'Traceback (most recent call last):\n  File "/app/venv/lib/python3.11/site-packages/skiplock/runner.py", '
    'line 512, in _run\n    result = handler(payload)\n  File "/app/tasks/emails.py", line 88, in send_welcome\n'
    '    smtp.send_message(message)\n  File "/usr/lib/python3.11/smtplib.py", line 986, in send_message\n'
    '    return self.sendmail(from_addr, to_addrs, flatmsg, mail_options, rcpt_options)\n'
    'smtplib.SMTPServerDisconnected: Connection unexpectedly closed',
    'Traceback (most recent call last):\n  File "/app/tasks/reports.py", line 41, in build_report\n'
    '    customer = payload["customer_id"]\n             ~~~~~~~^^^^^^^^^^^^^^^\nKeyError: \'customer_id\'',
    'Traceback (most recent call last):\n  File "/app/tasks/webhooks.py", line 120, in deliver\n'
    '    response = session.post(url, json=body, timeout=30)\n  File "/app/venv/lib/python3.11/site-packages/'
    'requests/sessions.py", line 637, in post\n    return self.request("POST", url, data=data, json=json, **kwargs)\n'
    'requests.exceptions.ReadTimeout: HTTPSConnectionPool(host=\'hooks.example.com\', port=443): '
    'Read timed out. (read timeout=30)',
    'Traceback (most recent call last):\n  File "/app/tasks/images.py", line 57, in thumbnail\n'
    '    image = Image.open(io.BytesIO(data))\n  File "/app/venv/lib/python3.11/site-packages/PIL/Image.py", '
    'line 3339, in open\n    raise UnidentifiedImageError(msg)\nPIL.UnidentifiedImageError: cannot identify '
    'image file <_io.BytesIO object at 0x7f3a2c1d9e40>',
    'Traceback (most recent call last):\n  File "/app/tasks/billing.py", line 203, in charge\n'
    '    with db.transaction():\n  File "/app/db.py", line 18, in transaction\n'
    '    conn.execute("SELECT pg_advisory_xact_lock(%s)", (key,))\n'
    'psycopg.errors.LockNotAvailable: canceling statement due to lock timeout',
    'lease expired: worker w-3 stopped heartbeating during attempt 20',
]

STATES = ["empty", "empty-keep", "backlog", "kept"]
MODE = {"empty": "delete", "empty-keep": "keep", "backlog": "delete", "kept": "keep"}
DATABASE = {"empty": "growth_empty", "empty-keep": "growth_empty", "backlog": "growth_backlog",
            "kept": "growth_kept"}


def timed(what: str, body: Any) -> Any:
    started = time.perf_counter()
    result = body()
    print(f"  {what}: {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
    return result


def build(cluster: ThrowawayCluster, sizes: dict[str, Any]) -> dict[str, str]:
    """The three migrated databases, the big ones filled; returns their URLs."""
    urls = {name: cluster.migrated_database(name) for name in sorted(set(DATABASE.values()))}
    with psycopg.connect(urls["growth_backlog"], autocommit=True) as conn:
        timed(f"seed {sizes['backlog']:,} ready",
              lambda: bench_seed.seed_ready_jobs(conn, BENCH_QUEUE, sizes["backlog"]))
    with psycopg.connect(urls["growth_kept"], autocommit=True) as conn:
        # succeeded over the last ~5.8 days at 5M rows: inside the default 7-day retention
        timed(f"seed {sizes['kept']:,} succeeded", lambda: bench_seed.seed_finished_jobs(
            conn, HISTORY_QUEUES, sizes["kept"], status="succeeded", spacing=0.1))
        timed(f"seed {sizes['dead']:,} dead", lambda: bench_seed.seed_finished_jobs(
            conn, HISTORY_QUEUES, sizes["dead"], status="dead", errors=TRACEBACKS, spacing=60.0))
    return urls


def ready_count(conn: psycopg.Connection) -> int:
    row = conn.execute("SELECT count(*) FROM jobs WHERE queue = %s AND status = 'queued'", (BENCH_QUEUE,)).fetchone()
    return int(row[0]) if row else 0


def prepare(url: str, state: str, sizes: dict[str, Any]) -> int:
    """Top the bench queue up to this state's ready jobs (plus what the claims and the drain take); VACUUM ANALYZE."""
    extra = {"empty": 0, "empty-keep": 0, "backlog": sizes["backlog"], "kept": sizes["kept_ready"]}[state]
    want = extra + sizes["drain"] + sizes["claims"] * sizes["batch"]
    with psycopg.connect(url, autocommit=True) as conn:
        if state.startswith("empty"):
            bench_seed.delete_queue(conn, BENCH_QUEUE)  # this queue holds only the jobs about to be measured
        have = ready_count(conn)
        if have < want:
            bench_seed.seed_ready_jobs(conn, BENCH_QUEUE, want - have)
        conn.execute("VACUUM ANALYZE jobs")
        # Every state is measured from a checkpoint: the next write of each page is a full-page image,
        # so a measurement pays for the pages it touches, the same in every state. Without it a
        # checkpoint fell inside the drains of the states whose own seeding wrote the most WAL.
        conn.execute("CHECKPOINT")
        return int(conn.execute("SELECT count(*) FROM jobs").fetchone()[0])  # type: ignore[index]


def claim_latency(url: str, mode: str, claims: int, batch: int) -> dict[str, Any]:
    """The worker's lean claim of `batch` jobs, timed here `claims` times; each batch acked before the next."""
    from skiplock.core.plumbing.db import session_defaults

    times = []
    with psycopg.connect(url, autocommit=True) as conn:
        # the session of the worker's claim connection: its pools' defaults, claims that commit
        # without waiting for the WAL flush, the claim's plan settings (skiplock.runtime.claimer.claims_commit_async)
        session_defaults(conn)
        conn.execute("SET synchronous_commit = off")
        state_changes.claim_session(conn)
        for _ in range(claims):
            started = time.perf_counter()
            jobs = state_changes.claim(conn, "growth-claim", [BENCH_QUEUE], [30.0], batch, payload_as_text=True,
                                       with_context=False)
            times.append((time.perf_counter() - started) * 1000)
            if len(jobs) != batch:
                raise RuntimeError(f"a claim found {len(jobs)} of {batch} jobs")
            done = state_changes.ack_batch(conn, "growth-claim", [state_changes.Outcome(j.id, j.queue, j.attempts,
                                                                                        "ok") for j in jobs],
                                           history=mode)
            if len(done) != batch:
                raise RuntimeError(f"an ack wrote {len(done)} of {batch} jobs")
    return {"claims": claims, "batch": batch, "p50_ms": statistics.median(times),
            "p95_ms": bench.percentile(times, 95), "mean_ms": statistics.fmean(times)}


def acked(conn: psycopg.Connection) -> int:
    row = conn.execute("SELECT coalesce(sum(completed), 0) FROM job_stats WHERE queue = %s", (BENCH_QUEUE,)).fetchone()
    return int(row[0]) if row else 0


# What the server did for the drain, read before and after it: WAL (bytes, full-page images) from
# pg_stat_wal (the private cluster runs nothing else) and the jobs table's buffer reads (blocks not
# in shared_buffers) and hits from pg_statio_user_tables, summed over its heap and indexes; the
# checkpoints begun and autovacuum visits to jobs (a checkpoint turns each page's next write into a
# full-page image; a vacuum of a big table reads all of its indexes).
SERVER_COUNTERS = """
SELECT w.wal_bytes::float8, w.wal_fpi::float8,
       (s.heap_blks_read + coalesce(s.idx_blks_read, 0))::float8,
       (s.heap_blks_hit + coalesce(s.idx_blks_hit, 0))::float8,
       (b.checkpoints_timed + b.checkpoints_req)::float8,
       (u.autovacuum_count + u.autoanalyze_count)::float8
  FROM pg_stat_wal w, pg_statio_user_tables s, pg_stat_bgwriter b, pg_stat_user_tables u
 WHERE s.relid = 'jobs'::regclass AND u.relid = 'jobs'::regclass
"""
COUNTER_NAMES = ("wal_bytes", "wal_fpi", "blocks_read", "blocks_hit", "checkpoints", "autovacuums")


def server_counters(conn: psycopg.Connection) -> dict[str, float]:
    conn.execute("SELECT pg_stat_clear_snapshot()")  # a fresh read, not this transaction's cached one
    row = conn.execute(SERVER_COUNTERS).fetchone()
    return dict(zip(COUNTER_NAMES, row or (0.0,) * len(COUNTER_NAMES), strict=True))


def drain(url: str, mode: str, jobs: int, processes: int = 2) -> dict[str, Any]:
    """`jobs` acks by `processes` workers, from the queue's resume to job_stats counting them."""
    with psycopg.connect(url, autocommit=True) as conn:
        first = acked(conn)
        counters = server_counters(conn)
        state_changes.pause_queue(conn, BENCH_QUEUE, "growth")
        try:
            # retention of 30 days: the workers' pruner must not delete the kept history mid-run
            with skiplock_workers(url, processes, concurrency=50, batch_size=50, history_mode=mode,
                                  history_retention=30 * 86400):
                before = acked(conn)
                started = time.monotonic()
                state_changes.resume_queue(conn, BENCH_QUEUE)
                wait_until(lambda: acked(conn) - before >= jobs, max(120.0, jobs / 100), "the drain's acks",
                           interval=0.005)
                elapsed = time.monotonic() - started
        finally:
            state_changes.resume_queue(conn, BENCH_QUEUE)
        # the workers have exited (their statistics are flushed): per job acked, the stop's tail included
        done = max(1, acked(conn) - first)
        after = server_counters(conn)
    per_job = {f"{k}_per_job": (after[k] - counters[k]) / done for k in COUNTER_NAMES[:4]}
    during = {k: after[k] - counters[k] for k in COUNTER_NAMES[4:]}
    return {"jobs": jobs, "processes": processes, "seconds": elapsed, "jobs_per_s": jobs / elapsed, **per_job,
            **during}


def console(url: str, requests: int) -> list[dict[str, Any]]:
    """p50/p95/max (ms) of each console page on `url`, `requests` requests per page, in process."""
    from skiplock.core.error_summary import summarize
    from skiplock.webapp import create_app
    from skiplock.webapp.db import close_app
    from skiplock.webapp.settings import Account
    from tests.benchmarks.console_pages import p95, pages, time_page

    app = create_app({"DATABASE_URL": url, "SECRET_KEY": "bench", "ACCOUNTS": [Account("bench", "admin", "pw")]})
    client = app.test_client()
    rows = []
    try:
        # console_pages' pages, plus the tabs that read the kept history and the measured queue's backlog
        extra_pages: list[tuple[str, str, dict]] = [
            ("queue emails succeeded", "/queues/emails?status=succeeded", {}),
            ("queue emails succeeded text search", "/queues/emails?status=succeeded&q=user4999999@", {}),
            (f"queue {BENCH_QUEUE} ready", f"/queues/{BENCH_QUEUE}?status=ready", {})]
        for label, path, extra in pages(url, error=summarize(TRACEBACKS[1])[1] or "") + extra_pages:
            times = time_page(client, path, extra, requests)
            rows.append({"page": label, "path": path, "requests": requests, "p50_ms": statistics.median(times),
                         "p95_ms": p95(times), "max_ms": times[-1]})
            print(f"  console {label:34} p50 {rows[-1]['p50_ms']:7.1f}  p95 {rows[-1]['p95_ms']:7.1f} ms",
                  file=sys.stderr, flush=True)
    finally:
        close_app(app)
    return rows


def run(sizes: dict[str, Any], reps: int, with_console: bool = True,
        pg_settings: dict[str, str] | None = None) -> dict[str, Any]:
    """Build the private cluster, measure every state `reps` times, time the console; stop the cluster.
    `pg_settings` (name -> value) go into the cluster's configuration before anything is built."""
    cluster = ThrowawayCluster()
    print(f"private cluster on port {cluster.port} ({cluster.root})", file=sys.stderr, flush=True)
    if pg_settings:
        cluster.reconfigure(pg_settings)
    results: dict[str, Any] = {"states": {s: [] for s in STATES}, "console": [], "rows": {}}
    started = time.monotonic()
    try:
        urls = build(cluster, sizes)
        results["server"] = bench.server_facts(urls["growth_kept"])
        for rep in range(reps):
            order = STATES[rep % len(STATES):] + STATES[:rep % len(STATES)]
            for state in order:
                url = urls[DATABASE[state]]
                rows = prepare(url, state, sizes)
                results["rows"][state] = rows
                print(f"[{time.monotonic() - started:5.0f}s] rep {rep + 1}/{reps} {state}: {rows:,} rows",
                      file=sys.stderr, flush=True)
                claim = claim_latency(url, MODE[state], sizes["claims"], sizes["batch"])
                drained = drain(url, MODE[state], sizes["drain"])
                results["states"][state].append({"claim": claim, "drain": drained, "rows": rows})
                print(f"    claim p50 {claim['p50_ms']:.2f} ms, drain {drained['jobs_per_s']:,.0f} jobs/s",
                      file=sys.stderr, flush=True)
            if with_console:
                with psycopg.connect(urls["growth_kept"], autocommit=True) as conn:
                    conn.execute("VACUUM ANALYZE jobs")
                    rows = int(conn.execute("SELECT count(*) FROM jobs").fetchone()[0])  # type: ignore[index]
                print(f"[{time.monotonic() - started:5.0f}s] rep {rep + 1}/{reps} console on {rows:,} rows",
                      file=sys.stderr, flush=True)
                results["console"].append({"rows": rows, "pages": console(urls["growth_kept"], sizes["requests"])})
    finally:
        cluster.destroy()
    results["wall_seconds"] = round(time.monotonic() - started)
    return results


def _med(values: list[float]) -> str:
    return f"{statistics.median(values):,.2f} ({min(values):,.2f}-{max(values):,.2f})"


def markdown(results: dict[str, Any], sizes: dict[str, Any], reps: int) -> str:
    """The states table (medians, ranges, ratios to the empty table) and the console's p95 per page."""
    st = results["states"]
    levers = "".join(f", {k} = {v}" for k, v in results.get("pg_settings", {}).items())
    lines = [f"Growth benchmark (tests/benchmarks/growth.py), {results.get('date', '')}, {reps} repetition(s), "
             f"private cluster (PostgreSQL {results.get('server', {}).get('server_version', '?')}{levers}), "
             f"whole run {results.get('wall_seconds', '?')} s. Drain: {sizes['drain']:,} no-op jobs, 2 worker "
             f"processes; claim: the lean claim of {sizes['batch']}, {sizes['claims']} times. Median (min-max); "
             "ratios are of medians, and per repetition in brackets.", "",
             "| state | rows in jobs | drain (jobs/s) | claim p50 (ms) | drain / empty | claim p50 empty / state |",
             "|---|---|---|---|---|---|"]
    for state in STATES:
        if not st.get(state):
            continue
        base = "empty-keep" if MODE[state] == "keep" else "empty"
        rates = [r["drain"]["jobs_per_s"] for r in st[state]]
        p50s = [r["claim"]["p50_ms"] for r in st[state]]
        brates = [r["drain"]["jobs_per_s"] for r in st[base]]
        bp50s = [r["claim"]["p50_ms"] for r in st[base]]
        per_rep_rate = ", ".join(f"{a / b:.2f}" for a, b in zip(rates, brates, strict=False))
        per_rep_claim = ", ".join(f"{b / a:.2f}" for a, b in zip(p50s, bp50s, strict=False))
        ratio = (f"{statistics.median(rates) / statistics.median(brates):.2f} [{per_rep_rate}]",
                 f"{statistics.median(bp50s) / statistics.median(p50s):.2f} [{per_rep_claim}]")
        if state == base:
            ratio = ("1 (baseline)", "1 (baseline)")
        lines.append(f"| {state} (vs {base}) | {results['rows'].get(state, 0):,} | {_med(rates)} | {_med(p50s)} | "
                     f"{ratio[0]} | {ratio[1]} |")
    lines += ["", "What the server did per job drained (median over repetitions; WAL from pg_stat_wal, blocks of "
              "`jobs` and its indexes from pg_statio_user_tables; read = not in shared_buffers):", "",
              "| state | WAL bytes/job | full-page images/job | blocks read/job | blocks hit/job | "
              "checkpoints begun, autovacuum visits to jobs (per repetition) |",
              "|---|---|---|---|---|---|"]
    for state in STATES:
        if st.get(state) and "wal_bytes_per_job" in st[state][0]["drain"]:
            med = {k: statistics.median(r["drain"][f"{k}_per_job"] for r in st[state]) for k in COUNTER_NAMES[:4]}
            during = ", ".join(f"{r['drain'].get('checkpoints', 0):.0f}/{r['drain'].get('autovacuums', 0):.0f}"
                               for r in st[state])
            lines.append(f"| {state} | {med['wal_bytes']:,.0f} | {med['wal_fpi']:.3f} | {med['blocks_read']:.2f} | "
                         f"{med['blocks_hit']:.1f} | {during} |")
    if st.get("kept") and st.get("empty"):
        k = statistics.median(r["drain"]["jobs_per_s"] for r in st["kept"])
        e = statistics.median(r["drain"]["jobs_per_s"] for r in st["empty"])
        kc = statistics.median(r["claim"]["p50_ms"] for r in st["kept"])
        ec = statistics.median(r["claim"]["p50_ms"] for r in st["empty"])
        lines += ["", f"kept against the delete-mode empty table: drain {k / e:.2f}, claim p50 {ec / kc:.2f}."]
    if results["console"]:
        lines += ["", f"Console on the kept database ({results['console'][0]['rows']:,} rows), "
                  f"{sizes['requests']} requests per page per repetition, Flask test client in process:", "",
                  "| page | p50 (ms) | p95 (ms), median of reps (min-max) | max (ms) |", "|---|---|---|---|"]
        for i, page in enumerate(results["console"][0]["pages"]):
            reps_pages = [c["pages"][i] for c in results["console"]]
            lines.append(f"| {page['page']} | {_med([p['p50_ms'] for p in reps_pages])} | "
                         f"{_med([p['p95_ms'] for p in reps_pages])} | "
                         f"{max(p['max_ms'] for p in reps_pages):,.1f} |")
    return "\n".join(lines) + "\n"


def compare_hook(out: Path, quick: bool, reps: int, only: str) -> None:
    """Called by compare.py when `growth` is among --only: run this benchmark, write growth.json and growth.md."""
    if "growth" not in only.split(","):
        return
    main([*(["--quick"] if quick else []), "--reps", str(reps), "--out", str(out)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, 1 repetition: a smoke run")
    parser.add_argument("--reps", type=int, default=None, help="repetitions (default 3, 1 with --quick)")
    parser.add_argument("--no-console", action="store_true", help="skip the console pages")
    parser.add_argument("--out", default=str(REPO / "tests/benchmarks/results"))
    parser.add_argument("--pg", action="append", default=[],
                        help="server setting name=value for the private cluster (e.g. shared_buffers=1GB)")
    parser.add_argument("--drain", type=int, default=None,
                        help="jobs per drain (default 20,000; under a second here: see compare.py --drain)")
    args = parser.parse_args(argv)
    sizes = dict(QUICK if args.quick else FULL)
    if args.drain:
        sizes["drain"] = args.drain
    reps = args.reps or (1 if args.quick else 3)
    pg_settings = dict(item.split("=", 1) for item in args.pg)
    results = run(sizes, reps, with_console=not args.no_console, pg_settings=pg_settings)
    results["pg_settings"] = pg_settings
    results["date"] = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    suffix = "-quick" if args.quick else ""
    (out / f"growth{suffix}.json").write_text(json.dumps({"sizes": sizes, "reps": reps, **results}, indent=1))
    text = markdown(results, sizes, reps)
    (out / f"growth{suffix}.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
