""""Claimable now" is written three times; this test holds the three to one answer (issue 37).

- the claim (core/sql/jobs_claim.sql, through state_changes.claim): does a worker's claim take the job?
- the insert trigger's hand-off (migrations/functions/skiplock_notify_jobs.sql): is the new job handed
  to the idle worker that waits on its queue?
- "why isn't it running" (monitor/why.py): does it name a reason that holds the job back?

Each case sets up one state (a paused queue, a lock key held by a running job, a full concurrency limit,
a newer payload version, ...) and asks all three about the same job. The claim and "why" must agree on
every case. The hand-off must never take a job the claim would not, and must take every job the claim
would, except where it refuses on purpose (HAND_OFF_REFUSES: the trigger hands over only what it can
give away without the claim's bookkeeping). A fourth copy of a rule, or an edit to one of the three,
fails here.

The condition stays written in each place rather than in one SQL function: the claim's is split between
its per-queue part (paused, limits: the `wanted` CTE) and its per-row part inside the index walk, and the
trigger's and why's ask the same questions of one row; measured, not guessed, in the structure branch's
report.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest

from skiplock import enqueue
from skiplock.core import state_changes
from skiplock.core.features import handoff
from skiplock.core.features.limits import set_limit
from skiplock.core.features.waiting import Waiting
from skiplock.monitor import why

QUEUE = "agree"
LEASE = 30.0
WORKER_VERSION = 1  # the payload version the waiting worker, the live worker row and the claim know
# why's reasons that say the job cannot be claimed now (the others explain a wait: behind, busy, rate)
NOT_CLAIMABLE = {"paused", "scheduled", "lock_key", "concurrency_limit", "version"}


@dataclass(frozen=True)
class Case:
    name: str
    claimable: bool  # what all three must say (the hand-off: unless it refuses this case on purpose)
    options: dict[str, Any] = field(default_factory=dict)  # enqueue()'s keywords for the job
    payload: Any = None
    setup: Callable[[psycopg.Connection], None] = lambda conn: None
    limited: bool = False  # the queue has a limit: the worker names it in `limited`, as its cache does


def _paused(conn: psycopg.Connection) -> None:
    state_changes.pause_queue(conn, QUEUE, "test")


def _running_holder(conn: psycopg.Connection, limited: bool = False, **options: Any) -> None:
    """A job of the queue that is running (claimed by another worker) before the case's job arrives."""
    holder = enqueue(QUEUE, {"holder": True}, **options)
    claimed = state_changes.claim(conn, "holder", [QUEUE], [LEASE], 1, versions=[WORKER_VERSION],
                                  limited=[QUEUE] if limited else None)
    assert [job.id for job in claimed] == [holder]


def _key_taken(conn: psycopg.Connection) -> None:
    _running_holder(conn, lock_key="account-7")


def _limit_full(conn: psycopg.Connection) -> None:
    set_limit(conn, QUEUE, concurrency=1, rate=None)
    _running_holder(conn, limited=True)


def _limit_room(conn: psycopg.Connection) -> None:
    set_limit(conn, QUEUE, concurrency=2, rate=None)


CASES = [
    Case("ready", True),
    Case("paused", False, setup=_paused),
    Case("scheduled", False, options={"delay": 60}),
    Case("newer_version", False, options={"version": WORKER_VERSION + 1}),
    Case("lock_key_free", True, options={"lock_key": "account-7"}),
    Case("lock_key_taken", False, options={"lock_key": "account-7"}, setup=_key_taken),
    Case("concurrency_full", False, setup=_limit_full, limited=True),
    Case("concurrency_room", True, setup=_limit_room, limited=True),
    Case("big_payload", True, payload={"blob": "x" * 7100}),
]
# Claimable, and still not handed over by the trigger, on purpose (skiplock_notify_jobs.sql): a keyed job
# needs the claim's key lock, a limited queue the claim's allowance, and a NOTIFY holds under 8000 bytes.
HAND_OFF_REFUSES = {"lock_key_free", "concurrency_room", "big_payload"}


class Listener:
    """A real connection doing what an idle worker's listener does: LISTEN, hold a key."""

    def __init__(self, url: str) -> None:
        self.conn = psycopg.connect(url, autocommit=True)
        self.conn.execute(f"LISTEN {handoff.HANDOFF_CHANNEL}")
        self.key = handoff.take_listen_key(self.conn)


@pytest.fixture
def listener(db_url: str) -> Iterator[Listener]:
    fake = Listener(db_url)
    yield fake
    fake.conn.close()


def _reset(conn: psycopg.Connection) -> None:
    for table in ("jobs", "queue_waiters", "paused_queues", "queue_limits", "workers"):
        conn.execute(f"DELETE FROM {table}")


def _handed(db_url: str, conn: psycopg.Connection, listener: Listener, case: Case) -> bool:
    """The trigger's answer: enqueued while one worker waits on the queue, is the job handed to it?"""
    _reset(conn)
    case.setup(conn)
    waiting = Waiting(lambda: psycopg.connect(db_url, autocommit=True), "idle", [QUEUE], [LEASE], [WORKER_VERSION])
    waiting.listen_key = listener.key
    assert waiting.enter()
    job_id = enqueue(QUEUE, case.payload or {}, **case.options)
    row = conn.execute("SELECT status::text, worker_id FROM jobs WHERE id = %s", (job_id,)).fetchone()
    assert row is not None
    return row == ("running", "idle")


def _why_and_claim(conn: psycopg.Connection, case: Case) -> tuple[set[str], bool]:
    """why's blocking reasons for the job (a live worker serves the queue, with free slots), then the claim's
    answer: does a claim of that worker take it?"""
    _reset(conn)
    case.setup(conn)
    conn.execute("INSERT INTO workers (id, host, pid, queues, concurrency, in_flight, task_versions) "
                 "VALUES ('live', 'test', 1, %s, 10, 0, %s::jsonb)",
                 ([QUEUE], f'{{"{QUEUE}": {WORKER_VERSION}}}'))
    job_id = enqueue(QUEUE, case.payload or {}, **case.options)
    reasons = why.for_job(conn, job_id)
    assert reasons is not None
    holding = {reason.code for reason in reasons if reason.blocking}
    claimed = state_changes.claim(conn, "live", [QUEUE], [LEASE], 10, versions=[WORKER_VERSION],
                                  limited=[QUEUE] if case.limited else None)
    return holding, job_id in {job.id for job in claimed}


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_the_claim_the_hand_off_and_why_agree_on_what_is_claimable_now(
        db_url: str, conn: psycopg.Connection, listener: Listener, case: Case) -> None:
    handed = _handed(db_url, conn, listener, case)
    holding, claimed = _why_and_claim(conn, case)

    assert claimed == case.claimable, f"the claim: {case.name}"
    assert (not holding & NOT_CLAIMABLE) is case.claimable, f"why ({sorted(holding)}): {case.name}"
    assert handed == (case.claimable and case.name not in HAND_OFF_REFUSES), f"the hand-off: {case.name}"


def test_every_reason_why_gives_for_a_job_that_cannot_be_claimed_has_a_case() -> None:
    """A new way of not being claimable (a reason code in why.py) needs its case here, in all three places."""
    cases_for = {"paused": "paused", "scheduled": "scheduled", "newer_version": "version",
                 "lock_key_taken": "lock_key", "concurrency_full": "concurrency_limit"}
    assert set(cases_for) == {case.name for case in CASES if not case.claimable}
    assert set(cases_for.values()) == NOT_CLAIMABLE
    source = Path(why.__file__).read_text()
    assert all(f'Reason("{code}"' in source for code in NOT_CLAIMABLE)
