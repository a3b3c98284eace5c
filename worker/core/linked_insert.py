"""The linked insert: jobs written with their parents (`depends_on`) and, for a batch, its membership.

A linked job is written by one statement (enqueue_linked, in core/sql/workflows.sql) that also writes its edges and
counts it into its batch, so an autocommit connection cannot keep half of it. Everything a caller
can get wrong is checked first and raises EnqueueError before anything is written; unknown parent
ids are looked up with a read-only query, so the caller's transaction stays usable. What happens
when a parent finishes is the database's business (migration 026's skiplock_settle), in the
parent's own finalising statement. The design: docs/explanation/workflows-design.md.

Below the producer, which calls it: it runs its two statements through the `execute` its caller
passes (the producer's own, on the caller's connection or the producer's pool), so it imports no
producer. Batches (core/workflows/batches.py) sit above the producer and call both.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

from skiplock.core.errors import EnqueueError
from skiplock.core.sql import queries

WORKFLOWS_SQL = queries("workflows")

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


# A statement runner: the producer's _execute bound to the caller's connection (or to None: the producer's
# pool), so the linked insert joins the caller's transaction without knowing whose pool it is.
Execute = Callable[[str, Mapping[str, Any]], Sequence[Any]]
AsyncExecute = Callable[[str, Mapping[str, Any]], Awaitable[Sequence[Any]]]


def insert_linked(execute: Execute, specs: Sequence[Any], parents: Sequence[Sequence[int]],
                  policies: Sequence[str | None], batch: int | None = None) -> list[int]:
    """Insert validated JobSpecs, each with its parents and policy, optionally into `batch`; their ids."""
    wanted = _all_parents(parents)
    if wanted:
        _refuse_unknown(execute(WORKFLOWS_SQL.unknown_parents, {"parents": wanted}))
    rows = execute(WORKFLOWS_SQL.enqueue_linked, linked_params(specs, parents, policies, batch))
    return _checked_ids([row[0] for row in rows], specs, batch)


async def insert_linked_async(execute: AsyncExecute, specs: Sequence[Any], parents: Sequence[Sequence[int]],
                              policies: Sequence[str | None], batch: int | None = None) -> list[int]:
    """insert_linked for asyncio: `execute` awaits each statement (the async producer's)."""
    wanted = _all_parents(parents)
    if wanted:
        _refuse_unknown(await execute(WORKFLOWS_SQL.unknown_parents, {"parents": wanted}))
    rows = await execute(WORKFLOWS_SQL.enqueue_linked, linked_params(specs, parents, policies, batch))
    return _checked_ids([row[0] for row in rows], specs, batch)


def _all_parents(parents: Sequence[Sequence[int]]) -> list[int]:
    return sorted({p for ps in parents for p in ps})


def _refuse_unknown(rows: Sequence[Any]) -> None:
    """EnqueueError naming the ids that are not jobs (nor were): nothing has been written yet."""
    unknown = list(rows[0][0]) if rows and rows[0][0] else []
    if unknown:
        raise unknown_parents_error(unknown)


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
        "weights": [s.weight for s in specs],
        "unknown": [s.unknown for s in specs],
        "parents": ["{" + ",".join(map(str, ps)) + "}" if ps else None for ps in parents], "policies": list(policies),
        "batch": batch,
    }
