"""Workflows through the public API, run by skiplock.tools.testing.drain (the worker's own claim and ack).

Dependencies, the dependency-failure policies, retry of a dead parent, batches and their callbacks,
results, status and the transactional guarantees (a rollback leaves nothing). Multi-process and
SIGKILL scenarios are in tests/fault/test_workflow_crashes.py.
"""

from __future__ import annotations

import psycopg
import pytest

import skiplock
from skiplock import EnqueueError, JobFailed, ResultNotReady
from skiplock.core import state_changes
from skiplock.core.workflows import workflow_ops
from skiplock.tools import testing
from tests.support import workflow_handlers  # registers the wf_* handlers; its LOG_TABLE is used
from tests.support.helpers import scalar


def _log(conn: psycopg.Connection) -> list[tuple[int, str]]:
    conn.execute(workflow_handlers.LOG_TABLE)
    return [(r[0], r[1]) for r in conn.execute("SELECT job_id, queue FROM wf_log ORDER BY seq")]


def _state(conn: psycopg.Connection, job_id: int) -> str | None:
    return scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (job_id,))


def test_fan_out_fan_in_runs_in_order_and_reads_results(conn: psycopg.Connection) -> None:
    lines = skiplock.enqueue_many([("wf_line", {"n": n}) for n in range(1, 6)])
    summary = skiplock.enqueue("wf_summary", {}, depends_on=lines)
    assert skiplock.status(summary).state == "waiting"
    assert skiplock.status(summary).waiting_on == 5
    with pytest.raises(ResultNotReady):
        skiplock.result(summary)

    done = testing.drain()

    ran = [job_id for job_id, _ in _log(conn)]
    assert ran.index(summary) > max(ran.index(i) for i in lines)  # after every parent
    assert skiplock.result(summary) == {"lines": 5, "total": 30}
    assert [d.result for d in done if d.id == summary] == [{"lines": 5, "total": 30}]
    assert skiplock.result(lines[0]) == {"line": 1, "double": 2}
    assert skiplock.status(summary).row_kept is False  # history mode delete: the row went, the result stayed


def test_a_parent_already_done_counts_at_once(conn: psycopg.Connection) -> None:
    parent = skiplock.enqueue("wf_line", {"n": 2})
    testing.drain()
    assert _state(conn, parent) is None  # succeeded and deleted
    child = skiplock.enqueue("wf_summary", {}, depends_on=[parent])
    assert _state(conn, child) == "queued"  # released at its own commit
    testing.drain()
    assert skiplock.result(child) == {"lines": 1, "total": 4}


def test_unknown_parent_is_an_enqueue_error_and_the_transaction_goes_on(db_url: str) -> None:
    with psycopg.connect(db_url) as conn:
        kept = skiplock.enqueue("wf_line", {"n": 1}, conn=conn)
        with pytest.raises(EnqueueError, match="unknown job id"):
            skiplock.enqueue("wf_summary", {}, depends_on=[kept, 10**12], conn=conn)
        with pytest.raises(EnqueueError, match="unknown job id"):
            skiplock.enqueue("wf_summary", {}, depends_on=[kept + 1000], conn=conn)  # a later job: a cycle
        conn.commit()
        assert scalar(conn, "SELECT count(*) FROM jobs") == 1
        assert scalar(conn, "SELECT count(*) FROM job_deps") == 0


@pytest.mark.parametrize("bad", [[True], ["7"], [0], [-3], 5, "1,2", [1.5]])
def test_bad_depends_on_is_refused_before_anything_is_written(conn: psycopg.Connection, bad: object) -> None:
    with pytest.raises(EnqueueError, match="depends_on"):
        skiplock.enqueue("wf_summary", {}, depends_on=bad)  # type: ignore[call-overload]
    assert scalar(conn, "SELECT count(*) FROM jobs") == 0


def test_unique_key_and_bad_policy_are_refused(conn: psycopg.Connection) -> None:
    parent = skiplock.enqueue("wf_line", {"n": 1})
    with pytest.raises(EnqueueError, match="unique_key"):
        skiplock.enqueue("wf_summary", {}, depends_on=[parent], unique_key="k")
    with pytest.raises(EnqueueError, match="on_dependency_failure"):
        skiplock.enqueue("wf_summary", {}, depends_on=[parent], on_dependency_failure="ignore")
    assert scalar(conn, "SELECT count(*) FROM jobs") == 1


def test_the_async_producer_links_jobs_as_the_sync_one_does(conn: psycopg.Connection, db_url: str) -> None:
    """enqueue_async / enqueue_many_async with depends_on: the same linked insert (core/linked_insert.py), on
    the async pool and on the caller's own AsyncConnection; an unknown parent writes nothing."""
    import asyncio

    from skiplock.core.producer_async import close_default_async_pool

    async def scenario() -> int:
        try:
            lines = await skiplock.enqueue_many_async([("wf_line", {"n": n}) for n in (1, 2)])
            async with await psycopg.AsyncConnection.connect(db_url) as own:
                summary = await skiplock.enqueue_async("wf_summary", {}, depends_on=lines, conn=own)
                with pytest.raises(EnqueueError, match="unknown job id"):
                    await skiplock.enqueue_many_async([("wf_summary", {})], depends_on=[10**12], conn=own)
                await own.commit()
            with pytest.raises(EnqueueError, match="unknown job id"):
                await skiplock.enqueue_async("wf_summary", {}, depends_on=[10**12])
            return summary
        finally:
            await close_default_async_pool()

    summary = asyncio.run(scenario())
    assert skiplock.status(summary).state == "waiting" and skiplock.status(summary).waiting_on == 2
    assert scalar(conn, "SELECT count(*) FROM jobs") == 3  # the refused ones wrote nothing
    testing.drain()
    assert skiplock.result(summary) == {"lines": 2, "total": 6}


def test_a_rolled_back_dag_leaves_nothing(db_url: str) -> None:
    with psycopg.connect(db_url) as conn:
        a = skiplock.enqueue("wf_line", {"n": 1}, conn=conn)
        b = skiplock.enqueue("wf_line", {"n": 2}, conn=conn, depends_on=[a])
        skiplock.enqueue("wf_summary", {}, conn=conn, depends_on=[a, b])
        with skiplock.batch(on_complete=("wf_callback", {}), conn=conn) as batch:
            batch.enqueue("wf_line", {"n": 3}, depends_on=[b])
        conn.rollback()
        for table in ("jobs", "job_deps", "job_batches", "job_results"):
            assert scalar(conn, f"SELECT count(*) FROM {table}") == 0, table


def test_a_dead_parent_ends_its_dependents_transitively(conn: psycopg.Connection) -> None:
    ok = skiplock.enqueue("wf_line", {"n": 1})
    bad = skiplock.enqueue("wf_boom", {"n": 7})
    child = skiplock.enqueue("wf_summary", {}, depends_on=[ok, bad])
    grandchild = skiplock.enqueue("wf_summary", {}, depends_on=[child])
    cleanup = skiplock.enqueue("wf_cleanup", {}, depends_on=[ok, bad], on_dependency_failure="run")

    testing.drain()

    ran = {job_id for job_id, _ in _log(conn)}
    assert child not in ran and grandchild not in ran  # never started
    for job_id in (child, grandchild):
        assert _state(conn, job_id) == "dead"
    assert scalar(conn, "SELECT last_error FROM jobs WHERE id = %s", (child,)) == (
        f"dependency {bad} dead: ValueError: boom 7")
    assert scalar(conn, "SELECT last_error FROM jobs WHERE id = %s", (grandchild,)).startswith(
        f"dependency {child} dead: dependency {bad} dead")
    with pytest.raises(JobFailed) as failed:
        skiplock.result(grandchild)
    assert failed.value.state == "dead"
    # the clean-up ran anyway and saw each parent's final state
    assert skiplock.result(cleanup) == {"states": {str(ok): "succeeded", str(bad): "dead"}}


def test_retrying_a_dead_parent_releases_the_dependents_that_ended_with_it(conn: psycopg.Connection) -> None:
    flaky = skiplock.enqueue("wf_flaky", {})
    child = skiplock.enqueue("wf_cleanup", {}, depends_on=[flaky])
    grandchild = skiplock.enqueue("wf_cleanup", {}, depends_on=[child])
    testing.drain()
    assert (_state(conn, flaky), _state(conn, child), _state(conn, grandchild)) == ("dead", "dead", "dead")

    # retrying a casualty alone does nothing useful, and says why
    assert state_changes.retry_finished(conn, [child]) == [child]
    assert _state(conn, child) == "dead"
    assert "retry it instead" in scalar(conn, "SELECT last_error FROM jobs WHERE id = %s", (child,))

    conn.execute("CREATE TABLE IF NOT EXISTS wf_switch (on_ boolean)")
    conn.execute("INSERT INTO wf_switch VALUES (true)")
    assert workflow_ops.retry_dead(conn, flaky) == 1  # the root cause only; its casualties wait again
    assert (_state(conn, child), _state(conn, grandchild)) == ("waiting", "waiting")
    testing.drain()
    assert skiplock.result(flaky) == "fixed"
    assert skiplock.result(child) == {"states": {str(flaky): "succeeded"}}
    assert skiplock.result(grandchild) == {"states": {str(child): "succeeded"}}


def test_cancelling_a_job_cancels_its_dependents_and_the_rest_of_the_workflow(conn: psycopg.Connection) -> None:
    root = skiplock.enqueue("wf_line", {"n": 1})
    a = skiplock.enqueue("wf_line", {"n": 2}, depends_on=[root])
    b = skiplock.enqueue("wf_summary", {}, depends_on=[a])
    other = skiplock.enqueue("wf_line", {"n": 3}, depends_on=[root])
    assert state_changes.cancel_queued(conn, [a], "ops") == [a]
    assert (_state(conn, a), _state(conn, b)) == ("failed", "failed")
    assert scalar(conn, "SELECT last_error FROM jobs WHERE id = %s", (b,)).startswith(f"dependency {a} cancelled")
    assert _state(conn, other) == "waiting"

    result = workflow_ops.cancel_rest(conn, root, "ops")
    assert result.cancelled == 2  # root (queued) and other (waiting)
    assert (_state(conn, root), _state(conn, other)) == ("failed", "failed")
    assert testing.drain() == []


def test_a_batch_calls_back_once_with_its_counts(conn: psycopg.Connection) -> None:
    with skiplock.batch(on_complete=("wf_callback", {"report": "all"}),
                        on_success=("wf_callback", {"report": "ok"})) as batch:
        members = [batch.enqueue("wf_line", {"n": n}) for n in range(3)]
        members += batch.enqueue_many([("wf_boom", {"n": 9})])
    assert scalar(conn, "SELECT total FROM job_batches WHERE id = %s", (batch.id,)) == 4
    testing.drain()
    callbacks = conn.execute("SELECT seen FROM wf_log WHERE queue = 'wf_callback'").fetchall()
    assert [c[0] for c in callbacks] == [{"batch": batch.id, "total": 4, "succeeded": 3, "dead": 1,
                                          "cancelled": 0, "payload": {"report": "all"}}]  # on_success: not run
    info = skiplock.status(members[0])
    assert info.state == "succeeded"


def test_a_batch_of_successes_runs_both_callbacks_and_an_empty_batch_calls_back(conn: psycopg.Connection) -> None:
    with skiplock.batch(on_complete=("wf_callback", {"k": "complete"}),
                        on_success=("wf_callback", {"k": "success"})) as batch:
        batch.enqueue("wf_line", {"n": 1})
    with skiplock.batch(on_complete=("wf_callback", {"k": "empty"})) as empty:
        pass
    assert scalar(conn, "SELECT called_back_at IS NOT NULL FROM job_batches WHERE id = %s", (empty.id,))
    testing.drain()
    seen = sorted(r[0]["payload"]["k"] for r in conn.execute("SELECT seen FROM wf_log WHERE queue = 'wf_callback'"))
    assert seen == ["complete", "empty", "success"]


def test_a_finished_batch_takes_no_members_and_an_open_one_does(conn: psycopg.Connection) -> None:
    with skiplock.batch(on_complete=("wf_callback", {})) as batch:
        first = batch.enqueue("wf_line", {"n": 1})
    with skiplock.batch(id=batch.id) as again:  # e.g. from a member's handler, while it runs
        again.enqueue("wf_line", {"n": 2})
    assert scalar(conn, "SELECT total FROM job_batches WHERE id = %s", (batch.id,)) == 2
    testing.drain()
    assert skiplock.status(first).state == "succeeded"
    with pytest.raises(EnqueueError, match="already called back"), skiplock.batch(id=batch.id) as late:
        late.enqueue("wf_line", {"n": 3})
    assert scalar(conn, "SELECT count(*) FROM wf_log WHERE queue = 'wf_callback'") == 1


def test_purge_leaves_a_tombstone_that_wait_and_late_dependents_read(conn: psycopg.Connection) -> None:
    bad = skiplock.enqueue("wf_boom", {"n": 1})
    testing.drain()
    assert state_changes.purge_finished(conn, [bad]) == [bad]
    with pytest.raises(JobFailed, match="dead"):
        skiplock.result(bad)
    late = skiplock.enqueue("wf_summary", {}, depends_on=[bad])
    assert _state(conn, late) == "dead"


def test_wait_returns_the_result_or_raises_the_final_state(db_url: str, conn: psycopg.Connection) -> None:
    job = skiplock.enqueue("wf_line", {"n": 21})
    with pytest.raises(TimeoutError):
        skiplock.wait(job, timeout=0.2)
    testing.drain()
    assert skiplock.wait(job, timeout=5) == {"line": 21, "double": 42}
    bad = skiplock.enqueue("wf_boom", {"n": 2})
    testing.drain()
    with pytest.raises(JobFailed) as failed:
        skiplock.wait(bad, timeout=5)
    assert failed.value.state == "dead" and "boom 2" in (failed.value.error or "")
    with pytest.raises(skiplock.JobNotFound):
        skiplock.wait(10**12, timeout=1)
    assert scalar(conn, "SELECT count(*) FROM job_watchers") == 0


def test_a_job_finished_outside_skiplock_is_found_by_the_sweeper(conn: psycopg.Connection) -> None:
    """The case the normal path cannot see: a parent finished by a hand-written UPDATE."""
    from skiplock.core.workflows.workflow_repair import find, repair
    from skiplock.monitor.doctor import check_workflows

    parent = skiplock.enqueue("wf_line", {"n": 4})
    child = skiplock.enqueue("wf_cleanup", {}, depends_on=[parent])
    conn.execute("UPDATE jobs SET status = 'succeeded', finished_at = now() WHERE id = %s", (parent,))
    assert _state(conn, child) == "waiting"
    assert testing.drain() == []  # nothing is ready: the child is stranded

    assert find(conn, grace=0).stranded_parents == [parent]
    assert check_workflows(conn, None, grace=0).status == "fail"  # type: ignore[arg-type]
    sweep = repair(conn, grace=0)
    assert sweep.stranded_parents == [parent]
    assert _state(conn, child) == "queued"
    assert find(conn, grace=0).found == 0
    assert check_workflows(conn, None, grace=0).status == "ok"  # type: ignore[arg-type]
    testing.drain()
    assert skiplock.status(child).state == "succeeded"


def test_the_sweeper_calls_back_a_batch_whose_last_member_was_deleted_by_hand(conn: psycopg.Connection) -> None:
    with skiplock.batch(on_complete=("wf_callback", {})) as batch:
        member = batch.enqueue("wf_line", {"n": 1})
    conn.execute("DELETE FROM jobs WHERE id = %s", (member,))  # outside skiplock: no settle
    from skiplock.core.workflows.workflow_repair import repair

    sweep = repair(conn, grace=0)
    assert sweep.recounted_batches == [batch.id]
    assert scalar(conn, "SELECT complete_job_id IS NOT NULL FROM job_batches WHERE id = %s", (batch.id,))
    assert repair(conn, grace=0).found == 0  # exactly once
    testing.drain()
    assert scalar(conn, "SELECT count(*) FROM wf_log WHERE queue = 'wf_callback'") == 1


def test_a_result_too_large_is_not_stored_and_reading_it_says_why_and_an_unstorable_one_is_skipped(
        conn: psycopg.Connection) -> None:
    big = skiplock.enqueue("wf_big", {})
    odd = skiplock.enqueue("wf_object", {})
    testing.drain()
    assert skiplock.status(big).state == "succeeded"  # its work is done: the job is not failed for its return
    with pytest.raises(skiplock.ResultTooLarge, match=r"over the limit of 262144 \(SKIPLOCK_MAX_RESULT_BYTES\)"):
        skiplock.result(big)
    assert skiplock.status(odd).state == "succeeded"
    with pytest.raises(skiplock.ResultNotStored, match="the handler returned object, which JSON cannot hold"):
        skiplock.result(odd)


def test_a_decimal_or_datetime_result_is_never_dropped_silently(conn: psycopg.Connection) -> None:
    """A fan-in reading the result of a handler that returned a Decimal or a datetime gets the reason
    (ResultNotStored), where it used to get None and fail far away."""
    ids = {kind: skiplock.enqueue(f"wf_{kind.lower()}", {}) for kind in ("Decimal", "datetime")}
    testing.drain()
    for kind, job_id in ids.items():
        assert skiplock.status(job_id).state == "succeeded"  # its work is done
        reason = f"the handler returned {kind}, which JSON cannot hold .*the job succeeded but its result was not"
        with pytest.raises(skiplock.ResultNotStored, match=reason):
            skiplock.result(job_id)
