"""Pareto frontiers of any two metrics, with a direction per metric.

A frontier is the set of points no other point beats on both axes at once
(the upper envelope when both axes are higher-better, e.g. throughput per kW
against interactivity). It is taken across every load point and configuration
of one or more runs, because an operator picks whichever configuration is best
at the user speed they sell; the points it does not keep are "dominated".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from scoville.analysis.interp import METHOD, Steffen

Direction = Literal["higher", "lower"]

# Which way is better for each metric column that the analysis knows; anything
# else must be given a direction explicitly.
HIGHER_BETTER_PREFIXES = ("interactivity", "tok_s_user", "output_throughput", "total_throughput",
                          "request_throughput", "goodput", "slo_attainment", "tokens_per_usd")
LOWER_BETTER_PREFIXES = ("ttft_s", "tpot_s", "itl_s", "e2e_s", "usd_per_mtok", "joules_per")


def direction_of(metric: str) -> Direction:
    """The better direction of a metric column, from its name (UserError-free: a ValueError is a bug)."""
    if metric.startswith(HIGHER_BETTER_PREFIXES):
        return "higher"
    if metric.startswith(LOWER_BETTER_PREFIXES):
        return "lower"
    raise ValueError(f"no known direction for metric {metric!r}; pass x_dir/y_dir")


@dataclass(frozen=True)
class FrontierPoint:
    """One point on (or off) a frontier; ``row`` is the metrics row it came from."""

    x: float
    y: float
    row: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass
class Frontier:
    """Frontier of y against x: points sorted by x ascending, plus the points it dominated.

    ``at(x)`` interpolates y monotonically (Steffen) between frontier points and
    returns None outside the frontier's x range — ``why_undefined(x)`` says why.
    """

    x_metric: str
    y_metric: str
    x_dir: Direction
    y_dir: Direction
    points: list[FrontierPoint]
    dominated: list[FrontierPoint]
    method: str = METHOD

    def __post_init__(self) -> None:
        self._interp = Steffen([p.x for p in self.points], [p.y for p in self.points]) if self.points else None

    def __str__(self) -> str:
        """The kept points as two aligned columns (what ``print(run.frontier())`` shows in a notebook)."""
        from scoville.numbers import significant

        width = max(len(self.x_metric), 12)
        lines = [f"{self.x_metric:>{width}}  {self.y_metric}"]
        lines += [f"{significant(p.x, 4):>{width}}  {significant(p.y, 4)}" for p in self.points]
        return "\n".join(lines)

    @property
    def xs(self) -> list[float]:
        return [p.x for p in self.points]

    @property
    def ys(self) -> list[float]:
        return [p.y for p in self.points]

    def at(self, x: float) -> float | None:
        """y on the frontier at x, or None where x lies outside what the frontier reaches."""
        return self._interp(x) if self._interp is not None else None

    def why_undefined(self, x: float) -> str | None:
        """"beyond reach" past the frontier's best x, "below range" before its first; None if defined."""
        if self._interp is None:
            return "no points"
        if self.at(x) is not None:
            return None
        best_end = self._interp.hi if self.x_dir == "higher" else self._interp.lo
        past_best = x > best_end if self.x_dir == "higher" else x < best_end
        return "beyond reach" if past_best else "below range"

    def at_least(self, x: float) -> float | None:
        """A measured lower bound on y where x lies on the *easy* side of the frontier ("below range").

        A system whose every load point is faster than X tok/s/user serves X
        tok/s/user at least as well as its highest-throughput point does, so
        that point's y is a lower bound on its frontier at X (a measurement,
        not an extrapolation). None anywhere else. (With a lower-better y the
        same value bounds y from above: either way y can only be better.)
        """
        if self.why_undefined(x) != "below range":
            return None
        return self.points[0].y if self.x_dir == "higher" else self.points[-1].y

    def read(self, x: float) -> tuple[float | None, str | None]:
        """y at x and, where x lies below the measured range, the bound it is instead: (value, None) on the
        frontier, (bound, "at least" or, for a lower-better y, "at most") below it, (None, None) past it."""
        value = self.at(x)
        if value is not None:
            return value, None
        bound = self.at_least(x)
        if bound is None:
            return None, None
        return bound, "at least" if self.y_dir == "higher" else "at most"

    @property
    def reach(self) -> float | None:
        """The best x the frontier attains (highest interactivity, lowest latency)."""
        if not self.points:
            return None
        return max(self.xs) if self.x_dir == "higher" else min(self.xs)

    def curve(self, num: int = 64, log_x: bool = False) -> tuple[list[float], list[float]]:
        """Dense interpolated curve for drawing the frontier line."""
        if self._interp is None:
            return [], []
        xs, ys = self._interp.sample(num, log=log_x)
        return xs.tolist(), ys.tolist()


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def pareto(points: Iterable[FrontierPoint], x_dir: Direction = "higher", y_dir: Direction = "higher"
           ) -> tuple[list[FrontierPoint], list[FrontierPoint]]:
    """Split points into (frontier sorted by x ascending, dominated).

    Exact duplicates keep the first; at equal x only the best y survives, so the
    frontier is a function of x and can be interpolated.
    """
    sx = 1.0 if x_dir == "higher" else -1.0
    sy = 1.0 if y_dir == "higher" else -1.0
    pts = list(points)
    # best x first; among equal x, best y first
    order = sorted(range(len(pts)), key=lambda i: (-sx * pts[i].x, -sy * pts[i].y, i))
    keep: list[FrontierPoint] = []
    dominated: list[FrontierPoint] = []
    best_y = -math.inf
    for i in order:
        p = pts[i]
        if sy * p.y > best_y:
            keep.append(p)
            best_y = sy * p.y
        else:
            dominated.append(p)
    keep.sort(key=lambda p: p.x)
    return keep, dominated


def frontier(rows: Sequence[dict[str, Any]], x: str = "interactivity", y: str = "total_throughput_per_accelerator",
             *, x_dir: Direction | None = None, y_dir: Direction | None = None) -> Frontier:
    """Frontier of metric ``y`` against metric ``x`` over metrics rows (any number of runs).

    Rows missing either metric (a point with no successful request, a run
    without power for a per-kW metric) are skipped, not treated as zero.
    """
    xd = x_dir or direction_of(x)
    yd = y_dir or direction_of(y)
    pts = [FrontierPoint(float(r[x]), float(r[y]), r) for r in rows if _finite(r.get(x)) and _finite(r.get(y))]
    keep, dominated = pareto(pts, xd, yd)
    return Frontier(x, y, xd, yd, keep, dominated)
