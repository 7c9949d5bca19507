"""Bootstrap intervals (scoville.stats): hand cases, agreement with literal resampling, coverage, determinism."""

import math

import numpy as np
import pytest

from scoville.stats import (
    REPEATS_BAND,
    REQUESTS_BAND,
    distinguishable,
    mean_interval,
    new_rng,
    quantile_interval,
    quantile_replicates,
    ratio_interval,
    request_intervals,
    row_interval,
)


def test_constant_data_gives_a_zero_width_interval():
    for n in (1, 2, 7, 500):
        for q in (0.5, 0.9):
            assert quantile_interval(np.full(n, 0.25), q) == (0.25, 0.25)
    assert mean_interval(np.array([3.0, 3.0, 3.0])) == (3.0, 3.0)


def test_no_interval_without_data():
    assert quantile_interval(np.array([np.nan, np.inf]), 0.5) is None
    assert mean_interval(np.array([4.0])) is None            # one repeat says nothing about the next
    assert mean_interval(np.array([4.0, np.nan])) is None
    assert request_intervals(np.array([]), np.array([]), np.array([])) == {}


@pytest.mark.parametrize("n, q", [(9, 0.5), (10, 0.5), (40, 0.9), (41, 0.9), (3, 0.9)])
def test_order_statistic_draws_match_literal_resampling(n, q):
    """Drawing a resample's quantile through uniform order statistics gives what resampling gives."""
    x = np.random.default_rng(n).lognormal(0.0, 1.0, n)
    fast = quantile_replicates(x, q, np.random.default_rng(1), resamples=40_000)
    idx = np.random.default_rng(2).integers(0, n, size=(40_000, n))
    slow = np.percentile(x[idx], 100 * q, axis=1)
    spread = x.max() - x.min()
    for level in (0.025, 0.25, 0.5, 0.75, 0.975):
        assert abs(np.quantile(fast, level) - np.quantile(slow, level)) <= 0.05 * spread, level
    assert abs(fast.mean() - slow.mean()) <= 0.01 * spread


def test_median_interval_covers_the_true_median_about_95_percent_of_the_time():
    rng = np.random.default_rng(123)
    true_median = math.log(2.0)            # of an exponential with mean 1
    covered = sum(lo <= true_median <= hi for lo, hi in
                  (quantile_interval(rng.exponential(1.0, 200), 0.5) for _ in range(400)))
    assert 0.90 <= covered / 400 <= 0.99


def test_mean_interval_over_repeats_is_the_range_for_two_and_narrows_with_more():
    assert mean_interval(np.array([10.0, 12.0])) == (10.0, 12.0)  # 2 repeats: only 3 resample means exist
    many = np.random.default_rng(5).normal(100.0, 5.0, 20)
    lo, hi = mean_interval(many)
    assert lo < many.mean() < hi and hi - lo < many.max() - many.min()


def test_intervals_are_deterministic():
    x = np.random.default_rng(9).exponential(1.0, 1000)
    assert quantile_interval(x, 0.9) == quantile_interval(x, 0.9)
    assert request_intervals(x, x / 10, x * 2) == request_intervals(x, x / 10, x * 2)
    assert new_rng().random() == new_rng().random()


def test_request_intervals_name_the_columns_and_invert_tpot_for_interactivity():
    rng = np.random.default_rng(0)
    ttft, tpot = rng.exponential(0.2, 300), rng.uniform(0.01, 0.03, 300)
    row = request_intervals(ttft, tpot, ttft + 100 * tpot)
    assert row["band_kind"] == REQUESTS_BAND
    for prefix in ("ttft_s", "tpot_s", "e2e_s"):
        for stat in ("median", "p90"):
            assert row[f"{prefix}_{stat}_lo"] <= np.percentile(
                {"ttft_s": ttft, "tpot_s": tpot, "e2e_s": ttft + 100 * tpot}[prefix],
                {"median": 50, "p90": 90}[stat]) <= row[f"{prefix}_{stat}_hi"]
    assert row["interactivity_lo"] == pytest.approx(1 / row["tpot_s_median_hi"])
    assert row["interactivity_hi"] == pytest.approx(1 / row["tpot_s_median_lo"])
    assert row["interactivity_lo"] <= 1 / np.median(tpot) <= row["interactivity_hi"]


def test_ratio_interval_and_distinguishability():
    assert ratio_interval((90.0, 110.0), (45.0, 55.0)) == pytest.approx((90 / 55, 110 / 45))
    assert distinguishable(ratio_interval((90.0, 110.0), (45.0, 55.0))) is True
    assert distinguishable(ratio_interval((95.0, 105.0), (98.0, 104.0))) is False   # contains 1
    assert distinguishable(None) is None
    # an open interval (nothing bounds a figure from below but 0, or from above) gives an open ratio
    assert ratio_interval((1.0, 2.0), (0.0, 1.0)) == (1.0, math.inf)
    assert ratio_interval((0.0, 0.5), (1.0, math.inf)) == (0.0, 0.5)
    assert distinguishable((0.0, 0.5)) is True and distinguishable((0.0, math.inf)) is False
    assert ratio_interval(None, (1.0, 2.0)) is None and ratio_interval((1.0, 2.0), (-1.0, 2.0)) is None


def test_only_bootstrap_bands_are_confidence_intervals():
    row = {"interactivity": 50.0, "interactivity_lo": 45.0, "interactivity_hi": 55.0}
    assert row_interval({**row, "band_kind": REPEATS_BAND}, "interactivity") == (45.0, 55.0)
    assert row_interval({**row, "band_kind": "simulator 80% prediction band"}, "interactivity") is None
    assert row_interval(row, "interactivity") is None
    assert row_interval({"band_kind": REQUESTS_BAND, "interactivity_lo": None}, "interactivity") is None
