"""enqueue(..., unique_key=k, unique_for=seconds): the key outlives its job, holds across racing producer
processes, and expires without a table scan (the pruner deletes expired keys through their index)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections import defaultdict
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest

from skiplock import EnqueueError, enqueue, enqueue_async
from skiplock.core.plumbing.config import load_settings
from skiplock.core.plumbing.db import make_pool
from skiplock.core.producer_async import close_default_async_pool
from skiplock.services.pruner import Pruner
from tests.support.helpers import scalar, wait_for
from tests.support.workers import REPO


def counts(conn: psycopg.Connection) -> tuple[int, int]:
    return (scalar(conn, "SELECT count(*) FROM jobs"), scalar(conn, "SELECT count(*) FROM unique_keys"))


def test_second_enqueue_within_the_window_returns_the_first_job_after_it_finished(conn, spawn_worker):
    first = enqueue("t1", {"n": 1}, unique_key="webhook:42", unique_for=3600)
    assert enqueue("t1", {"n": 2}, unique_key="webhook:42", unique_for=3600) == first
    worker = spawn_worker()
    # the first job runs and is gone (history mode delete, or succeeded): the key still holds
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM test_effects WHERE job_id = %s", (first,)) == 1)
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE id = %s AND status IN ('queued', 'running')",
                            (first,)) == 0, message="the first job to finish")
    assert worker.terminate() == 0
    before = counts(conn)
    key_row = conn.execute("SELECT job_id, created_at, expires_at FROM unique_keys").fetchall()
    assert enqueue("t1", {"n": 3}, unique_key="webhook:42", unique_for=timedelta(hours=1)) == first
    assert counts(conn) == before  # wrote nothing
    assert conn.execute("SELECT job_id, created_at, expires_at FROM unique_keys").fetchall() == key_row
    assert scalar(conn, "SELECT count(*) FROM test_effects") == 1


def test_enqueue_async_holds_the_key_too_on_its_pool_and_inside_a_callers_transaction(conn, db_url):
    async def run() -> tuple[int | None, ...]:
        try:
            first = await enqueue_async("t1", {"n": 1}, unique_key="async:1", unique_for=3600)
            again = await enqueue_async("t1", {"n": 2}, unique_key="async:1", unique_for=3600)
            async with await psycopg.AsyncConnection.connect(db_url) as mine:
                inside = await enqueue_async("t1", {"n": 3}, unique_key="async:2", unique_for=60, conn=mine)
                await mine.rollback()  # the caller's transaction rolls back: no job, no key
            after = await enqueue_async("t1", {"n": 4}, unique_key="async:2", unique_for=60)
            with pytest.raises(EnqueueError, match="unique_for needs a unique_key"):
                await enqueue_async("t1", {}, unique_for=60)  # type: ignore[call-overload]  # refused on purpose
            return first, again, inside, after
        finally:
            await close_default_async_pool()

    first, again, inside, after = asyncio.run(run())
    assert again == first and after != inside
    conn.execute("DELETE FROM jobs WHERE id = %s", (first,))  # the first job is done: its key still holds
    assert asyncio.run(_enqueue_closing("async:1")) == first
    assert counts(conn) == (1, 2)
    assert scalar(conn, "SELECT job_id FROM unique_keys WHERE key = 'async:2'") == after


async def _enqueue_closing(key: str) -> int | None:
    try:
        return await enqueue_async("t1", {"n": 5}, unique_key=key, unique_for=3600)
    finally:
        await close_default_async_pool()


def test_the_in_flight_index_still_collapses_a_plain_unique_key(conn):
    first = enqueue("t1", {}, unique_key="invoice:9", unique_for=60)
    assert enqueue("t1", {}, unique_key="invoice:9") is None
    # a key enqueued first without unique_for: the windowed enqueue adopts the job in flight
    plain = enqueue("t1", {}, unique_key="invoice:10")
    assert enqueue("t1", {}, unique_key="invoice:10", unique_for=60) == plain
    assert enqueue("t1", {}, unique_key="invoice:10", unique_for=60) == plain
    assert scalar(conn, "SELECT job_id FROM unique_keys WHERE key = 'invoice:10'") == plain
    assert counts(conn) == (2, 2) and first != plain


def test_an_expired_key_is_taken_again_and_the_pruner_deletes_only_expired_keys(conn, db_url):
    first = enqueue("t1", {}, unique_key="short", unique_for=0.2)
    enqueue("t1", {}, unique_key="long", unique_for=3600)
    conn.execute("DELETE FROM jobs")  # the first jobs are done; only the keys remain
    wait_for(lambda: scalar(conn, "SELECT expires_at < now() FROM unique_keys WHERE key = 'short'"),
             message="the short key to expire")
    pool = make_pool(db_url, "skiplock-test-prune", size=1, open_wait=True)
    try:
        Pruner(pool, load_settings()).run_once()
    finally:
        pool.close()
    assert [r[0] for r in conn.execute("SELECT key FROM unique_keys")] == ["long"]
    again = enqueue("t1", {}, unique_key="short", unique_for=0.2)
    assert again != first and scalar(conn, "SELECT count(*) FROM jobs WHERE id = %s", (again,)) == 1
    # an expired key the pruner has not reached yet is taken again too; its job still queued is in flight,
    # so the new window adopts it (the seed's in-flight index) instead of inserting a second one
    wait_for(lambda: scalar(conn, "SELECT expires_at < now() FROM unique_keys WHERE key = 'short'"))
    assert enqueue("t1", {}, unique_key="short", unique_for=60) == again
    assert scalar(conn, "SELECT count(*) FROM jobs") == 1
    assert scalar(conn, "SELECT expires_at > now() + interval '50 s' FROM unique_keys WHERE key = 'short'")


def test_prune_reads_the_expiry_index_not_the_table(conn):
    conn.execute("INSERT INTO unique_keys (key, job_id, expires_at) "
                 "SELECT 'k' || g, g, now() + interval '1 hour' FROM generate_series(1, 20000) g")
    conn.execute("ANALYZE unique_keys")
    plan = "\n".join(r[0] for r in conn.execute(
        "EXPLAIN DELETE FROM unique_keys WHERE key IN "
        "(SELECT key FROM unique_keys WHERE expires_at < now() ORDER BY expires_at LIMIT 1000)"))
    assert "unique_keys_expires_at_idx" in plan and "Seq Scan" not in plan


def test_a_rolled_back_enqueue_does_not_hold_the_key(conn, db_url):
    with psycopg.connect(db_url) as tx:
        enqueue("t1", {}, unique_key="tx", unique_for=60, conn=tx)
        tx.rollback()
    assert counts(conn) == (0, 0)
    kept = enqueue("t1", {}, unique_key="tx", unique_for=60)
    assert scalar(conn, "SELECT id FROM jobs") == kept


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"unique_for": 60}, "needs a unique_key"),
    ({"unique_key": "k", "unique_for": 0}, "positive number"),
    ({"unique_key": "k", "unique_for": "1h"}, "positive number"),
    ({"unique_key": "k", "unique_for": float("inf")}, "positive number"),
    ({"unique_key": "k", "unique_for": 60, "on_conflict": "replace"}, "on_conflict"),
    ({"unique_key": "k", "unique_for": 60, "depends_on": [1]}, "depends_on"),
])
def test_bad_unique_for_is_a_clear_error_and_writes_nothing(conn, kwargs, message):
    with pytest.raises(EnqueueError, match=message):
        enqueue("t1", {}, **kwargs)
    assert counts(conn) == (0, 0)


def test_eight_racing_producer_processes_enqueue_each_key_exactly_once(conn, db_url, tmp_path: Path):
    keys, producers = 1000, 8
    start = tmp_path / "go"
    env = {**os.environ, "DATABASE_URL": db_url, "SKIPLOCK_POOL_SIZE": "1"}
    # 20 calls per key over the 8 processes: four do 3 rounds, four do 2
    procs = [subprocess.Popen([sys.executable, "-m", "tests.support.unique_for_producer", str(keys),
                               str(3 if p < 4 else 2), str(p), str(start)],
                              cwd=REPO, env=env, stdout=subprocess.PIPE, text=True) for p in range(producers)]
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        start.touch()  # all connect first, then race
        outputs = [p.communicate(timeout=300)[0] for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert [p.returncode for p in procs] == [0] * producers
    returned: dict[int, set[int]] = defaultdict(set)
    calls = 0
    for out in outputs:
        for line in out.strip().splitlines():
            key, job_id = line.split()
            returned[int(key)].add(int(job_id))
            calls += 1
    assert calls == keys * 20
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE queue = 'uf'") == keys
    assert scalar(conn, "SELECT count(*) FROM unique_keys") == keys
    stored = dict(conn.execute("SELECT (payload->>'k')::int, id FROM jobs WHERE queue = 'uf'").fetchall())
    # every call for a key got the one job that exists for it
    assert {k: ids for k, ids in returned.items()} == {k: {stored[k]} for k in range(keys)}
