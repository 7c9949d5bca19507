"""Monotone interpolation along a frontier: Steffen's method, never extrapolated.

Why Steffen (M. Steffen, A&A 239, 443, 1990) and not a plain cubic spline: a
frontier is monotone between its points, and a comparison quoted at an
interactivity between two measured points must not invent a bump or a dip that
no measurement shows. Steffen's slopes guarantee the interpolant is monotone on
every interval and never overshoots its neighbours; it is also what the
InferenceX calculator uses, so "throughput at 169 tok/s/user" means the same
number here as there. Outside the measured range the value is undefined (None):
a frontier that ends at 169 tok/s/user says nothing about 200.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

METHOD = "steffen"


def steffen_slopes(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Derivatives at each knot by Steffen's rule (x strictly increasing, ≥ 2 knots)."""
    h = np.diff(x)
    d = np.diff(y) / h
    n = x.size
    yp = np.zeros(n)
    if n == 2:
        yp[:] = d[0]
        return yp
    # interior knots: parabola through three neighbours, limited so no overshoot
    p = (d[:-1] * h[1:] + d[1:] * h[:-1]) / (h[:-1] + h[1:])
    limit = np.minimum(np.minimum(np.abs(d[:-1]), np.abs(d[1:])), 0.5 * np.abs(p))
    yp[1:-1] = (np.sign(d[:-1]) + np.sign(d[1:])) * limit
    # end knots: one-sided parabola, clipped to keep the end interval monotone
    for end, (h0, h1, d0, d1) in ((0, (h[0], h[1], d[0], d[1])), (n - 1, (h[-1], h[-2], d[-1], d[-2]))):
        pe = d0 * (1 + h0 / (h0 + h1)) - d1 * h0 / (h0 + h1)
        if pe * d0 <= 0:
            yp[end] = 0.0
        elif abs(pe) > 2 * abs(d0):
            yp[end] = 2 * d0
        else:
            yp[end] = pe
    return yp


class Steffen:
    """Monotone piecewise-cubic interpolant through (x, y); None outside [x[0], x[-1]]."""

    method = METHOD

    def __init__(self, x: Sequence[float], y: Sequence[float]) -> None:
        xs = np.asarray(x, dtype=float)
        ys = np.asarray(y, dtype=float)
        if xs.ndim != 1 or xs.shape != ys.shape or xs.size == 0:
            raise ValueError("x and y must be equal-length, non-empty 1-D sequences")
        if xs.size > 1 and np.any(np.diff(xs) <= 0):
            raise ValueError("x must be strictly increasing")
        self.x, self.y = xs, ys
        self.slopes = steffen_slopes(xs, ys) if xs.size > 1 else np.zeros(1)

    @property
    def lo(self) -> float:
        return float(self.x[0])

    @property
    def hi(self) -> float:
        return float(self.x[-1])

    def __call__(self, at: float) -> float | None:
        """Interpolated value at ``at``; None when ``at`` lies outside the knots (never extrapolated)."""
        if not np.isfinite(at) or at < self.lo or at > self.hi:
            return None
        i = int(np.searchsorted(self.x, at, side="right") - 1)
        if i >= self.x.size - 1:
            return float(self.y[-1])
        return float(self._eval(i, np.asarray([at]))[0])

    def sample(self, num: int = 64, log: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """A dense curve through the knots, for drawing (knots included exactly)."""
        if self.x.size == 1:
            return self.x.copy(), self.y.copy()
        grid = np.geomspace(self.lo, self.hi, num) if log and self.lo > 0 else np.linspace(self.lo, self.hi, num)
        grid = np.unique(np.concatenate([grid, self.x]))
        idx = np.clip(np.searchsorted(self.x, grid, side="right") - 1, 0, self.x.size - 2)
        return grid, self._eval(idx, grid)

    def _eval(self, i: np.ndarray | int, at: np.ndarray) -> np.ndarray:
        """Cubic Hermite on interval(s) ``i`` with Steffen slopes."""
        x0, x1 = self.x[i], self.x[np.asarray(i) + 1]
        y0, y1 = self.y[i], self.y[np.asarray(i) + 1]
        m0, m1 = self.slopes[i], self.slopes[np.asarray(i) + 1]
        h = x1 - x0
        t = (at - x0) / h
        t2, t3 = t * t, t * t * t
        return ((2 * t3 - 3 * t2 + 1) * y0 + (t3 - 2 * t2 + t) * h * m0
                + (-2 * t3 + 3 * t2) * y1 + (t3 - t2) * h * m1)
