"""A tiny server-side SVG bar chart (no JS, no chart library): data in, geometry out."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Bar:
    """One bar: its x, y, width and height in the chart's coordinates, and its tooltip."""

    x: float
    y: float
    w: float
    h: float
    title: str


def bars(values: list[int], labels: list[str], width: float = 180, height: float = 28) -> list[Bar]:
    """Bars for `values` scaled to the largest one; a zero draws nothing (a gap is information)."""
    if not values:
        return []
    top = max(values) or 1
    step = width / len(values)
    out = []
    for i, (value, label) in enumerate(zip(values, labels, strict=True)):
        h = 0.0 if value == 0 else max(1.0, height * value / top)
        out.append(Bar(round(i * step, 2), round(height - h, 2), round(max(step - 0.5, 0.5), 2), round(h, 2),
                       f"{label}: {value}"))
    return out
