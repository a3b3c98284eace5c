"""The features around a handler's run, as a list of hooks the executor loops over.

Adding a feature around a run = adding a hook: a class with the RunHook methods it needs,
appended to the list `standard_hooks` returns (or passed to the Executor). The executor never
names a feature; it calls, for each run:

    before(job, payload) -> payload     in list order, before the handler; may replace the payload
    caught(job, exc) -> Outcome | None  in reverse order, when the handler (or a `before`) raised,
                                        BEFORE the exception is classified: the first Outcome
                                        returned is the run's outcome, and no classification happens
    after(job, outcome, seconds, exc)   in reverse order, once the outcome is known; returns the
        -> Outcome                      outcome, or another one that replaces it for the hooks after
    given_back(job, reason)             when the run has no outcome (the environment is broken)

Reverse order makes the list an onion: the first hook wraps all the others, so it starts first
and sees the final outcome last (tracing), and a hook appended at the end sits nearest the
handler (the first to see its exception). `after` runs for every hook, even when an earlier
`before` raised. The standard order, outermost first:

    tracing, timings (latency, run times, lane sizing), payload versions, cancel, error hooks, durable jobs

so the error hooks see the classified outcome, the cancel then turns it into "cancelled by <who>",
and the timings and the trace see what is written. The durable jobs' hook (runtime/durable_hook.py,
appended by the Worker after these) sits nearest the handler: it turns a parked run into the PARKED
outcome before any classification, and writes a run's cursors before anything else sees its outcome.
The Worker puts the job's own log lines (worker/runtime/job_logs.py) outside them all, so the lines
include what the user's error hooks log. A hook does not override what it does not
need (RunHook's defaults do nothing); the executor skips the default methods, so a hook costs
only the phases it uses.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from skiplock.core import state_changes
from skiplock.core.features import cancel, hooks
from skiplock.core.features.run_times import RunTimeRecorder
from skiplock.core.plumbing import tracing
from skiplock.runtime.flow import WorkerFlow
from skiplock.runtime.lanes import Lane
from skiplock.runtime.latency import LatencyRecorder

ClaimedJob = state_changes.ClaimedJob
Outcome = state_changes.Outcome


class RunHook:
    """One feature around a run. Override the methods the feature needs; the rest do nothing."""

    def before(self, job: ClaimedJob, payload: Any) -> Any:
        """Before the handler: return the payload it gets (the same one, or a replacement)."""
        return payload

    def caught(self, job: ClaimedJob, exc: BaseException) -> Outcome | None:
        """The run raised `exc`: an Outcome here replaces its classification (None: not this hook's)."""
        return None

    def after(self, job: ClaimedJob, outcome: Outcome, seconds: float, exc: BaseException | None) -> Outcome:
        """The run ended with `outcome` after `seconds` (`exc`: what it raised, if it did)."""
        return outcome

    def given_back(self, job: ClaimedJob, reason: str) -> None:
        """The run ended with no outcome: its job goes back to its queue (a broken environment)."""

    def keeps_run_in_context(self, queue: str) -> bool:
        """Whether this hook keeps a run of `queue` in a ContextVar now. A batch's jobs run their hooks
        together on one thread, so each then needs a contextvars.Context of its own
        (worker/runtime/batch_runner.py); when no hook does, a batch makes none, which on a no-op
        batch cost a fifth of its worker's time per job."""
        return False


def overrides(hook: RunHook, method: str) -> bool:
    """Whether `hook` does something in `method` (the executor calls only those)."""
    return getattr(type(hook), method) is not getattr(RunHook, method)


class TracingHook(RunHook):
    """The run's OpenTelemetry span (a no-op without OpenTelemetry): started first, ended last."""

    def before(self, job: ClaimedJob, payload: Any) -> Any:
        tracing.start_run(job.id, job.queue, job.attempts)  # per thread or task: tracing keeps a ContextVar
        return payload

    def after(self, job: ClaimedJob, outcome: Outcome, seconds: float, exc: BaseException | None) -> Outcome:
        tracing.end_run(outcome.status, outcome.error)
        return outcome

    def given_back(self, job: ClaimedJob, reason: str) -> None:
        tracing.end_run("queued", reason)

    def keeps_run_in_context(self, queue: str) -> bool:
        return tracing.enabled()  # the span lives in a ContextVar only while a tracer provider is set


class TimingsHook(RunHook):
    """What the run's duration feeds: the handler histogram saved with the worker row
    (worker/runtime/latency.py), the per-queue, per-minute run times for the console
    (worker/core/features/run_times.py; None when the worker keeps none) and its lane's claim sizing
    (worker/runtime/prefetch.py). One hook for the three, because each hook is a call on every job's path."""

    def __init__(self, latency: LatencyRecorder, run_times: RunTimeRecorder | None,
                 lane_of: Mapping[str, Lane]) -> None:
        self.latency = latency
        self.run_times = run_times
        self.lane_of = lane_of

    def after(self, job: ClaimedJob, outcome: Outcome, seconds: float, exc: BaseException | None) -> Outcome:
        self.latency.observe("handler", seconds)
        if self.run_times is not None:
            self.run_times.observe(job.queue, seconds)
        self.lane_of[job.queue].sizing.observe_handler(seconds)
        return outcome


class PayloadVersionsHook(RunHook):
    """An older payload upgraded to its handler's version (worker/runtime/flow.py)."""

    def __init__(self, flow: WorkerFlow) -> None:
        self.flow = flow

    def before(self, job: ClaimedJob, payload: Any) -> Any:
        return self.flow.upgrade(job, payload)


class CancelHook(RunHook):
    """A run an operator asked to stop ends failed "cancelled by <who>" (worker/core/features/cancel.py)."""

    def after(self, job: ClaimedJob, outcome: Outcome, seconds: float, exc: BaseException | None) -> Outcome:
        return cancel.override(outcome)


class ErrorHooks(RunHook):
    """The user's on_failure/on_dead hooks (worker/core/features/hooks.py); they never change the outcome."""

    def after(self, job: ClaimedJob, outcome: Outcome, seconds: float, exc: BaseException | None) -> Outcome:
        if exc is not None:
            hooks.failed(job, exc, outcome)
        return outcome


def standard_hooks(flow: WorkerFlow, latency: LatencyRecorder, run_times: RunTimeRecorder | None,
                   lane_of: Mapping[str, Lane]) -> list[RunHook]:
    """The worker's hooks, outermost first (see the module docstring for the order's reasons)."""
    return [TracingHook(), TimingsHook(latency, run_times, lane_of), PayloadVersionsHook(flow), CancelHook(),
            ErrorHooks()]


def cancellation_is_an_outcome(job: ClaimedJob) -> bool:
    """An async run's CancelledError: True when it ends the run with an outcome (an operator's
    cancel, which the heartbeat turned into a task cancel; or the handler's own code raised it),
    False when the shutdown cancelled it after its grace (then the job is released, no outcome)."""
    current = asyncio.current_task()
    if cancel.is_requested(job.id):
        if current is not None:
            current.uncancel()
        return True
    # cancelled by the shutdown after its grace: no outcome, the job stays in flight and the shutdown
    # releases it at once; otherwise the handler's own code raised it, and it is its failure
    return not (current is not None and current.cancelling())
