"""A workflow's DAG laid out for a server-rendered SVG: layers by depth, big layers collapsed.

Pure functions of the nodes (id, queue, state, parents); the workflow page reads them with
workflow_queries.WORKFLOW_NODES and its template draws the result. A job's depth is its longest
path from the root, so every edge points down. A layer with more than LAYER_LIMIT jobs draws one
box per (queue, state) with a count instead of one per job: a fan-out of 10,000 is three boxes,
and the SVG's size depends on the number of boxes, never on the number of jobs.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

LAYER_LIMIT = 12  # boxes in one layer before its jobs are grouped per (queue, state)
MAX_LAYERS = 60  # deeper layers are left out of the drawing (the counts still include them)
BOX_W, BOX_H = 132, 42  # one box, in SVG units
GAP_X, GAP_Y = 18, 46  # between boxes of a layer, between layers
PAD = 10
STATES = ("waiting", "queued", "running", "succeeded", "dead", "failed")  # the order counts are shown in


@dataclass(frozen=True)
class Node:
    """One job of the workflow as WORKFLOW_NODES reads it."""

    id: int
    queue: str | None  # None when its row is gone (history mode delete)
    state: str
    parents: Sequence[int] = ()


@dataclass
class Box:
    """One drawn box: a single job, or a group of jobs of one layer, queue and state."""

    key: str
    depth: int
    queue: str | None
    state: str
    ids: list[int] = field(default_factory=list)
    x: float = 0.0
    y: float = 0.0

    @property
    def count(self) -> int:
        return len(self.ids)

    @property
    def job_id(self) -> int | None:
        """The job a single box links to; None for a group."""
        return self.ids[0] if len(self.ids) == 1 and self.key.startswith("j") else None


@dataclass(frozen=True)
class Edge:
    """A line from one box to another, and how many job edges it stands for."""

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
    """What the template draws: boxes, edges, the canvas size and what was left out."""

    boxes: list[Box]
    edges: list[Edge]
    width: int
    height: int
    layers: int  # layers in the workflow
    hidden_layers: int  # layers deeper than MAX_LAYERS, not drawn
    grouped: bool  # at least one layer was collapsed into groups


def depths(nodes: dict[int, Node]) -> dict[int, int]:
    """Each node's longest path from the root (Kahn's order over the edges inside the workflow).

    >>> n = {1: Node(1, "q", "succeeded"), 2: Node(2, "q", "queued", (1,)), 3: Node(3, "q", "waiting", (1, 2))}
    >>> depths(n)
    {1: 0, 2: 1, 3: 2}
    """
    children: dict[int, list[int]] = defaultdict(list)
    pending: dict[int, int] = {}
    for node in nodes.values():
        inside = [p for p in set(node.parents) if p in nodes]
        pending[node.id] = len(inside)
        for p in inside:
            children[p].append(node.id)
    depth = {i: 0 for i, n in pending.items() if n == 0}
    ready = sorted(depth)
    while ready:
        at = ready.pop()
        for child in children[at]:
            depth[child] = max(depth.get(child, 0), depth[at] + 1)
            pending[child] -= 1
            if pending[child] == 0:
                ready.append(child)
    # a node left with pending parents sits on a cycle (only a hand-made edge can make one): put it
    # below its deepest known parent rather than lose it
    for i, left in pending.items():
        if left and i not in depth:
            depth[i] = 1 + max((depth.get(p, 0) for p in nodes[i].parents if p in depth), default=0)
    return {i: depth[i] for i in sorted(depth)}


def state_counts(nodes: Iterable[Node]) -> list[tuple[str, int]]:
    """(state, jobs) in STATES order, states with no job left out; unknown states last."""
    counts = Counter(n.state for n in nodes)
    known = [(s, counts[s]) for s in STATES if counts.get(s)]
    return known + sorted((s, c) for s, c in counts.items() if s not in STATES)


def _layer_boxes(depth: int, members: list[Node]) -> list[Box]:
    """A layer's boxes: one per job, or per (queue, state) once the layer is too wide."""
    if len(members) <= LAYER_LIMIT:
        return [Box(f"j{n.id}", depth, n.queue, n.state, [n.id]) for n in members]
    groups: dict[tuple[str, str], Box] = {}
    for n in members:
        key = (n.queue or "", n.state)
        if key not in groups:
            groups[key] = Box(f"g{depth}:{len(groups)}", depth, n.queue, n.state)
        groups[key].ids.append(n.id)
    boxes = sorted(groups.values(), key=lambda b: (STATES.index(b.state) if b.state in STATES else 99, b.queue or ""))
    if len(boxes) > LAYER_LIMIT:  # more (queue, state) pairs than fit: the rest share one box
        rest = boxes[LAYER_LIMIT - 1:]
        merged = Box(f"g{depth}:rest", depth, None, "mixed", [i for b in rest for i in b.ids])
        boxes = [*boxes[:LAYER_LIMIT - 1], merged]
    return boxes


def layout(nodes: dict[int, Node]) -> Drawing:
    """Boxes placed layer by layer (ordered by their parents' positions, to cross fewer edges) and
    the edges between them, each box pair drawn once with the number of job edges it stands for."""
    depth = depths(nodes)
    by_layer: dict[int, list[Node]] = defaultdict(list)
    for i, d in depth.items():
        by_layer[d].append(nodes[i])
    layers = max(by_layer, default=-1) + 1
    box_of: dict[int, Box] = {}
    placed: list[list[Box]] = []
    for d in range(min(layers, MAX_LAYERS)):
        members = by_layer.get(d, [])
        boxes = _layer_boxes(d, members)
        if d:  # barycentre of the parents' positions in the layers above
            def weight(box: Box) -> float:
                xs = [box_of[p].x for i in box.ids[:50] for p in nodes[i].parents if p in box_of]
                return sum(xs) / len(xs) if xs else 0.0
            boxes.sort(key=weight)
        for k, box in enumerate(boxes):
            box.x = PAD + k * (BOX_W + GAP_X)  # centred below, once the widest layer is known
            for i in box.ids:
                box_of[i] = box
        placed.append(boxes)
    widest = max((len(b) for b in placed), default=1)
    width = PAD * 2 + widest * (BOX_W + GAP_X) - GAP_X
    for d, boxes in enumerate(placed):
        shift = (width - PAD * 2 - (len(boxes) * (BOX_W + GAP_X) - GAP_X)) / 2
        for box in boxes:
            box.x += shift
            box.y = PAD + d * (BOX_H + GAP_Y)
    pairs: Counter[tuple[str, str]] = Counter()
    ends: dict[str, Box] = {}
    for i, box in box_of.items():
        for p in nodes[i].parents:
            parent = box_of.get(p)
            if parent is not None and parent is not box:
                pairs[(parent.key, box.key)] += 1
                ends[parent.key], ends[box.key] = parent, box
    edges = [Edge(ends[a], ends[b], n) for (a, b), n in sorted(pairs.items())]
    height = PAD * 2 + len(placed) * (BOX_H + GAP_Y) - GAP_Y
    return Drawing([b for boxes in placed for b in boxes], edges, int(width), int(max(height, BOX_H)),
                   layers, max(0, layers - MAX_LAYERS), any(not b.key.startswith("j") for bs in placed for b in bs))
