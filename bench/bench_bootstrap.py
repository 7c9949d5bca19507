"""What the bootstrap intervals cost per load point (``scoville.stats.request_intervals``).

One point's intervals: TTFT, TPOT and E2E median and p90 (1000 resamples each) and the
interactivity interval, for points of n requests. For comparison, the same six
intervals by literal resampling (an n × 1000 index matrix per statistic), which is what
the order-statistic draws replace. Prints the median of ``--rounds`` timings.

    python bench/bench_bootstrap.py                     # n = 100, 1,000, 10,000, 100,000
    python bench/bench_bootstrap.py --sizes 10000 --rounds 20
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from scoville.stats import RESAMPLES, percentile_interval, request_intervals  # noqa: E402


def literal(ttft: np.ndarray, tpot: np.ndarray, e2e: np.ndarray) -> None:
    """The six latency intervals by materialising every resample (the reference method)."""
    rng = np.random.default_rng(0)
    for values in (ttft, tpot, e2e):
        idx = rng.integers(0, values.size, size=(RESAMPLES, values.size))
        reps = np.percentile(values[idx], [50, 90], axis=1)
        for row in reps:
            percentile_interval(row)


def timed(fn, args: tuple, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100,1000,10000,100000", help="requests per point, comma-separated")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--literal-max", type=int, default=10_000, help="largest n timed by literal resampling")
    args = ap.parse_args()
    rng = np.random.default_rng(1)
    print(f"{'requests':>9}  {'order statistics (ms)':>22}  {'literal resampling (ms)':>24}")
    for n in (int(s) for s in args.sizes.split(",")):
        ttft, tpot = rng.lognormal(-1.5, 0.6, n), rng.lognormal(-4.0, 0.3, n)
        data = (ttft, tpot, ttft + 100 * tpot)
        fast = timed(request_intervals, data, args.rounds) * 1e3
        slow = f"{timed(literal, data, max(1, args.rounds // 3)) * 1e3:,.1f}" if n <= args.literal_max else "—"
        print(f"{n:>9,}  {fast:>22.2f}  {slow:>24}")


if __name__ == "__main__":
    main()
