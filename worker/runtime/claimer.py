"""The claimer: the claim loop, the listener's claim on a NOTIFY, and the producers' hand-offs.

The claim loop (the worker's main thread) claims up to each lane's free slots in one statement,
hands the jobs to the executor (worker/runtime/executor.py), then sleeps until a NOTIFY, a freed
slot or the poll interval. The listener thread (worker/runtime/listener.py), which the claimer
builds, claims for an idle lane on its own connection when a NOTIFY comes, and starts the jobs a
producer's insert trigger handed to this worker (migration 020). `run_once()` is one turn of the loop.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

import psycopg

from skiplock.core import state_changes
from skiplock.core.features import handoff
from skiplock.core.features.waiting import Waiting
from skiplock.core.plumbing import tracing
from skiplock.core.plumbing.db import describe_db_error, is_connection_error, prepared_statements, session_defaults
from skiplock.core.plumbing.deadline import WATCHDOG
from skiplock.runtime.lanes import SYNC, Lane
from skiplock.runtime.listener import Listener, ListenerHooks
from skiplock.runtime.parts import Connect, WorkerParts

log = logging.getLogger("skiplock.worker")

NOTIFY_CLAIM_WAIT_SECONDS = 0.05  # longest the listener waits for the claim loop's claim of a lane
# After a listener reconnect, how long and how often to look for jobs handed to the lost connection:
# long enough for a producer's transaction that took one of our old tokens to commit.
LOST_HANDOFF_WINDOW_SECONDS = 60.0
LOST_HANDOFF_CHECK_SECONDS = 2.0
# A claim that found some jobs but fewer than it asked for means jobs are arriving one by one. The
# loop then waits this long before it claims again, even when the jobs it just started have finished
# (their finish would wake it at once): the jobs that arrive meanwhile come in one claim. Claiming
# on every finish took a few jobs per claim, and each claim and its ack cost the database as much
# as the producers' inserts (pgbench producers with two workers keeping up: a few milliseconds here
# gave the producers most of what workers that only poll each second leave them). A job that arrives
# while a worker is busy waits at most this much longer; an idle worker's pickup is unchanged (its
# claim found nothing, so it registers as a waiter instead).
ARRIVALS_LINGER_SECONDS = 0.005
# A worker still running jobs shorter than this on average needs no NOTIFY: the first one to finish
# wakes its claim loop within about this long. Registering as a waiter on each short claim would
# make a producer pay for a NOTIFY per claim while workers keep up with the load (migration 015).
WOKEN_BY_FINISH_SECONDS = 0.005
# The longest wait between two claims that found the database unavailable. While the server is down each
# claim already waits for the pool's connection (its timeout), so a short wait adds little load; a longer
# one delayed the first claim after the server came back by as much (plumbing/db.py RECONNECT_MAX_DELAY).
CLAIM_RETRY_MAX_SECONDS = 0.5

StartJobs = Callable[[Lane, list[state_changes.ClaimedJob]], None]


class Claimer:
    """Claims jobs for the worker's lanes and hands them to `start_jobs` (the executor's)."""

    def __init__(self, parts: WorkerParts, queues: list[str], waiting: Waiting, *, start_jobs: StartJobs,
                 claim_connection: Connect, release: Callable[[list[int]], None]) -> None:
        self.settings = parts.settings
        self.worker_id = parts.worker_id
        self.queues = queues
        self.ledger = parts.ledger
        self.lanes = parts.ledger.lanes
        self._lane_of = parts.ledger.lane_of
        self.signals = parts.signals
        self.flow = parts.flow
        self.waiting = waiting  # waiter rows ask producers' insert trigger for a NOTIFY while idle
        self.counters = parts.counters
        self.latency = parts.latency
        self._start_jobs = start_jobs
        self._claim_pool_connection = claim_connection  # the claim loop's own connection (see Worker.run)
        self._rows_connection = parts.rows_connection
        self._row_writes = parts.row_writes  # acks, heartbeats and releases one at a time (see WorkerParts)
        self._release = release  # back to their queues, the run not counted (worker/runtime/shutdown.py)
        # Claim the JobContext columns only when some handler declares `job` (see state_changes.claim).
        self._wants_context = any(task.wants_job for task in parts.flow.tasks.values())
        self.loop_tick = time.monotonic()  # last claim-loop turn, for the health endpoint
        self._claim_backoff = 0.1
        # after a listener reconnect, until this monotonic time: look for hand-offs lost with the old
        # connection (see release_lost_handoffs)
        self._lost_handoffs_until = 0.0
        self.listener: Listener | None = None

    # ---- the claim loop ----------------------------------------------------------------------

    def run(self) -> None:
        """The claim loop: turn until a stop is requested."""
        while not self.signals.stop.is_set():
            self.run_once()

    def run_once(self) -> None:
        """One turn: claim for each lane with enough free slots, then wait as long as the result says."""
        signals = self.signals
        self.loop_tick = time.monotonic()
        signals.wake.clear()
        if signals.quiet.is_set():
            # quieted: claim nothing and register as no waiter; a stop (or SIGTERM) ends the loop
            signals.wake.wait(1.0)
            return
        claimed_full = backed_off = drained = False
        found = 0
        for lane in self.lanes:  # one claim per handler kind, sized from that kind's free slots
            lane.plan = capacity, threshold = lane.sizing.plan()
            held = self.ledger.held_in(lane)
            free, busy = capacity - held, held > 0
            # A claim is a round trip and a commit: take a few places only when nothing is held,
            # else wait until enough are open to be worth it (the executor's finish wakes us at the threshold).
            if free > 0 and (free >= threshold or not busy):
                if not busy and lane.found_nothing and not self._finish_wakes_soon():
                    # Its last claim found nothing, so this one likely would too, and an idle
                    # lane's empty claim is followed by a registration and another claim (below).
                    # Registering first makes this claim that second one (Lane.found_nothing).
                    self.waiting.enter()
                want = min(free, lane.most_per_claim)
                with lane.claiming:  # the listener may be claiming for this lane (on_notify)
                    jobs = self._claim_or_back_off(lane, want)
                    if jobs is not None:
                        self._start_jobs(lane, jobs)
                if jobs is None:
                    backed_off = True  # database unavailable: the back-off has waited already
                    break
                claimed_full = claimed_full or len(jobs) == want
                found += len(jobs)
                drained = drained or len(jobs) < want
        if backed_off:
            return
        if claimed_full:
            # a backlog: claim again as soon as slots allow. A waiter token still out costs the
            # next producer one NOTIFY, once: cheaper than a round trip to take it back here.
            return
        if drained and found:
            signals.stop.wait(ARRIVALS_LINGER_SECONDS)  # jobs arriving one by one: see the constant
            return
        # only a claim that found fewer jobs than it wanted means "idle"; with every slot busy no
        # claim was made, and a NOTIFY is not needed: a finishing job wakes this loop
        if drained and not self._finish_wakes_soon() and self.waiting.enter():
            return  # just registered as a waiter: claim once more, a job may have committed meanwhile
        signals.wake.wait(self.flow.idle_wait(self.queues, self.settings.poll_interval))

    def _finish_wakes_soon(self) -> bool:
        """Some lane runs jobs that end within WOKEN_BY_FINISH_SECONDS: their finish wakes the loop."""
        return any(lane.sizing.handlers_shorter_than(WOKEN_BY_FINISH_SECONDS) for lane in self.ledger.busy_lanes())

    def _claim_or_back_off(self, lane: Lane, want: int) -> list[state_changes.ClaimedJob] | None:
        """Claim for `lane`; on a lost database, wait with a growing back-off and return None."""
        try:
            jobs = self.claim(lane, want)
        except Exception as exc:
            if not is_connection_error(exc):
                raise
            self.counters.claim_errors += 1
            log.warning("claim failed, database unavailable (%s); retrying in %.1fs",
                        describe_db_error(exc), self._claim_backoff)
            self.signals.stop.wait(self._claim_backoff)
            self._claim_backoff = min(self._claim_backoff * 2, CLAIM_RETRY_MAX_SECONDS)
            return None
        self._claim_backoff = 0.1
        return jobs

    def _claim_connection(self, notify_conn: psycopg.Connection | None) -> Any:
        """The connection a claim runs on: the listener's when it claims on a NOTIFY, else the claim loop's."""
        if notify_conn is not None:
            return contextlib.nullcontext(notify_conn)
        return self._claim_pool_connection()

    def claim(self, lane: Lane, limit: int,
              notify_conn: psycopg.Connection | None = None) -> list[state_changes.ClaimedJob]:
        """Claim up to `limit` jobs for `lane` on the claim loop's connection (or the listener's)."""
        started = time.perf_counter()
        with self._claim_connection(notify_conn) as conn:
            jobs = state_changes.claim(conn, self.worker_id, lane.queues, lane.leases, limit, payload_as_text=True,
                                       with_context=self._wants_context,
                                       **self.flow.claim_options(conn, lane.queues, refresh=notify_conn is None))
            self.flow.observe(jobs)
            tracing.remember_contexts(conn, [j.id for j in jobs])  # a no-op without OpenTelemetry
        elapsed = time.perf_counter() - started
        lane.found_nothing = not jobs
        if jobs:  # an empty claim writes nothing, so it skips the commit's WAL flush: not typical
            lane.sizing.observe_claim(elapsed)
        self.latency.observe("claim", elapsed)
        self.latency.observe("claim_batch", len(jobs))
        self.counters.claimed += len(jobs)
        if len(self.counters.claim_seconds) < 10_000:
            self.counters.claim_seconds.append(elapsed)
        return jobs

    # ---- the listener: NOTIFY claims and hand-offs -------------------------------------------

    def new_listener(self, wake: Callable[[], None]) -> Listener:
        """The listener thread: LISTEN, hand-offs, and the claim for an idle lane on its own connection."""
        self.listener = Listener(self.settings.session_url, set(self.queues), wake,
                                 f"skiplock-listener {self.worker_id.rsplit(':', 1)[-1]}",
                                 ListenerHooks(on_connect=self._listening, on_taken=self.waiting.taken,
                                               on_notify=self.on_notify, configure=listener_session,
                                               on_handoff=self._on_handoff))
        return self.listener

    def on_notify(self, conn: psycopg.Connection) -> bool:
        """The listener's NOTIFY: claim for each idle lane on the listener's own connection, now.

        Most of an idle pickup, from the producer's commit to the handler's start, was the claim
        statement on the claim loop's connection, whose backend (and vCPU) had slept since the last
        job: the same claim took a fraction of that back to back. The listener's backend
        has just run to deliver the NOTIFY, and claiming here also saves waking the claim loop
        first. Only a lane holding nothing, and only when the claim loop is not claiming for it.
        True when it started jobs of the sync lane: their handler thread wakes the claim loop, or,
        when the claim left the queue empty and the jobs are short, the lane's last finish does.
        """
        started_sync = False
        for lane in self.lanes:
            # The claim loop may be claiming for this lane now (a poll, or the claim after a finish):
            # its snapshot may predate the job this NOTIFY is about. Wait for it briefly rather than
            # leave the job to the loop's next round (a waiter registration and another claim: the
            # tail of idle pickups); a loop stuck backing off from a lost database is not waited for.
            if not lane.claiming.acquire(timeout=NOTIFY_CLAIM_WAIT_SECONDS):
                continue
            try:
                held = self.ledger.held_in(lane)
                free, idle = lane.plan[0] - held, held == 0
                if idle and free > 0 and self.signals.may_claim():
                    want = min(free, lane.most_per_claim)
                    jobs = self.claim(lane, want, conn)
                    if jobs and lane.kind == SYNC:
                        started_sync = True
                        if len(jobs) < want and lane.sizing.handlers_shorter_than(WOKEN_BY_FINISH_SECONDS):
                            # This claim left the queue empty and its jobs end within milliseconds:
                            # looking again now would find nothing (a claim in the middle of the
                            # batch's starts, competing with them for the CPU). The lane's last
                            # finish wakes the loop, which then registers first and claims once
                            # (Lane.found_nothing). Two workers sent 80 jobs made 6.3 claims a batch.
                            lane.found_nothing = True
                        else:
                            # the claim loop still has to look again (a backlog, or long jobs: it
                            # registers as a waiter while they run): woken by the handler thread once
                            # it has the job, so that this wake-up does not compete with the handler's
                            # own start for the GIL (claimed -> handler start took about half as
                            # long this way as with the listener waking the loop, measured)
                            self.signals.wake_on_start = True
                    self._start_jobs(lane, jobs)
            finally:
                lane.claiming.release()
        return started_sync

    def _listening(self, conn: psycopg.Connection, key: int | None) -> None:
        """The listener (re)connected holding hand-off key `key`: our tokens carry it from now on.

        On a reconnect, a producer may have handed us a job whose NOTIFY went to the lost connection:
        look for such jobs for a while (a producer holding one of our old tokens may commit later)."""
        if self.listener is not None and self.listener.reconnects > 0:
            self._lost_handoffs_until = time.monotonic() + LOST_HANDOFF_WINDOW_SECONDS
        self.waiting.listening(conn, key)

    def _on_handoff(self, conn: psycopg.Connection, payload: str) -> bool | None:
        """A producer's hand-off (migration 020): start the job it claimed for us, with no claim.

        False: another worker's. True: started in the sync lane (its handler thread wakes the claim
        loop, which claims what else is there and registers as a waiter again). None: ours otherwise."""
        worker_id, job = handoff.parse(payload)
        if worker_id != self.worker_id:
            return False
        self.counters.handed_off += 1
        if tracing.enabled():  # the enqueue span's context, for the run span's link
            with WATCHDOG.guard(conn, self.listener.deadline if self.listener else 0.0):
                tracing.remember_contexts(conn, [job.id])
        if not self.signals.may_claim():
            self._release([job.id])  # too late to start it: back to its queue, the run not counted
            return None
        lane = self._lane_of[job.queue]
        if lane.kind != SYNC:  # no handler thread takes it to wake the claim loop
            self._start_jobs(lane, [job])
            return None
        self.signals.wake_on_start = True
        self._start_jobs(lane, [job])
        return True

    def release_lost_handoffs(self) -> None:
        """Within the window after a listener reconnect: release jobs handed to us and never received."""
        if time.monotonic() >= self._lost_handoffs_until:
            return
        known = self.ledger.known_ids()
        with self._row_writes, self._rows_connection() as conn:
            released = handoff.release_lost(conn, self.worker_id, known)
        if released:
            log.warning("released %d job(s) handed to this worker whose NOTIFY was lost with the listener's "
                        "connection: %s", len(released), ",".join(str(job_id) for job_id, _ in released))
            self.signals.wake.set()


def claims_commit_async(conn: Any) -> None:
    """The claim connection's settings: its commits do not wait for the WAL flush (see Worker.run),
    and the claim's own plan settings (state_changes.claim_session)."""
    conn.execute("SET synchronous_commit = off")
    state_changes.claim_session(conn)


def listener_session(conn: Any) -> None:
    """The listener connection's settings. It is not pooled, so db.session_defaults does not run on
    it by itself, yet it runs the claim for an idle lane: with JIT on, each of those claims from a
    big backlog was compiled for far longer than it ran (perf: libLLVM at a drain's start,
    tests/benchmarks/growth.py's backlog state). It connects to
    the session URL, never through a pooler, so its session settings stay its own; the claim's plan
    settings follow the claim connection's (only with prepared statements, as there)."""
    session_defaults(conn)
    if prepared_statements():
        claims_commit_async(conn)
