"""Workflows under SIGKILL: a random DAG of 1,000 jobs (up to 5 parents each) with two batches,
three real workers, one of them killed and replaced again and again while it drains.

The books at the end:
- every job ran only after all its parents' successes were committed (each run counts, at its
  start, the parents' effects it can see: always all of them);
- each job's effect landed exactly once (handlers write it with job.complete(conn));
- nothing lost, nothing stranded: no job left waiting, queued or running, none dead;
- each batch called back exactly once, with its members' counts.
The parent's ack and its dependents' release are one statement (skiplock_settle), so a kill that
lands "between" them lands before the statement's commit or after it; kills at random points
through the drain cover both, and members of the batches finishing around a kill.
"""

from __future__ import annotations

import random
from typing import Any

import psycopg
import pytest

import skiplock
from tests.fault.books import RESULTS
from tests.fault.conftest import FAST_RECOVERY, settle_killed, stop
from tests.support.helpers import scalar, wait_for

NODES = 1000
CHUNK = 50  # enqueued together; a node's parents come from earlier chunks
MAX_PARENTS = 5
BATCH_CHUNKS = (3, 10)  # these chunks are the members of a batch each
KILLS = 4
SETTINGS = {**FAST_RECOVERY, "SKIPLOCK_CONCURRENCY": "8", "SKIPLOCK_TASKS": "tests.support.dag_handlers",
            "SKIPLOCK_SWEEP_INTERVAL": "1"}


def _unfinished(conn: psycopg.Connection) -> int:
    return int(scalar(conn, "SELECT count(*) FROM jobs WHERE status IN ('waiting', 'queued', 'running')"))


def _effects(conn: psycopg.Connection) -> int:
    return int(scalar(conn, "SELECT count(*) FROM dag_effects"))


def _enqueue_dag(conn: psycopg.Connection, rng: random.Random) -> tuple[list[int], dict[int, list[int]], list[int]]:
    ids: list[int] = []
    parents_of: dict[int, list[int]] = {}
    batches: list[int] = []
    for chunk in range(NODES // CHUNK):
        earlier = list(ids)
        items: list[dict[str, Any]] = []
        for _ in range(CHUNK):
            parents = rng.sample(earlier, rng.randint(0, min(MAX_PARENTS, len(earlier)))) if earlier else []
            items.append({"queue": "dag_node", "payload": {"chunk": chunk}, "depends_on": parents})
        if chunk in BATCH_CHUNKS:
            with skiplock.batch(on_complete=("dag_cb", {"chunk": chunk}), conn=conn) as batch:
                new = batch.enqueue_many(items)
            batches.append(batch.id)
        else:
            new = skiplock.enqueue_many(items, conn=conn)
        conn.commit()
        for job_id, item in zip(new, items, strict=True):
            parents_of[job_id] = item["depends_on"]
        ids += new
    return ids, parents_of, batches


@pytest.mark.slow
def test_random_dag_under_sigkill(db_url: str, spawn_worker) -> None:
    rng = random.Random(33)
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE dag_starts (job_id bigint, attempt int, parents int, parents_done int)")
        conn.execute("CREATE TABLE dag_effects (job_id bigint, attempt int)")
    with psycopg.connect(db_url) as tx:
        ids, parents_of, batches = _enqueue_dag(tx, rng)
    conn = psycopg.connect(db_url, autocommit=True)
    workers = [spawn_worker(**SETTINGS) for _ in range(3)]
    for kill in range(KILLS):
        target = (kill + 1) * NODES // (KILLS + 2)
        wait_for(lambda: _effects(conn) >= target or _unfinished(conn) == 0,  # noqa: B023 (called in this iteration)
                 timeout=120, message=f"{target} effects before kill {kill + 1}")
        victim = workers.pop(rng.randrange(len(workers)))
        victim.kill()
        settle_killed(conn, victim.pid)
        workers.append(spawn_worker(**SETTINGS))

    wait_for(lambda: _unfinished(conn) == 0 and scalar(
        conn, "SELECT count(*) FROM job_batches WHERE called_back_at IS NULL") == 0,
        timeout=240, message="every job final and every batch called back")
    wait_for(lambda: _effects(conn) >= NODES + len(batches), timeout=120, message="the callbacks' effects")
    for w in workers:
        assert stop(w, conn) == 0

    effects: dict[int, int] = dict(conn.execute("SELECT job_id, count(*) FROM dag_effects GROUP BY job_id").fetchall())
    lost = [i for i in ids if i not in effects]
    twice = {i: n for i, n in effects.items() if n > 1}
    early = conn.execute("SELECT job_id, attempt, parents, parents_done FROM dag_starts "
                         "WHERE parents_done <> parents").fetchall()
    dead = scalar(conn, "SELECT count(*) FROM jobs WHERE status IN ('dead', 'failed')")
    batch_rows = conn.execute("SELECT id, total, succeeded, dead, pending, complete_job_id FROM job_batches "
                              "ORDER BY id").fetchall()
    callback_runs = conn.execute("SELECT e.job_id FROM dag_effects e JOIN job_results r ON r.job_id = e.job_id "
                                 "WHERE e.job_id = ANY(%s)", ([b[5] for b in batch_rows],)).fetchall()
    restarts = scalar(conn, "SELECT count(*) FROM dag_starts") - NODES - len(batches)
    edges = sum(len(p) for p in parents_of.values())
    books = {"scenario": "workflow_dag_sigkill", "enqueued": len(ids), "edges": edges, "completed": len(effects),
             "lost": len(lost), "duplicated": len(twice), "started_early": len(early), "dead": dead,
             "kills": KILLS, "reruns_after_kills": restarts}
    RESULTS.append(books)  # printed with the fault suite's books
    print(books)
    assert lost == [] and twice == {}
    assert early == []  # no run started before all its parents' successes were committed
    assert dead == 0
    # the parents recorded are the ones each run saw through job.parent_states
    assert scalar(conn, "SELECT count(*) FROM dag_starts WHERE parents > 0") >= 1
    assert [(b[1], b[2], b[3], b[4]) for b in batch_rows] == [(CHUNK, CHUNK, 0, 0)] * len(batches)
    assert len(callback_runs) == len(batches)  # each batch: one callback job, its effect once
    assert scalar(conn, "SELECT count(*) FROM dag_effects WHERE job_id = ANY(%s)",
                  ([b[5] for b in batch_rows],)) == len(batches)
    conn.close()
