"""Jobs linked to other jobs at enqueue: parents (`depends_on`) and batch membership.

A linked job is written by one statement (statements.ENQUEUE_LINKED) that also writes its edges and
counts it into its batch, so an autocommit connection cannot keep half of it. Everything a caller
can get wrong is checked first and raises EnqueueError before anything is written; unknown parent
ids are looked up with a read-only query, so the caller's transaction stays usable. What happens
when a parent finishes is the database's business (migration 026's skiplock_settle), in the
parent's own finalising statement. The design: docs/explanation/workflows-design.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from skiplock.core import statements
from skiplock.core.errors import EnqueueError
from skiplock.core.plumbing import adapters

# What a dependent does when a parent ends dead or cancelled: end with it (the default) or run anyway.
DEPENDENCY_POLICIES = ("dead", "run")
MAX_PARENTS = 100_000  # one fan-in job may wait on this many parents


def parent_ids(depends_on: object) -> list[int]:
    """`depends_on` as a list of distinct job ids in the given order; EnqueueError on anything else."""
    if isinstance(depends_on, int | str | bytes | Mapping) or not isinstance(depends_on, Iterable):
        raise EnqueueError(f"depends_on must be a list of job ids, got {type(depends_on).__name__}")
    ids: list[int] = []
    seen: set[int] = set()
    for item in depends_on:
        if isinstance(item, bool) or not isinstance(item, int):
            raise EnqueueError(f"depends_on must hold job ids (int), got {item!r}")
        if not 0 < item < 2**63:
            raise EnqueueError(f"depends_on: {item} is not a job id")
        if item not in seen:
            seen.add(item)
            ids.append(item)
    if len(ids) > MAX_PARENTS:
        raise EnqueueError(f"depends_on names {len(ids)} jobs, more than {MAX_PARENTS}")
    return ids


def policy_value(on_dependency_failure: object) -> str | None:
    """The column value of a dependency policy: NULL for the default 'dead', 'run' for run."""
    if on_dependency_failure not in DEPENDENCY_POLICIES:
        raise EnqueueError(f"on_dependency_failure must be one of {', '.join(map(repr, DEPENDENCY_POLICIES))}, "
                           f"got {on_dependency_failure!r}")
    return None if on_dependency_failure == "dead" else "run"


def refuse_unique(unique_key: object) -> None:
    """A linked job cannot collapse onto another by unique_key: its parents' or batch's counters
    would count a job that was never inserted, and never reach zero."""
    if unique_key is not None:
        raise EnqueueError("unique_key cannot be combined with depends_on or a batch "
                           "(a collapsed insert would leave a counter that never reaches zero)")


def check_parents_exist(raw: Any, parents: Sequence[int]) -> None:
    """EnqueueError naming the ids that are not jobs (nor were): nothing has been written yet."""
    if not parents:
        return
    rows = _run(raw, statements.UNKNOWN_PARENTS, {"parents": list(parents)})
    unknown = rows[0][0] if rows else []
    if unknown:
        raise unknown_parents_error(unknown)


def insert_linked(raw: Any, specs: Sequence[Any], parents: Sequence[Sequence[int]], policies: Sequence[str | None],
                  batch: int | None = None) -> list[int]:
    """Insert validated JobSpecs, each with its parents and policy, optionally into `batch`; their ids.

    `raw` is the caller's connection (its transaction) or None for a pooled one.
    """
    check_parents_exist(raw, sorted({p for ps in parents for p in ps}))
    ids = [row[0] for row in _run(raw, statements.ENQUEUE_LINKED, linked_params(specs, parents, policies, batch))]
    return _checked_ids(ids, specs, batch)


def unknown_parents_error(unknown: Sequence[int]) -> EnqueueError:
    return EnqueueError(f"depends_on: unknown job id(s) {', '.join(map(str, unknown))} "
                        "(a parent must exist before its dependent: that also rules out cycles)")


def _checked_ids(ids: list[int], specs: Sequence[Any], batch: int | None) -> list[int]:
    if batch is not None and len(ids) != len(specs):
        raise EnqueueError(f"batch {batch} has already called back (or does not exist): it takes no more members")
    return ids


def linked_params(specs: Sequence[Any], parents: Sequence[Sequence[int]], policies: Sequence[str | None],
                  batch: int | None) -> dict[str, Any]:
    """ENQUEUE_LINKED's parameters: the specs' parallel arrays, each job's parents as an array literal."""
    for spec in specs:
        refuse_unique(spec.unique_key)
    return {
        "queues": [s.queue for s in specs], "payloads": [s.payload_json for s in specs],
        "priorities": [s.priority for s in specs], "run_ats": [s.run_at for s in specs],
        "max_attempts": [s.max_attempts for s in specs], "lock_keys": [s.lock_key for s in specs],
        "tenants": [s.tenant for s in specs], "versions": [s.version for s in specs],
        "parents": ["{" + ",".join(map(str, ps)) + "}" if ps else None for ps in parents], "policies": list(policies),
        "batch": batch,
    }


async def insert_linked_async(conn: Any, specs: Sequence[Any], parents: Sequence[Sequence[int]],
                              policies: Sequence[str | None], batch: int | None = None) -> list[int]:
    """insert_linked for asyncio: `conn` any connection enqueue_async accepts, or None for the async pool."""
    from skiplock.core.producer_async import _execute

    wanted = sorted({p for ps in parents for p in ps})
    if wanted:
        rows = await _execute(conn, statements.UNKNOWN_PARENTS, {"parents": wanted})
        unknown = list(rows[0][0]) if rows else []
        if unknown:
            raise unknown_parents_error(unknown)
    params = linked_params(specs, parents, policies, batch)
    ids = [row[0] for row in await _execute(conn, statements.ENQUEUE_LINKED, params)]
    return _checked_ids(ids, specs, batch)


def _run(raw: Any, sql: str, params: Mapping[str, Any]) -> list[tuple]:
    """Run on the caller's connection, or in one transaction of a pooled one."""
    if raw is not None:
        with adapters.tuple_cursor(raw) as cur:
            cur.execute(sql, params)
            return cur.fetchall()
    from skiplock.core.producer import default_pool  # the producer's pool (producer imports this module)

    with default_pool().connection() as pooled, pooled.transaction(), pooled.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchall()
