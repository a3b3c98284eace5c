"""A workflow's DAG laid out for a server-rendered SVG: layers by depth, big layers collapsed.

`group` takes the workflow's jobs (id -> state, queue) and edges as the workflow page reads them
(workflow_queries), gives each job its depth (its longest path from the root, so every line points
down) and makes a layer of more than LAYER_LIMIT jobs one box per (state, queue) with a count.
`layout` places the boxes: its work, and the SVG's size, depend on the number of boxes, never on
the number of jobs, so a fan-out of 10,000 is three boxes.
"""

from __future__ import annotations

from collections import Counter, defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

LAYER_LIMIT = 12  # jobs in one layer before it is drawn as one box per (state, queue)
MAX_LAYERS = 60  # jobs deeper than this are counted, not drawn
BOX_W, BOX_H = 132, 42  # one box, in SVG units
GAP_X, GAP_Y = 18, 46  # between boxes of a layer, between layers
PAD = 10
STATES = ("waiting", "queued", "running", "succeeded", "dead", "failed")  # the order boxes and counts use


@dataclass
class Box:
    """One drawn box: a single job, or the jobs of one layer in one state and queue."""

    key: str
    depth: int
    queue: str | None  # None when the rows are gone (history mode delete)
    state: str
    count: int
    first_id: int
    x: float = 0.0
    y: float = 0.0

    @property
    def job_id(self) -> int | None:
        """The job a single box links to; None for a group."""
        return self.first_id if self.key.startswith("j") else None


@dataclass(frozen=True)
class Edge:
    """A line from one box to another, and how many dependencies it stands for."""

    parent: Box
    child: Box
    count: int

    @property
    def path(self) -> str:
        """An SVG path from the bottom of the parent to the top of the child (a gentle S curve)."""
        x1, y1 = self.parent.x + BOX_W / 2, self.parent.y + BOX_H
        x2, y2 = self.child.x + BOX_W / 2, self.child.y
        mid = (y1 + y2) / 2
        return f"M{x1:.0f},{y1:.0f} C{x1:.0f},{mid:.0f} {x2:.0f},{mid:.0f} {x2:.0f},{y2:.0f}"


@dataclass(frozen=True)
class Drawing:
    """What the template draws: boxes, edges, the canvas size, and whether anything was grouped."""

    boxes: list[Box]
    edges: list[Edge]
    width: int
    height: int
    layers: int
    grouped: bool  # at least one layer is drawn as groups


def _order(state: str) -> int:
    return STATES.index(state) if state in STATES else len(STATES)


def depths(ids: Sequence[int], edges: list[tuple[int, int]]) -> dict[int, int]:
    """Each job's longest path from a job without parents; `edges` (parent, child) inside the workflow.

    Ids are handed out in order and a parent must exist before its dependent, so ascending ids are
    nearly always a topological order: one pass over the edges by child. Edges linked later by SQL
    (skiplock_add_dependencies) may point to a smaller id: then Kahn's algorithm.

    >>> depths([1, 2, 3, 4], [(1, 2), (1, 3), (2, 3), (1, 4)])
    {1: 0, 2: 1, 3: 2, 4: 1}
    >>> depths([1, 2, 3], [(3, 1), (1, 2)])
    {1: 1, 2: 2, 3: 0}
    """
    depth = dict.fromkeys(ids, 0)
    if all(p < c for p, c in edges):
        for p, c in sorted(edges, key=itemgetter(1)):
            d = depth[p] + 1
            if d > depth[c]:
                depth[c] = d
        return depth
    children: dict[int, list[int]] = defaultdict(list)
    pending = dict.fromkeys(ids, 0)
    for p, c in edges:
        children[p].append(c)
        pending[c] += 1
    ready = deque(n for n in sorted(ids) if not pending[n])
    while ready:
        at = ready.popleft()
        for c in children[at]:
            depth[c] = max(depth[c], depth[at] + 1)
            pending[c] -= 1
            if not pending[c]:
                ready.append(c)
    return depth  # a job on a cycle (only hand-made edges can make one) keeps what it got so far


@dataclass(frozen=True)
class Grouped:
    """The workflow as boxes: (key, depth, queue, state, jobs, first id) rows and (parent key,
    child key, dependencies) rows, with its jobs per state."""

    boxes: list[tuple[str, int, str | None, str, int, int]]
    edges: list[tuple[str, str, int]]
    per_state: dict[str, int]  # every job, drawn or not
    total: int
    hidden: int  # jobs deeper than MAX_LAYERS: counted, not drawn


def group(nodes: dict[int, tuple[str, str | None]], parents: Sequence[int], children: Sequence[int],
          depth: dict[int, int] | None = None) -> Grouped:
    """Depths, then one box per job or, in a layer of more than LAYER_LIMIT, per (state, queue).

    `nodes`: id -> (state, queue); `parents`/`children`: the edges as two parallel arrays (edges
    with an end outside the workflow are ignored). `depth`: the depths computed before for these
    nodes and edges (workflow_structure keeps them), else computed here. Jobs deeper than MAX_LAYERS
    are counted but not drawn (the page says so). Written for 10,000 jobs per page view: tuples and
    Counter, no objects.
    """
    edges = [(p, c) for p, c in zip(parents, children, strict=True) if p != c and p in nodes and c in nodes]
    if depth is None:
        depth = depths(list(nodes), edges)
    sizes = Counter(depth.values())
    wide = {d for d, n in sizes.items() if n > LAYER_LIMIT}
    box_of: dict[int, int] = {}  # job -> its box's number
    numbers: dict[Any, int] = {}  # (depth, state, queue) or a job id -> box number
    boxes: list[list] = []
    hidden = 0
    for n, d in depth.items():
        if d > MAX_LAYERS:
            hidden += 1
            continue
        state, queue = nodes[n]
        key: Any = (d, state, queue) if d in wide else n
        number = numbers.get(key)
        if number is None:
            number = numbers[key] = len(boxes)
            name = f"g{d}:{state}:{queue or ''}" if d in wide else f"j{n}"
            boxes.append([name, d, queue, state, 0, n])
        box = boxes[number]
        box[4] += 1
        if n < box[5]:
            box[5] = n
        box_of[n] = number
    # one int per (parent box, child box) pair: counting ints is cheaper than counting tuples
    width = len(boxes) + 1
    links = Counter(box_of.get(p, -1) * width + box_of.get(c, -1) for p, c in edges)
    lines = []
    for pair, count in links.items():
        a, b = divmod(pair, width)
        if a >= 0 and 0 <= b < len(boxes) and a != b:
            lines.append((boxes[a][0], boxes[b][0], count))
    return Grouped([tuple(b) for b in boxes], lines,
                   dict(Counter(state for state, _ in nodes.values())), len(nodes), hidden)


def state_counts(per_state: dict[str, int]) -> list[tuple[str, int]]:
    """(state, jobs) in STATES order, states with no job left out.

    >>> state_counts({"succeeded": 1, "queued": 40, "dead": 0})
    [('queued', 40), ('succeeded', 1)]
    """
    return sorted(((s, n) for s, n in per_state.items() if n), key=lambda item: (_order(item[0]), item[0]))


def _cap_layer(boxes: list[Box], merged_into: dict[str, str]) -> list[Box]:
    """More groups than fit in a layer (many queues): the smallest share one "mixed" box."""
    if len(boxes) <= LAYER_LIMIT:
        return boxes
    boxes = sorted(boxes, key=lambda b: -b.count)
    kept, rest = boxes[:LAYER_LIMIT - 1], boxes[LAYER_LIMIT - 1:]
    mixed = Box(f"m{rest[0].depth}", rest[0].depth, None, "mixed", sum(b.count for b in rest),
                min(b.first_id for b in rest))
    for b in rest:
        merged_into[b.key] = mixed.key
    return [*kept, mixed]


def layout(box_rows: Sequence[Sequence], edge_rows: Sequence[Sequence]) -> Drawing:
    """Place WORKFLOW_DAG's boxes layer by layer (each layer ordered by its parents' positions, to
    cross fewer lines) and join them, one line per box pair with the dependencies it stands for."""
    merged_into: dict[str, str] = {}
    by_layer: dict[int, list[Box]] = defaultdict(list)
    for key, depth, queue, state, count, first_id in box_rows:
        by_layer[depth].append(Box(key, depth, queue, state, count, first_id))
    parents_of: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for parent, child, n in edge_rows:
        parents_of[child].append((parent, n))
    placed: dict[str, Box] = {}
    rows: list[list[Box]] = []
    for depth in sorted(by_layer):
        boxes = _cap_layer(by_layer[depth], merged_into)
        originals = defaultdict(list)  # a merged box's parents are its members'
        for b in by_layer[depth]:
            originals[merged_into.get(b.key, b.key)].append(b.key)

        def weight(box: Box, originals: dict[str, list[str]] = originals) -> tuple[float, int, str]:
            xs = [placed[merged_into.get(p, p)].x for k in originals[box.key] for p, _ in parents_of.get(k, ())
                  if merged_into.get(p, p) in placed]
            return (sum(xs) / len(xs) if xs else 0.0, _order(box.state), box.queue or "")

        boxes.sort(key=weight)
        for k, box in enumerate(boxes):
            box.x = PAD + k * (BOX_W + GAP_X)  # centred below, once the widest layer is known
            box.y = PAD + len(rows) * (BOX_H + GAP_Y)
            placed[box.key] = box
        rows.append(boxes)
    widest = max((len(r) for r in rows), default=1)
    width = PAD * 2 + widest * (BOX_W + GAP_X) - GAP_X
    for boxes in rows:
        shift = (widest - len(boxes)) * (BOX_W + GAP_X) / 2
        for box in boxes:
            box.x += shift
    lines: Counter[tuple[str, str]] = Counter()
    for parent, child, n in edge_rows:
        a, b = merged_into.get(parent, parent), merged_into.get(child, child)
        if a != b and a in placed and b in placed:
            lines[(a, b)] += n
    edges = [Edge(placed[a], placed[b], n) for (a, b), n in sorted(lines.items())]
    height = PAD * 2 + len(rows) * (BOX_H + GAP_Y) - GAP_Y
    return Drawing([b for r in rows for b in r], edges, int(width), int(max(height, BOX_H)), len(rows),
                   any(b.job_id is None for r in rows for b in r))
