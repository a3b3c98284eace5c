"""Turn compare.py's results into a Markdown table, a bar chart and the steady-state line plot."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

SYSTEMS = ["skiplock", "pgqueuer-b10", "pgqueuer-b50", "procrastinate", "celery-redis", "celery-redis-prefork",
           "raw-psycopg", "pgbench"]
THROUGHPUT = ["enqueue_p1", "enqueue_p4", "enqueue_sqlalchemy", "bulk", "drain_w1", "drain_w2", "recipe", "drain_async"]


def write_results(out: str | Path, name: str, results: dict[str, Any], markdown: str) -> Path:
    """A benchmark's <name>.json and <name>.md in `out` (made if missing); prints the Markdown; returns `out`."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps(results, indent=1, default=str))
    (folder / f"{name}.md").write_text(markdown)
    print(markdown)
    return folder


def _stat(reps: list[dict[str, Any]], key: str) -> tuple[float, float, float]:
    values = [r[key] for r in reps]
    return statistics.median(values), min(values), max(values)


def _cell(reps: list[dict[str, Any]] | None, key: str, digits: int = 0) -> str:
    if not reps or any(key not in r for r in reps):  # not measured for this system
        return "-"
    med, lo, hi = _stat(reps, key)
    if len(reps) == 1:
        return f"{med:,.{digits}f}"
    return f"{med:,.{digits}f} ({lo:,.{digits}f}-{hi:,.{digits}f})"


def _median(results: dict[str, Any], workload: str, system: str, key: str = "jobs_per_s") -> float | None:
    reps = results.get(workload, {}).get(system)
    return _stat(reps, key)[0] if reps else None


def ratios(results: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The issue's targets as (target, measured ratio, met?) from this run's medians."""
    rows: list[tuple[str, str, str]] = []

    def add(label: str, num: float | None, den: float | None, goal: float, higher: bool = True) -> None:
        if num is None or den is None or den == 0:
            rows.append((label, "not measured", "-"))
            return
        r = num / den
        rows.append((label, f"{r:.2f}", "yes" if (r >= goal if higher else r <= goal) else "no"))

    best_pgq = max(filter(None, [_median(results, "drain_w2", "pgqueuer-b10"),
                                 _median(results, "drain_w2", "pgqueuer-b50")]), default=None)
    add("drain 2 proc: skiplock / best PgQueuer >= 1.5", _median(results, "drain_w2", "skiplock"), best_pgq, 1.5)
    add("drain 2 proc: skiplock / raw psycopg loop >= 0.75", _median(results, "drain_w2", "skiplock"),
        _median(results, "drain_w2", "raw-psycopg"), 0.75)
    best_pgq_async = max(filter(None, [_median(results, "drain_async", "pgqueuer-b10"),
                                       _median(results, "drain_async", "pgqueuer-b50")]), default=None)
    add("async drain: skiplock / best PgQueuer >= 1", _median(results, "drain_async", "skiplock"),
        best_pgq_async, 1.0)
    add("bulk: skiplock / PgQueuer >= 2", _median(results, "bulk", "skiplock"),
        _median(results, "bulk", "pgqueuer-b10"), 2.0)
    pgq_p99 = min(filter(None, [_median(results, "latency", "pgqueuer-b10", "p99_ms"),
                                _median(results, "latency", "pgqueuer-b50", "p99_ms")]), default=None)
    add("pickup p99: skiplock / PgQueuer <= 1", _median(results, "latency", "skiplock", "p99_ms"), pgq_p99, 1.0,
        higher=False)
    p50 = _median(results, "latency", "skiplock", "p50_ms")
    rows.append(("pickup p50 < 2 ms", f"{p50:.2f} ms" if p50 is not None else "not measured",
                 "-" if p50 is None else ("yes" if p50 < 2 else "no")))
    # Celery+Redis, the anchor a user would pick instead (issue 19): its best pool for the drain
    best_celery = max(filter(None, [_median(results, "drain_w2", "celery-redis"),
                                    _median(results, "drain_w2", "celery-redis-prefork")]), default=None)
    add("drain 2 proc: skiplock / best Celery+Redis >= 1", _median(results, "drain_w2", "skiplock"), best_celery, 1.0)
    for key, label in (("p50_ms", "p50"), ("p99_ms", "p99")):
        add(f"pickup {label}: skiplock / Celery+Redis <= 1", _median(results, "latency", "skiplock", key),
            _median(results, "latency", "celery-redis", key), 1.0, higher=False)
    add("recipe: skiplock / envelope >= 0.85", _median(results, "recipe", "skiplock", "of_envelope"), 1.0, 0.85)
    for p in ("1", "4"):
        add(f"enqueue 1/txn, {p} producer(s): skiplock / raw INSERT >= 0.9",
            _median(results, f"enqueue_p{p}", "skiplock"), _median(results, f"enqueue_p{p}", "raw-psycopg"), 0.9)
    for clients in (16, 64):
        reps = results.get(f"producers_{clients}", {}).get("skiplock")
        for workers in (0, 2):
            for key, how in (("sql_ratio", "SQL INSERT (pgbench) / trigger-free INSERT"),
                             ("enqueue_trigger_ratio", "enqueue() / trigger-free enqueue()"),
                             ("enqueue_ratio", "enqueue() / trigger-free plain INSERT")):
                label = f"{clients} producers, {workers} workers: {how} >= 0.9"
                if not reps:
                    rows.append((label, "not measured", "-"))
                    continue
                if any(key not in rep[f"w{workers}"] for rep in reps):  # results from before the column
                    rows.append((label, "not measured", "-"))
                    continue
                r = statistics.median(rep[f"w{workers}"][key] for rep in reps)
                rows.append((label, f"{r:.2f}", "yes" if r >= 0.9 else "no"))
    add("enqueue 1/txn via SQLAlchemy Session (psycopg2): skiplock / raw INSERT on its connection >= 0.9",
        _median(results, "enqueue_sqlalchemy", "skiplock"), _median(results, "enqueue_sqlalchemy", "raw-psycopg"),
        0.9)
    return rows


def producers_table(results: dict[str, Any]) -> list[str]:
    """Issue 19 part 1: rates with the insert trigger and without it on the same table, per round."""
    rows = []
    for clients in (16, 64):
        reps = results.get(f"producers_{clients}", {}).get("skiplock")
        for workers in (0, 2):
            if not reps:
                continue
            runs = [rep[f"w{workers}"] for rep in reps]

            def cell(key: str, digits: int = 0, runs: list[dict[str, Any]] = runs) -> str:
                return _cell(runs, key, digits)
            rows.append(f"| {clients} | {workers} | {cell('sql')} | {cell('sql_free')} | {cell('sql_ratio', 2)} | "
                        f"{cell('enqueue')} | {cell('enqueue_free')} | {cell('enqueue_trigger_ratio', 2)} | "
                        f"{cell('insert')} | {cell('insert_free')} | {cell('enqueue_ratio', 2)} |")
    if not rows:
        return []
    return ["", "Concurrent single-job producers (tests/benchmarks/producers.py; jobs/s; trigger-free = the same "
            "table with the insert trigger disabled):", "",
            "| producers | workers | SQL INSERT (pgbench) | trigger-free | ratio | enqueue() | trigger-free "
            "enqueue() | ratio | plain INSERT from Python | trigger-free | enqueue() / trigger-free plain INSERT |",
            "|---|---|---|---|---|---|---|---|---|---|---|", *rows]


def markdown(facts: dict[str, Any], results: dict[str, Any]) -> str:
    """The whole report: conditions, one row per workload, the targets as ratios."""
    from tests.benchmarks.compare import TITLES

    present = [s for s in SYSTEMS if any(s in results.get(w, {}) for w in results)]
    lines = [
        f"Measured {facts['date']} on {facts['cpu_count']} CPUs ({facts['machine']}, Linux {facts['kernel']}), "
        f"PostgreSQL {facts['server_version']} on loopback, synchronous_commit={facts['synchronous_commit']}, "
        f"fsync={facts['fsync']}, shared_buffers={facts['shared_buffers']}. "
        f"Python {facts['python']}, psycopg {facts['psycopg']}, pgqueuer {facts['pgqueuer']} "
        f"(asyncpg {facts['asyncpg']}), procrastinate {facts['procrastinate']}, "
        + (f"celery {facts['celery']} (kombu {facts['kombu']}, {facts['redis_server']}), " if "celery" in facts else "")
        + f"{facts['pgbench']}. "
        f"Median of {facts['repetitions']} repetitions (min-max), a fresh database per system and repetition, "
        f"systems alternating. Whole run: {facts['wall_seconds']} s.",
        "",
        "| workload | " + " | ".join(present) + " |",
        "|---|" + "---|" * len(present),
    ]
    for workload, title in TITLES.items():
        by_system = results.get(workload)
        if not by_system:
            continue
        if workload in ("latency", "steady"):
            for key, label in (("p50_ms", "p50"), ("p99_ms", "p99")):
                cells = [_cell(by_system.get(s), key, 2) for s in present]
                lines.append(f"| {title.replace('(ms)', f'{label} (ms)')} | " + " | ".join(cells) + " |")
            if workload == "latency":  # the same pickups from the call's start (bench.latency_summary)
                for key, label in (("p50_call_ms", "p50"), ("p99_call_ms", "p99")):
                    cells = [_cell(by_system.get(s), key, 2) for s in present]
                    lines.append(f"| 4. idle pickup latency, producer's call starts -> handler start {label} (ms) | "
                                 + " | ".join(cells) + " |")
        else:
            lines.append(f"| {title} | " + " | ".join(_cell(by_system.get(s), "jobs_per_s") for s in present) + " |")
    recipe = results.get("recipe", {}).get("skiplock")
    if recipe:
        lines += ["", f"Seed recipe (skiplock): envelope {_cell(recipe, 'envelope_jobs_per_s')} jobs/s "
                  f"(32 slots / (3.5 ms + claim RTT {_cell(recipe, 'claim_rtt_ms', 2)} ms / 50)), reached "
                  f"{_cell(recipe, 'of_envelope', 2)} of it; p99 wait {_cell(recipe, 'p99_wait_ms')} ms; "
                  f"reaped leases {_cell(recipe, 'reaped_pct', 2)} %."]
    steady = results.get("steady", {})
    if steady:
        lines += ["", "Steady state rates (half of each system's 2-process drain): "
                  + ", ".join(f"{s} {r[0]['rate']:,.0f} jobs/s for {r[0]['seconds']:.0f} s"
                              + (f" (~{r[0]['missing']:,} jobs still not started {max(30, r[0]['seconds']):.0f} s "
                                 "after the producers stopped: it fell behind)" if r[0].get("missing") else "")
                              for s, r in steady.items())]
    lines += producers_table(results)
    if facts.get("errors"):
        lines += ["", "Failed runs (left out of the table): " + "; ".join(facts["errors"])]
    lines += ["", "| target (this run's medians) | ratio | met |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in ratios(results)]
    lines += ["", "Sizes: " + ", ".join(f"{k}={v}" for k, v in facts["sizes"].items())
              + " (Procrastinate drains drain_slow jobs; it is ~40x slower).",
              "", "A drain ends: for skiplock when job_stats has counted every ack (each ack batch updates it "
              "in the transaction that deletes its jobs; the table is then checked empty), for PgQueuer and "
              "Procrastinate when their job table is empty (polled every 5 ms), for Celery when its Redis queue "
              "is empty and no message is unacked (polled every 5 ms; early acks, so every task has started), "
              "for the raw loop and pgbench when their processes exit on an empty claim. The steady state and "
              "the seed recipe time every 10th job."]
    return "\n".join(lines) + "\n"


def bar_chart(results: dict[str, Any], path: Path) -> None:
    """One panel per throughput workload, a bar per system with its min-max range."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [w for w in [*THROUGHPUT, "latency"] if results.get(w)]
    if not panels:
        return  # a run of other workloads only (--only steady, say): nothing to chart
    fig, axes = plt.subplots(1, len(panels), figsize=(3.2 * len(panels), 4), squeeze=False)
    for ax, workload in zip(axes[0], panels, strict=True):
        key = "p99_ms" if workload == "latency" else "jobs_per_s"
        names = [s for s in SYSTEMS if s in results[workload]]
        meds: list[float] = []
        errs: list[list[float]] = [[], []]
        for s in names:
            med, lo, hi = _stat(results[workload][s], key)
            meds.append(med)
            errs[0].append(med - lo)
            errs[1].append(hi - med)
        colors = ["tab:green" if s == "skiplock" else "tab:gray" for s in names]
        ax.bar(range(len(names)), meds, yerr=errs, color=colors, capsize=3)
        ax.set_xticks(range(len(names)), names, rotation=60, ha="right", fontsize=8)
        ax.set_title(workload + (" p99 ms (lower is better)" if workload == "latency" else " jobs/s"), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def steady_plot(results: dict[str, Any], path: Path) -> None:
    """Queue depth over time at half capacity, one line per system."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steady = results.get("steady") or {}
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for system, reps in steady.items():
        depth = reps[0]["depth"]
        ax.plot([t for t, _ in depth], [d for _, d in depth],
                label=f"{system} @ {reps[0]['rate']:,.0f}/s (p99 {reps[0]['p99_ms']:.1f} ms)")
    ax.set_xlabel("seconds")
    ax.set_ylabel("queued jobs")
    ax.set_title("steady state at half of measured capacity: queue depth")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


# ---- latency against load (tests/benchmarks/curve.py) -------------------------------------------

CURVE_COLORS = {"skiplock": "tab:green", "pgqueuer-b50": "tab:blue", "celery-redis": "tab:red"}


def _ms(value: float) -> str:
    return "-" if value != value else (f"{value:,.1f}" if value < 100 else f"{value:,.0f}")  # NaN: no probes


def curve_markdown(results: dict[str, Any]) -> str:
    """The curve's table (per system per point), the capacities, the autovacuums and the machine's load."""
    facts = results["facts"]
    lines = [f"Measured {facts['date']} on {facts['cpu_count']} CPUs, private cluster PostgreSQL "
             f"{facts['server_version']} (autovacuum {facts['autovacuum']}, naptime {facts['autovacuum_naptime']}, "
             f"cost delay {facts['autovacuum_vacuum_cost_delay']}; jobs with migration 005's settings"
             + (f" and {facts['jobs_options']}" if facts.get("jobs_options") else "")
             + (f"; server settings {facts['pg_settings']}" if facts.get("pg_settings") else "")
             + (f"; skiplock workers {facts['skiplock_options']}" if facts.get("skiplock_options") else "")
             + f"), {facts['seconds_per_point']:.0f} s per point, every {facts['probe_every']}th job timed, "
             f"whole run {facts['wall_seconds']} s. Command: `{facts['command']}`.", "",
             "Capacity (the median of 2-process drains on the same cluster, each drain in brackets): " + ", ".join(
                 f"{s} {c['jobs_per_s']:,.0f} jobs/s" + (" (given)" if c.get("given") else "")
                 + (f" ({', '.join(f'{d:,}' for d in c['drains_jobs_per_s'])})" if c.get("drains_jobs_per_s") else "")
                 for s, c in results["capacity"].items()), "",
             "| system | offered | jobs/s offered (sent) | p50 ms | p99 ms | max ms | peak backlog | not started "
             "| autovacuums of its table (elapsed s) | load avg | CPU % bench / workers / pg / autovacuum / others |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for p in sorted(results["points"], key=lambda p: (p["system"], p["pct"])):
        cpu = p.get("cpu_mean", {})
        av = p.get("autovacuums", [])
        lines.append(
            f"| {p['system']} | {p['pct']}% | {p['rate']:,.0f} ({p['sent_per_s']:,.0f}) | {_ms(p['p50_ms'])} "
            f"| {_ms(p['p99_ms'])} | {_ms(p['max_ms'])} | {p['peak_backlog']:,} | {p['missing']:,} "
            f"| {len(av)}" + (f" ({', '.join(str(a['elapsed_s']) for a in av[:8])}{' ...' if len(av) > 8 else ''})"
                              if av else "")
            + f" | {p['load1_mean'] or 0:.1f} (max {p['load1_max'] or 0:.1f}) "
            f"| {cpu.get('bench', 0):.0f} / {cpu.get('workers', 0):.0f} / {cpu.get('pg_other', 0):.0f} / "
            f"{cpu.get('pg_autovacuum', 0):.0f} / {cpu.get('others', 0):.0f} |")
    hot = [(p["system"], p["pct"], p["hot_update_share"]) for p in results["points"] if p.get("hot_update_share")
           is not None]
    if hot:
        lines += ["", "HOT share of the queue table's updates (n_tup_hot_upd / n_tup_upd at the end of each point): "
                  + ", ".join(f"{s} {pct}%: {h:.2f}" for s, pct, h in hot)]
    if facts.get("errors"):
        lines += ["", "Errors: " + "; ".join(facts["errors"])]
    return "\n".join(lines) + "\n"


def _load_axis(capacity: dict[str, Any]) -> str:
    """The x axis: each system's own measured capacity, or one rate given to every system (--capacity)."""
    given = {c["jobs_per_s"] for c in capacity.values() if c.get("given")}
    if len(given) == 1 and all(c.get("given") for c in capacity.values()):
        return f"offered load, % of {given.pop():,.0f} jobs/s (the same rates for every system)"
    return "offered load, % of the system's own 2-process capacity"


def curve_plot(results: dict[str, Any], path: Path) -> None:
    """p99 (solid) and p50 (dashed) against offered load, log scale; and skiplock's 50% point over time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, tl) = plt.subplots(1, 2, figsize=(12, 4.2))
    for system in dict.fromkeys(p["system"] for p in results["points"]):
        pts = sorted((p for p in results["points"] if p["system"] == system), key=lambda p: p["pct"])
        color = CURVE_COLORS.get(system, "tab:gray")
        x = [p["pct"] for p in pts]
        ax.plot(x, [p["p99_ms"] for p in pts], marker="o", color=color, label=f"{system} p99")
        ax.plot(x, [p["p50_ms"] for p in pts], marker=".", linestyle="--", color=color, label=f"{system} p50")
    ax.axhline(250, color="black", linewidth=0.6, linestyle=":")
    ax.set_yscale("log")
    ax.set_xlabel(_load_axis(results["capacity"]))
    ax.set_ylabel("end-to-end latency, ms (log)")
    ax.set_title(f"latency against load, autovacuum on, {results['facts']['seconds_per_point']:.0f} s per point",
                 fontsize=9)
    ax.legend(fontsize=7)
    half = [p for p in results["points"] if p["system"] == "skiplock" and p["pct"] == 50]
    if half:
        rows = half[0]["timeline"]
        t = [r["t"] for r in rows]
        tl.plot(t, [r["backlog"] for r in rows], color="tab:green", label="backlog (queued jobs)")
        tl.set_ylabel("queued jobs")
        tl.set_xlabel("seconds")
        cpu = tl.twinx()
        cpu.plot(t, [r["cpu"].get("pg_autovacuum", 0) for r in rows], color="tab:orange", linewidth=0.8,
                 label="autovacuum CPU % of a core")
        cpu.plot(t, [r.get("dead", 0) / 1000 for r in rows], color="tab:purple", linewidth=0.8,
                 label="dead tuples in jobs (thousands)")
        cpu.set_ylabel("% of a core / thousands")
        tl.set_title(f"skiplock at 50% ({half[0]['rate']:,.0f} jobs/s): p99 {_ms(half[0]['p99_ms'])} ms", fontsize=9)
        handles = tl.get_legend_handles_labels()[0] + cpu.get_legend_handles_labels()[0]
        tl.legend(handles, [str(h.get_label()) for h in handles], fontsize=7, loc="upper left")
    else:
        tl.set_visible(False)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
