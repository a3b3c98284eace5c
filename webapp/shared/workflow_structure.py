"""A workflow's shape (its jobs, edges and depths), read once and kept for a while per process.

The workflow page is polled while a workflow runs (every 5 s by default), and what it draws splits in two:
- the shape: which jobs belong to it, its edges and each job's depth. It only grows (a job's
  parents are fixed when it is enqueued), and reading it costs the most: for 1 -> 10,000 -> 1,
  20,000 edges through job_deps, a walk for the jobs whose rows are gone (history mode delete) and
  the depths computed from every edge: most of a large workflow's view, in the database and in Python;
- the states, which change all the time: one index range of jobs_workflow_idx.
So the page reads the states on every view and the shape again only when it is older than SHAPE_TTL
or the states name a job the shape does not have (a job added since: it has a row, so it is seen).
What that leaves out: jobs added to the workflow AND finished with their rows deleted between two
views, while no other added job still has a row; they appear when the shape is read again, at most
SHAPE_TTL later. A job of the shape whose row has gone since is looked up by id: its stored result
or tombstone, else succeeded (see workflow_queries._STATE). What a view of 1 -> 10,000 -> 1 then costs,
with and without the shape read, is in docs/benchmarks/workflows.md.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

import psycopg

from skiplock.webapp.queries import workflow_queries as wq
from skiplock.webapp.shared import dag

SHAPE_TTL = 30.0  # seconds a shape is used before it is read again (six polls at the default 5 s)
KEPT = 16  # shapes kept per process (the most recently viewed workflows)
Nodes = dict[int, tuple[str, str | None]]  # job id -> (state, queue); queue None when nothing recorded it


@dataclass
class Shape:
    """What does not change while a workflow runs: its jobs, edges and depths, and the final states and
    queues of its jobs whose rows are gone."""

    read_at: float
    filenode: int  # jobs' file node when it was read (a TRUNCATE changes it: the ids mean other jobs then)
    ids: frozenset[int]
    parents: list[int]
    children: list[int]
    depth: dict[int, int]
    gone: Nodes = field(default_factory=dict)


_shapes: OrderedDict[tuple, Shape] = OrderedDict()
_lock = threading.Lock()


def _key(conn: psycopg.Connection, root: int) -> tuple:
    """Per database (the console may serve several) and root."""
    info = conn.info
    return (info.host, info.port, info.dbname, root)


def members(conn: psycopg.Connection, root: int, cap: int) -> tuple[Nodes, int]:
    """The workflow's jobs that still have a row, id -> (state, queue); and jobs' file node."""
    with conn.cursor(binary=True) as cur:
        row = cur.execute(wq.WORKFLOW_MEMBERS, {"root": root, "cap": cap}).fetchone()
    assert row is not None  # an aggregate: one row
    ids, states, queues, filenode = row
    return dict(zip(ids, zip(states, queues, strict=True), strict=True)), filenode


def grouped(conn: psycopg.Connection, root: int, cap: int,
            read_shape: Callable[[Nodes], tuple[Nodes, list[int], list[int]]]) -> dag.Grouped:
    """The workflow as boxes: the states read now, the shape from the cache or from `read_shape`
    (given the rows read now, it returns every job with its state - the gone ones' from what outlives
    them - and the edges as two arrays)."""
    nodes, filenode = members(conn, root, cap)
    key = _key(conn, root)
    with _lock:
        shape = _shapes.get(key)
    if (shape is None or shape.filenode != filenode or time.monotonic() - shape.read_at > SHAPE_TTL
            or not nodes.keys() <= shape.ids):
        everything, parents, children = read_shape(nodes)
        edges = [(p, c) for p, c in zip(parents, children, strict=True)
                 if p != c and p in everything and c in everything]
        shape = Shape(time.monotonic(), filenode, frozenset(everything), parents, children,
                      dag.depths(list(everything), edges),
                      {i: node for i, node in everything.items() if i not in nodes})
        with _lock:
            _shapes[key] = shape
            _shapes.move_to_end(key)
            while len(_shapes) > KEPT:
                _shapes.popitem(last=False)
        return dag.group(everything, parents, children, depth=shape.depth)
    with _lock:  # (another thread of this process may be adding to it)
        gone = dict(shape.gone)
    newly_gone = [i for i in shape.ids if i not in nodes and i not in gone]
    if newly_gone:  # finished since the shape was read, and their rows deleted: their final states
        with conn.cursor() as cur:
            rows = cur.execute(wq.JOB_FINAL_STATES, {"ids": newly_gone}).fetchall()
        gone.update((job_id, (state, queue)) for job_id, state, queue in rows)
        with _lock:
            shape.gone.update(gone)
    nodes.update(gone)
    return dag.group(nodes, shape.parents, shape.children, depth=shape.depth)


def forget() -> None:
    """Drop every kept shape (tests/benchmarks/workflow_pages.py times first views with it)."""
    with _lock:
        _shapes.clear()
