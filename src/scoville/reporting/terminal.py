"""A run's Pareto frontier drawn in the terminal (``scoville show RUN --chart``), for people on a remote box.

Plain text on a character grid, so it reads over ssh, in CI logs and in a pipe: ``●`` a point on the frontier,
``○`` a point another load point dominates, ``·`` the frontier's monotone (Steffen) interpolation between its
points, the same curve the HTML report draws. Both axes are linear and start at zero, as InferenceX draws them,
so the eye reads ratios off the picture.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from scoville.analysis.frontier import frontier
from scoville.numbers import significant

FRONTIER, DOMINATED, CURVE = "●", "○", "·"
Y_LABEL_WIDTH = 8


@dataclass(frozen=True)
class Axes:
    """What a terminal chart plots: metric keys and their printed names."""

    x: str
    y: str
    x_name: str
    y_name: str


THROUGHPUT_PER_ACCELERATOR = Axes("interactivity", "total_throughput_per_accelerator", "tok/s/user",
                                  "total tok/s per accelerator")
THROUGHPUT_PER_KW = Axes("interactivity", "total_throughput_per_kw", "tok/s/user", "total tok/s per kW")


def _ticks(hi: float) -> float:
    """A round upper bound a little above ``hi`` (1, 2 or 5 times a power of ten), so the axis reads evenly."""
    if hi <= 0:
        return 1.0
    magnitude = 10 ** math.floor(math.log10(hi))
    return next(m * magnitude for m in (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10) if m * magnitude >= hi * 1.02)


def frontier_text(rows: Sequence[dict[str, Any]], axes: Axes, *, width: int = 72, height: int = 17) -> str:
    """The frontier of ``axes.y`` against ``axes.x`` over ``rows``, as ``height + 4`` lines of text.

    An odd ``height`` puts the middle label on a row of its own (half the axis).
    """
    f = frontier(rows, axes.x, axes.y)
    points = [(p, True) for p in f.points] + [(p, False) for p in f.dominated]
    if not points:
        return f"{axes.y_name} vs {axes.x_name}: no point has both figures"
    plot_w = max(width - Y_LABEL_WIDTH - 2, 20)
    x_hi = _ticks(max(p.x for p, _ in points))
    y_hi = _ticks(max(p.y for p, _ in points))
    grid = [[" "] * plot_w for _ in range(height)]

    def cell(x: float, y: float) -> tuple[int, int]:
        col = min(int(round(x / x_hi * (plot_w - 1))), plot_w - 1)
        row = min(int(round(y / y_hi * (height - 1))), height - 1)
        return height - 1 - row, col

    xs, ys = f.curve(num=plot_w * 2)
    for x, y in zip(xs, ys, strict=True):
        r, c = cell(x, y)
        grid[r][c] = CURVE
    for p, on_frontier in sorted(points, key=lambda item: item[1]):  # frontier markers drawn last, on top
        r, c = cell(p.x, p.y)
        grid[r][c] = FRONTIER if on_frontier else DOMINATED
    lines = [f"{axes.y_name} vs {axes.x_name}"]
    for i, row in enumerate(grid):
        value = y_hi * (height - 1 - i) / (height - 1)
        label = significant(value) if i in (0, (height - 1) // 2, height - 1) else ""
        lines.append(f"{label:>{Y_LABEL_WIDTH}} ┤{''.join(row)}")
    lines.append(" " * Y_LABEL_WIDTH + " └" + "─" * plot_w)
    left, mid, right = "0", significant(x_hi / 2), significant(x_hi)
    gap = plot_w - len(left) - len(mid) - len(right)
    lines.append(" " * (Y_LABEL_WIDTH + 2) + left + " " * (gap // 2) + mid + " " * (gap - gap // 2) + right)
    lines.append(" " * (Y_LABEL_WIDTH + 2) + f"{FRONTIER} frontier  {DOMINATED} dominated  {CURVE} interpolated")
    return "\n".join(lines)


def run_charts(rows: Sequence[dict[str, Any]], *, width: int = 72) -> list[str]:
    """The charts ``show --chart`` prints: per accelerator, and per kW when the run has a power basis."""
    charts = [frontier_text(rows, THROUGHPUT_PER_ACCELERATOR, width=width)]
    if any(isinstance(r.get(THROUGHPUT_PER_KW.y), (int, float)) for r in rows):
        charts.append(frontier_text(rows, THROUGHPUT_PER_KW, width=width))
    return charts
