"""Latency curves: measured or modelled operator times as smooth functions of one or two sizes.

Every operator time the cost model needs is a function of how much work a step hands it (tokens for
a GEMM or a MoE layer, sequences and context for attention, bytes for a collective). Whether the
numbers come from measured kernel tables or from the datasheet transfer model, they are tabulated
once per cost model on a grid of sizes and then read back by interpolation, so a step costs a handful
of lookups however the curve was made.

Interpolation is linear in log(size)–log(time): kernel times are close to power laws between grid
points (flat while launch-bound, proportional once bandwidth- or compute-bound), which a log–log
line follows and a linear one does not. Below the grid the first value holds (a kernel is never
faster than its smallest measured launch); above it time grows in proportion to size (the last
regime of every operator here is throughput-bound).

A scalar call takes a pure-Python path (bisect, ``math.log``): the discrete-event engine asks for one
step at a time, where numpy's per-call overhead would dominate.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Callable
from typing import Any

import numpy as np


class Curve:
    """``time(x)`` from points ``(x_i, t_i)``, x > 0 strictly increasing, t > 0."""

    __slots__ = ("_lx", "_lt", "_lx_list", "_lt_list")

    def __init__(self, x: Any, t: Any) -> None:
        xs, ts = np.asarray(x, dtype=np.float64), np.asarray(t, dtype=np.float64)
        if xs.ndim != 1 or xs.size == 0 or xs.size != ts.size:
            raise ValueError("a curve needs equally long, non-empty 1-D size and time arrays")
        if not (np.all(xs > 0) and np.all(ts > 0) and np.all(np.diff(xs) > 0)):
            raise ValueError("curve sizes must be positive and increasing, times positive")
        self._lx, self._lt = np.log(xs), np.log(ts)
        self._lx_list, self._lt_list = self._lx.tolist(), self._lt.tolist()

    def __call__(self, x: Any) -> Any:
        if isinstance(x, (float, int)) or np.ndim(x) == 0:   # isinstance first: np.ndim costs a microsecond
            return self._scalar(float(x))
        xs = np.maximum(np.asarray(x, dtype=np.float64), 1e-300)
        lx = np.log(xs)
        out = np.interp(lx, self._lx, self._lt)
        above = lx > self._lx[-1]
        if above.any():
            out = np.where(above, self._lt[-1] + (lx - self._lx[-1]), out)
        return np.exp(out)

    def _scalar(self, x: float) -> float:
        lxs, lts = self._lx_list, self._lt_list
        if x <= 0.0:
            return math.exp(lts[0])
        lx = math.log(x)
        if lx <= lxs[0]:
            return math.exp(lts[0])
        if lx >= lxs[-1]:
            return math.exp(lts[-1] + lx - lxs[-1])
        i = bisect_right(lxs, lx)
        x0, x1, t0, t1 = lxs[i - 1], lxs[i], lts[i - 1], lts[i]
        return math.exp(t0 + (t1 - t0) * (lx - x0) / (x1 - x0))

    def scaled(self, factor: float) -> Curve:
        """The same curve with every time multiplied by ``factor`` (a platform or calibration factor)."""
        return Curve(np.exp(self._lx), np.exp(self._lt) * factor)


class Surface:
    """``time(a, b)`` on a grid ``a_i × b_j`` (sequences × context, batch × prompt length ...).

    Bilinear in log–log–log space with the same edge rules as :class:`Curve` on each axis. An array call
    interpolates every row along ``b`` in one pass over the log-time matrix (the rows share the ``b`` grid), then
    across rows: the estimator asks for hundreds of such calls a search, where one :class:`Curve` call per row
    cost most of the time.
    """

    __slots__ = ("_rows", "_la", "_la_list", "_lb", "_lt")

    def __init__(self, a: Any, b: Any, t: Any) -> None:
        av, bv, tv = (np.asarray(v, dtype=np.float64) for v in (a, b, t))
        if tv.shape != (av.size, bv.size):
            raise ValueError(f"surface times must be shaped (len(a), len(b)) = ({av.size}, {bv.size}), got {tv.shape}")
        if not (np.all(av > 0) and np.all(np.diff(av) > 0)):
            raise ValueError("surface rows must be positive and increasing")
        self._la = np.log(av)
        self._la_list = self._la.tolist()
        self._rows = [Curve(bv, row) for row in tv]
        self._lb, self._lt = self._rows[0]._lx, np.log(tv)

    def __call__(self, a: Any, b: Any) -> Any:
        if (isinstance(a, (float, int)) and isinstance(b, (float, int))) or (np.ndim(a) == 0 and np.ndim(b) == 0):
            return self._scalar(float(a), float(b))
        av, bv = np.broadcast_arrays(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
        la = np.log(np.maximum(av, 1e-300))
        at_b = self._at_b(np.log(np.maximum(bv, 1e-300)))
        las = self._la
        if len(las) == 1:
            return np.exp(at_b(np.zeros(la.shape, dtype=np.intp)) + np.maximum(la - las[0], 0.0))
        idx = np.minimum(np.maximum(np.searchsorted(las, la, side="right"), 1), len(las) - 1)
        la0, la1 = las[idx - 1], las[idx]
        t0, t1 = at_b(idx - 1), at_b(idx)
        w = np.minimum(np.maximum((la - la0) / (la1 - la0), 0.0), 1.0)
        lt = t0 + (t1 - t0) * w
        above = la > las[-1]
        if above.any():
            lt = np.where(above, at_b(np.full(la.shape, len(las) - 1)) + (la - las[-1]), lt)
        return np.exp(lt)

    def _at_b(self, lb: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
        """A reader of given rows' log times at log sizes ``lb`` (row index per element), by :class:`Curve`'s edge
        rules along ``b``: the first value below the grid, in proportion to size above it. Only the two rows that
        bracket each ``a`` are read, not every row at every point."""
        grid, lt = self._lb, self._lt
        if grid.size == 1:
            rise = np.maximum(lb - grid[0], 0.0)
            return lambda rows: np.asarray(lt[rows, 0] + rise)
        j = np.minimum(np.maximum(np.searchsorted(grid, lb, side="right"), 1), grid.size - 1)
        w = np.minimum(np.maximum((lb - grid[j - 1]) / (grid[j] - grid[j - 1]), 0.0), 1.0)
        above = lb > grid[-1]
        beyond = lb - grid[-1]

        def read(rows: np.ndarray) -> np.ndarray:
            inside = lt[rows, j - 1] * (1.0 - w) + lt[rows, j] * w
            return np.where(above, lt[rows, -1] + beyond, inside)
        return read

    def _scalar(self, a: float, b: float) -> float:
        las = self._la_list
        la = math.log(a) if a > 0 else -math.inf
        n = len(las)
        if n == 1 or la <= las[0]:
            return self._rows[0]._scalar(b) * (math.exp(la - las[0]) if n == 1 and la > las[0] else 1.0)
        if la >= las[-1]:
            return self._rows[-1]._scalar(b) * math.exp(la - las[-1])
        i = bisect_right(las, la)
        t0, t1 = math.log(self._rows[i - 1]._scalar(b)), math.log(self._rows[i]._scalar(b))
        w = (la - las[i - 1]) / (las[i] - las[i - 1])
        return math.exp(t0 + (t1 - t0) * w)
