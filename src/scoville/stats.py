"""Bootstrap confidence intervals of the headline figures (docs/statistics.md).

Every interval is a 95 % percentile bootstrap with a fixed seed, so the same
records always give the same interval. Two kinds, named in a row's
``band_kind`` so nobody takes one for the other (or for the simulator's 80 %
prediction band, which uses the same ``<metric>_lo`` / ``<metric>_hi`` columns):

* over requests (``REQUESTS_BAND``), within one load point: the latency
  statistics (TTFT, TPOT, E2E median and p90) and interactivity, which is
  ``1/median(TPOT)`` and so takes the inverted TPOT interval. A throughput is one
  number per measuring window; resampling its requests would not say how much
  it changes from one measurement to the next, so a single point gets none.
* over repeats (``REPEATS_BAND``), across the ``--repeats`` of one load: the
  mean of the repeats' figures, throughputs included, resampled repeat by repeat.
  With R repeats only R^R resamples exist: for R = 2 the interval is the range of
  the two, so use 5 or more repeats for a 95 % statement worth the name.

Quantiles of resampled requests are drawn through their order statistics (the
k-th smallest of n uniforms is Beta(k, n-k+1)), which gives exactly the values
resampling n requests and taking ``np.percentile`` would, at a cost independent
of n after one sort: a point of 10,000 requests needs no 1000 × 10,000 matrix.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

LEVEL = 0.95
RESAMPLES = 1000
SEED = 0x5C0_B007                 # fixed: the same records always give the same interval
REQUESTS_BAND = "bootstrap 95% over requests"
REPEATS_BAND = "bootstrap 95% over repeats"
PREDICTION_BAND = "simulator 80% prediction band"   # the analytic simulator's band: not a confidence interval
Z90 = 1.2816          # the 10th and 90th percentiles of a normal lie this many sigmas from the mean
LATENCY_QUANTILES = {"median": 0.5, "p90": 0.9}

Interval = tuple[float, float]


def new_rng() -> np.random.Generator:
    """The bootstrap's generator, always from the same seed (intervals are reproducible)."""
    return np.random.default_rng(SEED)


def quantile_replicates(values: np.ndarray, q: float, rng: np.random.Generator,
                        resamples: int = RESAMPLES) -> np.ndarray:
    """``np.percentile(resample, 100·q)`` of ``resamples`` bootstrap resamples of ``values`` (finite, non-empty).

    ``np.percentile`` interpolates between the order statistics k and k+1 of a
    resample (k = floor((n-1)·q)); a resample's order statistics are the data's
    at the ranks floor(n·U) of uniform order statistics, drawn directly: U_(k+1)
    ~ Beta(k+1, n-k), and the next is U_(k+1) + (1-U_(k+1))·Beta(1, n-k-1).
    """
    x = np.sort(values)
    n = x.size
    h = (n - 1) * q
    k = math.floor(h)
    frac = h - k
    u = rng.beta(k + 1, n - k, size=resamples)
    low = x[np.minimum((n * u).astype(np.int64), n - 1)]
    if frac == 0 or k + 1 >= n:
        return low
    u_next = u + (1.0 - u) * rng.beta(1, n - k - 1, size=resamples)
    high = x[np.minimum((n * u_next).astype(np.int64), n - 1)]
    return low + frac * (high - low)


def percentile_interval(replicates: np.ndarray, level: float = LEVEL) -> Interval:
    """The central ``level`` interval of bootstrap replicates (the percentile method)."""
    tail = (1.0 - level) / 2.0
    lo, hi = np.quantile(replicates, [tail, 1.0 - tail])
    return float(lo), float(hi)


def quantile_interval(values: np.ndarray, q: float, rng: np.random.Generator | None = None) -> Interval | None:
    """95 % bootstrap interval of the ``q`` quantile of ``values`` over resampled values (None when none is finite)."""
    values = values[np.isfinite(values)]
    if values.size == 0:
        return None
    return percentile_interval(quantile_replicates(values, q, rng or new_rng()))


def request_intervals(ttft: np.ndarray, tpot: np.ndarray, e2e: np.ndarray) -> dict[str, Any]:
    """``<stat>_lo`` / ``_hi`` of a point's latency medians and p90s, and of its interactivity, over its requests.

    Named as ``metrics.point_metrics`` names the figures (``ttft_s_median_lo``);
    ``band_kind`` says what the band is. Empty when the point has no latency sample.
    """
    rng = new_rng()
    row: dict[str, Any] = {}
    for prefix, values in (("ttft_s", ttft), ("tpot_s", tpot), ("e2e_s", e2e)):
        for name, q in LATENCY_QUANTILES.items():
            ci = quantile_interval(values, q, rng)
            if ci is not None:
                row[f"{prefix}_{name}_lo"], row[f"{prefix}_{name}_hi"] = ci
    row.update(inverse_interval("interactivity", row.get("tpot_s_median_lo"), row.get("tpot_s_median_hi")))
    if row:
        row["band_kind"] = REQUESTS_BAND
    return row


def inverse_interval(name: str, lo: float | None, hi: float | None) -> dict[str, float]:
    """``name_lo`` / ``name_hi`` of 1/x from x's interval (a percentile interval maps through a monotone
    function exactly); empty when x's interval is missing or touches zero."""
    if lo is None or hi is None or lo <= 0:
        return {}
    return {f"{name}_lo": 1.0 / hi, f"{name}_hi": 1.0 / lo}


def mean_interval(values: np.ndarray, rng: np.random.Generator | None = None) -> Interval | None:
    """95 % bootstrap interval of the mean of repeat figures, resampling repeats (None below two finite ones)."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    if values.size < 2:
        return None
    rng = rng or new_rng()
    means = values[rng.integers(0, values.size, size=(RESAMPLES, values.size))].mean(axis=1)
    return percentile_interval(means)


def row_interval(row: Mapping[str, Any], metric: str) -> Interval | None:
    """The bootstrap interval a metrics row carries for ``metric``; None when it has none, or when its band is
    not a bootstrap interval (the simulator's prediction band is not a confidence interval)."""
    if not str(row.get("band_kind") or "").startswith("bootstrap"):
        return None
    lo, hi = row.get(f"{metric}_lo"), row.get(f"{metric}_hi")
    if not (isinstance(lo, (int, float)) and isinstance(hi, (int, float)) and math.isfinite(lo) and math.isfinite(hi)):
        return None
    return float(lo), float(hi)


def ratio_interval(num: Interval | None, den: Interval | None) -> Interval | None:
    """Interval of a ratio from the two figures' intervals, by interval arithmetic: [lo_a/hi_b, hi_a/lo_b].

    Conservative: when each interval holds its figure the ratio's holds the ratio, so for two
    independent 95 % intervals it holds with at least 0.95² ≈ 90 % probability, and usually far more
    (both figures rarely sit at opposite ends at once). Non-negative figures only (None otherwise); an
    interval may be open (a high end of ``inf``, a low end of 0), and so may the ratio's.
    """
    if num is None or den is None or num[0] < 0 or den[0] < 0 or den[1] <= 0:
        return None
    return num[0] / den[1], (num[1] / den[0] if den[0] > 0 else math.inf)


def distinguishable(interval: Interval | None) -> bool | None:
    """Whether a ratio's interval excludes 1 (None without an interval): inside, the two are not distinguishable."""
    if interval is None:
        return None
    return not interval[0] <= 1.0 <= interval[1]
