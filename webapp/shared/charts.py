"""Tiny server-side SVG charts (no JS, no chart library): data in, geometry out.

A chart is stacked bars of succeeded, retried, reaped and dead per time bucket, drawn against a scale the
caller may share between charts (the overview's per-queue sparklines use one scale, so a tall bar
means the same number of jobs in every row), with time ticks under the bars.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

SERIES = ("succeeded", "retried", "reaped", "dead")  # reaped: runs lost with their worker


@dataclass(frozen=True)
class Bar:
    """One bar segment: its x, y, width and height in the chart's coordinates, its series and tooltip."""

    x: float
    y: float
    w: float
    h: float
    title: str
    series: str = "succeeded"


@dataclass(frozen=True)
class Tick:
    """A label on an axis at a position in the chart's coordinates."""

    at: float
    text: str


@dataclass
class Chart:
    """Stacked bars, the scale's top, and the ticks of both axes."""

    width: float
    height: float
    top: int
    bars: list[Bar] = field(default_factory=list)
    x_ticks: list[Tick] = field(default_factory=list)
    y_ticks: list[Tick] = field(default_factory=list)


def nice_top(value: int) -> int:
    """The smallest 1, 2 or 5 x 10^k at or above value (at least 1): a scale a reader can read."""
    step = 1
    while True:
        for m in (1, 2, 5):
            if m * step >= value:
                return m * step
        step *= 10


def stacked(series: dict[str, list[int]], buckets: list[datetime], label: str, width: float, height: float,
            top: int | None = None, ticks: int = 4) -> Chart:
    """Stacked bars of `series` (succeeded, retried, reaped, dead) per bucket, scaled to `top` (default: own max)."""
    n = len(buckets)
    totals = [sum(series[s][i] for s in SERIES) for i in range(n)]
    scale = nice_top(top if top is not None else max(totals, default=0))
    chart = Chart(width, height, scale)
    if not n:
        return chart
    step = width / n
    for i, when in enumerate(buckets):
        y = height
        for name in SERIES:
            value = series[name][i]
            if value == 0:
                continue  # a zero draws nothing: a gap is information
            h = max(1.0, height * value / scale)
            y -= h
            chart.bars.append(Bar(round(i * step, 2), round(y, 2), round(max(step - 0.5, 0.5), 2), round(h, 2),
                                  f"{when:%Y-%m-%d %H:%M} UTC {label}: {value:,} {name}", name))
    every = max(n // ticks, 1)
    chart.x_ticks = [Tick(round(i * step, 2), f"{buckets[i]:%H:%M}" if _same_day(buckets) else f"{buckets[i]:%a %H:%M}")
                     for i in range(0, n, every)]
    chart.y_ticks = [Tick(0.0, f"{scale:,}"), Tick(round(height / 2, 2), f"{scale // 2:,}" if scale > 1 else "")]
    return chart


def _same_day(buckets: list[datetime]) -> bool:
    return (buckets[-1] - buckets[0]).total_seconds() < 86400


# A failure rate's scale: the smallest of these percentages at or above the range's highest rate, so a
# queue failing 0.3% of its runs draws visible bars (on a 1% scale) and one failing 60% is drawn to 100%.
RATE_TOPS = (1, 2, 5, 10, 20, 50, 100)


def rate_bars(counts: list[tuple[int, int]], buckets: list[datetime], label: str, width: float, height: float,
              ticks: int = 4) -> Chart:
    """Bars of failures / runs per bucket from (failures, runs) pairs; `top` is the scale in percent.

    A bucket without runs draws nothing (no rate, not a zero rate)."""
    n = len(buckets)
    rates = [100.0 * f / r if r else None for f, r in counts]
    highest = max((x for x in rates if x is not None), default=0.0)
    top = next((t for t in RATE_TOPS if t >= highest), 100)
    chart = Chart(width, height, top)
    if not n:
        return chart
    step = width / n
    for i, when in enumerate(buckets):
        rate = rates[i]
        if rate is None:
            continue
        failures, runs = counts[i]
        h = max(1.0, height * rate / top) if failures else 0.0
        chart.bars.append(Bar(round(i * step, 2), round(height - h, 2), round(max(step - 0.5, 0.5), 2), round(h, 2),
                              f"{when:%Y-%m-%d %H:%M} UTC {label}: {rate:.1f}% failed ({failures:,} of {runs:,} runs)",
                              "rate"))
    every = max(n // ticks, 1)
    chart.x_ticks = [Tick(round(i * step, 2), f"{buckets[i]:%H:%M}" if _same_day(buckets) else f"{buckets[i]:%a %H:%M}")
                     for i in range(0, n, every)]
    chart.y_ticks = [Tick(0.0, f"{top}%"), Tick(round(height / 2, 2), f"{top / 2:g}%")]
    return chart
