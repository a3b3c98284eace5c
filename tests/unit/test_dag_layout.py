"""The workflow page's DAG grouping and layout (webapp/shared/dag.py): pure functions, no database."""

from __future__ import annotations

import doctest

from skiplock.webapp.shared import dag


def test_the_docstring_examples_hold() -> None:
    assert doctest.testmod(dag).failed == 0


def _fan(n: int, queues: int = 1) -> tuple[dict[int, tuple[str, str | None]], list[int], list[int]]:
    """1 -> n -> 1, the n spread over `queues` queues; parallel edge arrays."""
    nodes: dict[int, tuple[str, str | None]] = {1: ("succeeded", None)}
    parents, children = [], []
    for i in range(2, n + 2):
        nodes[i] = ("queued", f"q{i % queues}")
        parents.append(1)
        children.append(i)
    nodes[n + 2] = ("waiting", "sum")
    parents += list(range(2, n + 2))
    children += [n + 2] * n
    return nodes, parents, children


def test_a_fan_out_of_ten_thousand_is_three_boxes_and_two_lines() -> None:
    grouped = dag.group(*_fan(10_000))
    boxes = [(b[1], b[3], b[4]) for b in grouped.boxes]
    assert boxes == [(0, "succeeded", 1), (1, "queued", 10_000), (2, "waiting", 1)]
    assert sorted(n for _, _, n in grouped.edges) == [10_000, 10_000]
    assert grouped.per_state == {"succeeded": 1, "queued": 10_000, "waiting": 1}
    drawing = dag.layout(grouped.boxes, grouped.edges)
    assert len(drawing.boxes) == 3 and drawing.grouped
    assert drawing.width < 500 and drawing.height < 300  # the size follows the boxes, not the jobs


def test_a_small_layer_keeps_one_box_per_job() -> None:
    grouped = dag.group(*_fan(dag.LAYER_LIMIT))
    assert len(grouped.boxes) == dag.LAYER_LIMIT + 2
    assert all(b[0].startswith("j") for b in grouped.boxes)
    assert len(grouped.edges) == 2 * dag.LAYER_LIMIT


def test_more_groups_than_fit_share_a_mixed_box() -> None:
    grouped = dag.group(*_fan(200, queues=30))  # 30 (state, queue) groups in one layer
    drawing = dag.layout(grouped.boxes, grouped.edges)
    layer = [b for b in drawing.boxes if b.depth == 1]
    assert len(layer) == dag.LAYER_LIMIT
    assert sum(b.count for b in layer) == 200
    assert [b.state for b in layer].count("mixed") == 1
    assert all(0 <= b.x <= drawing.width - dag.BOX_W for b in drawing.boxes)


def test_depth_is_the_longest_path_and_deep_jobs_are_counted_not_drawn() -> None:
    chain = dag.MAX_LAYERS + 5
    nodes: dict[int, tuple[str, str | None]] = {i: ("queued", "q") for i in range(1, chain + 1)}
    parents, children = list(range(1, chain)), list(range(2, chain + 1))
    parents.append(1)  # a shortcut from the root to the last job: its depth stays the longest path
    children.append(chain)
    grouped = dag.group(nodes, parents, children)
    assert grouped.total == chain and grouped.hidden == chain - dag.MAX_LAYERS - 1
    assert max(b[1] for b in grouped.boxes) == dag.MAX_LAYERS
