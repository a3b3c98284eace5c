"""durable.md from durable.json's figures (tests/benchmarks/durable.py)."""

from __future__ import annotations

from typing import Any

from tests.benchmarks.durable_plans import scans_jobs


def _n(value: float | None) -> str:
    """A per-step count, or why there is none."""
    return "n/a (no pg_stat_statements)" if value is None else f"{value:.3f}"


def _steps(part: dict[str, Any]) -> list[str]:
    lines = ["## Step overhead", "",
             "| rep | no steps: jobs/s | 10 steps: jobs/s | steps/s | statements per step | commits per step |",
             "|---|---|---|---|---|---|"]
    for i, run in enumerate(part["runs"]):
        lines.append(f"| {i + 1} | {run['plain']['jobs_per_s']:.0f} | {run['stepped']['jobs_per_s']:.0f} | "
                     f"{run['stepped']['steps_per_s']:.0f} | {_n(run['statements_per_step'])} | "
                     f"{run['commits_per_step']:.2f} |")
    return [*lines, ""]


def _dbos(part: dict[str, Any]) -> list[str]:
    dbos, ours = part["dbos"], part["skiplock"]
    lines = ["## DBOS side by side", "",
             f"DBOS {part['dbos_version']}: {dbos['processes']} processes, queue worker_concurrency "
             f"{dbos['worker_concurrency']}, polling every {dbos['polling_interval_s']} s.", "",
             "| | steps | seconds | steps/s | statements per step | commits per step |", "|---|---|---|---|---|---|",
             f"| DBOS | {dbos['steps']} | {dbos['seconds']:.2f} | {dbos['steps_per_s']:.0f} | "
             f"{_n(dbos['statements_per_step'])} | {dbos['commits_per_step']:.2f} |",
             f"| skiplock | {ours['steps']} | {ours['seconds']:.2f} | {ours['steps_per_s']:.0f} | | |", "",
             f"Ratio skiplock / DBOS: **{part['ratio']:.2f}x** (target >= 5x).", "",
             "| SIGKILL to the resumed step | seconds | completed steps run again |", "|---|---|---|",
             f"| DBOS (same executor restarted) | {part['dbos_kill']['kill_to_resumed_step_s']:.2f} | "
             f"{part['dbos_kill']['completed_steps_run_again'] or 'none'} |"]
    for kill in part["skiplock_kill"]:
        lines.append(f"| skiplock (worker restarted, lease {kill['lease_s']:.0f} s, reaper every "
                     f"{kill['reaper_interval_s']:.0f} s) | {kill['kill_to_resumed_step_s']:.2f} | "
                     f"{kill['completed_steps_run_again'] or 'none'} |")
    return [*lines, ""]


def _signals(part: dict[str, Any]) -> list[str]:
    return ["## Signal to handler start", "",
            f"{part['signals']} signals at {part['rate_per_s']:.0f}/s ({part['woke']} jobs woken), then as many "
            "plain jobs at the same rate, one worker.", "",
            "| | p50 ms | p99 ms |", "|---|---|---|",
            f"| signal commit -> woken handler goes on | {part['signal_p50_ms']:.1f} | {part['signal_p99_ms']:.1f} |",
            f"| enqueue commit -> plain handler start | {part['pickup_p50_ms']:.1f} | {part['pickup_p99_ms']:.1f} |",
            ""]


def _parked(part: dict[str, Any]) -> list[str]:
    plans, claims = part["plans"], part["claims"]
    lines = ["## Parked jobs and the claims of other queues", "",
             f"Two databases on the same server, one with no parked job and one with {part['parked']:,} parked "
             "jobs in another queue (half sleeping for a day, half waiting for their own key).", "",
             f"A real claim of {claims['batch']} jobs, {claims['samples']} times on each, interleaved one by one: "
             f"median {claims['empty_claim_ms']:.2f} ms with no parked job, {claims['parked_claim_ms']:.2f} ms "
             f"with them: **ratio {claims['ratio']:.3f}** (target >= 0.95). The claim statement's own execution "
             f"time (pg_stat_statements, without the round trip and the commit): {_n(claims.get('empty_exec_ms'))} "
             f"ms and {_n(claims.get('parked_exec_ms'))} ms, ratio {_n(claims.get('exec_ratio'))}.", "",
             f"{part['jobs']:,} plain no-op jobs drained by the bench workers on each, alternating:", "",
             "| rep | jobs/s: no parked job | with parked jobs | ratio |", "|---|---|---|---|"]
    for i, r in enumerate(part["reps"]):
        lines.append(f"| {i + 1} | {r['empty']:.0f} | {r['parked']:.0f} | {r['ratio']:.3f} |")
    lines += ["", f"Median drain ratio {part['drain_ratio_median']:.3f}.", "",
              f"The wake pass with {plans['parked']:,} parked jobs, {plans['made_due']} of them due "
              f"(scans jobs: {'yes' if scans_jobs(plans['wake_pass']) else 'no'}):", "", "```",
              plans["wake_pass"], "```", "",
              f"A signal waking {plans['woken_by_signal']} job (the function's inner statements; scans jobs: "
              f"{'yes' if any(scans_jobs(p) for p in plans['signal']) else 'no'}):", "", "```",
              *plans["signal"], "```", ""]
    return lines


def markdown(result: dict[str, Any]) -> str:
    server = result["server"]
    lines = [f"# Durable jobs benchmark ({result['date']})", "",
             f"Machine: {result['machine']}. PostgreSQL {server['server_version']}, fsync={server['fsync']}, "
             f"synchronous_commit={server['synchronous_commit']}. Load average {result['load_average_start']} "
             f"at the start, {result['load_average_end']} at the end.", "", f"`{result['command']}`", ""]
    for name, render in (("steps", _steps), ("dbos", _dbos), ("signals", _signals), ("parked", _parked)):
        if name in result:
            lines += render(result[name])
    return "\n".join(lines) + "\n"
