"""Frontier and interpolation on hand-made point sets."""

import math

import numpy as np
import pytest

from scoville.analysis.frontier import FrontierPoint, direction_of, frontier, pareto
from scoville.analysis.interp import Steffen


def rows(pairs, x="interactivity", y="total_throughput_per_accelerator"):
    return [{x: a, y: b, "point": i} for i, (a, b) in enumerate(pairs)]


def test_dominated_points_are_dropped_and_frontier_sorted_by_x():
    f = frontier(rows([(10, 1000), (20, 800), (15, 700), (40, 300), (30, 200), (5, 900)]))
    assert list(zip(f.xs, f.ys, strict=True)) == [(10, 1000), (20, 800), (40, 300)]
    assert sorted((p.x, p.y) for p in f.dominated) == [(5, 900), (15, 700), (30, 200)]


def test_ties_keep_one_point_per_x_and_best_y():
    f = frontier(rows([(10, 1000), (10, 1000), (10, 600), (20, 1000), (30, 100)]))
    # (10, 1000) is dominated by (20, 1000): equal throughput at higher interactivity
    assert list(zip(f.xs, f.ys, strict=True)) == [(20, 1000), (30, 100)]
    f2 = frontier(rows([(10, 1000), (10, 1000), (10, 600)]))
    assert list(zip(f2.xs, f2.ys, strict=True)) == [(10, 1000)]
    assert len(f2.dominated) == 2


def test_lower_better_axis_frontier_of_throughput_against_latency():
    r = [{"e2e_s_median": e, "total_throughput_per_accelerator": t} for e, t in
         [(1.0, 100), (2.0, 400), (1.5, 150), (3.0, 300), (4.0, 900)]]
    f = frontier(r, "e2e_s_median", "total_throughput_per_accelerator")
    assert (f.x_dir, f.y_dir) == ("lower", "higher")
    assert list(zip(f.xs, f.ys, strict=True)) == [(1.0, 100), (1.5, 150), (2.0, 400), (4.0, 900)]
    assert f.reach == 1.0
    assert f.why_undefined(0.5) == "beyond reach"  # faster than any point achieved
    assert f.why_undefined(5.0) == "below range"


def test_rows_missing_a_metric_are_skipped_not_zero():
    r = rows([(10, 1000), (20, 500)]) + [{"interactivity": 50.0, "total_throughput_per_accelerator": None},
                                         {"interactivity": float("nan"), "total_throughput_per_accelerator": 5.0}]
    f = frontier(r)
    assert f.xs == [10, 20] and not f.dominated


def test_direction_names_and_unknown_metric():
    assert direction_of("ttft_s_p99") == "lower"
    assert direction_of("tokens_per_usd_total") == "higher"
    with pytest.raises(ValueError):
        direction_of("mystery")


def test_interpolation_hits_knots_and_is_never_extrapolated():
    f = frontier(rows([(12, 45000), (25, 30000), (60, 9000), (110, 1500), (169, 118)]))
    assert f.at(169) == pytest.approx(118)
    assert f.at(60) == pytest.approx(9000)
    assert f.at(170) is None and f.why_undefined(170) == "beyond reach"
    assert f.at(5) is None and f.why_undefined(5) == "below range"
    assert f.method == "steffen"
    # below every measured interactivity, the highest-throughput point is a measured lower bound
    assert f.at_least(5) == 45000
    assert f.at_least(170) is None and f.at_least(100) is None


def test_frontier_ending_early_is_beyond_reach_past_its_last_point():
    short = frontier(rows([(10, 5000), (50, 1000)]))
    assert short.at(50) == pytest.approx(1000)
    assert short.at(50.0001) is None
    assert short.reach == 50


def test_steffen_is_monotone_and_does_not_overshoot_on_log_spaced_concurrency():
    # throughput/interactivity of a concurrency sweep 1, 2, 4, ..., 256: x spans decades, y falls steeply
    conc = 2.0 ** np.arange(9)
    inter = 200.0 / np.sqrt(conc)          # interactivity falls as concurrency doubles
    tput = 50.0 * conc / (1 + conc / 64)    # throughput saturates
    order = np.argsort(inter)
    s = Steffen(inter[order], tput[order])
    xs, ys = s.sample(2000)
    assert np.all(np.diff(ys) <= 1e-9)      # decreasing everywhere: no bumps between points
    assert ys.max() <= tput.max() + 1e-9 and ys.min() >= tput.min() - 1e-9
    # every interval stays between its two end values
    for i in range(len(s.x) - 1):
        inside = (xs >= s.x[i]) & (xs <= s.x[i + 1])
        lo, hi = sorted((s.y[i], s.y[i + 1]))
        assert np.all((ys[inside] >= lo - 1e-9) & (ys[inside] <= hi + 1e-9))


def test_steffen_flat_segment_stays_flat_and_linear_for_two_points():
    s = Steffen([0, 1, 2, 3], [5, 5, 5, 1])
    assert s(0.5) == pytest.approx(5) and s(1.5) == pytest.approx(5)
    two = Steffen([0, 10], [0, 100])
    assert two(2.5) == pytest.approx(25)
    one = Steffen([3], [7])
    assert one(3) == 7 and one(3.1) is None


def test_steffen_matches_a_cubic_it_can_represent():
    # on a monotone convex function with dense knots the interpolant is close to the truth
    x = np.linspace(1, 10, 40)
    s = Steffen(x, 1000 / x)
    for at in (1.3, 4.44, 9.9):
        assert s(at) == pytest.approx(1000 / at, rel=2e-3)


def test_steffen_rejects_unsorted_knots():
    with pytest.raises(ValueError):
        Steffen([1, 1, 2], [3, 2, 1])


def test_pareto_points_carry_their_rows():
    pts = [FrontierPoint(1, 2, {"run_id": "a"}), FrontierPoint(2, 1, {"run_id": "b"}),
           FrontierPoint(0.5, 0.5, {"run_id": "c"})]
    keep, dom = pareto(pts)
    assert [p.row["run_id"] for p in keep] == ["a", "b"] and dom[0].row["run_id"] == "c"
    assert not math.isnan(keep[0].x)


def test_a_frontier_prints_as_its_kept_points_in_two_columns():
    f = frontier([{"interactivity": 10.0, "total_throughput_per_accelerator": 5000.0},
                  {"interactivity": 50.0, "total_throughput_per_accelerator": 1234.5},
                  {"interactivity": 20.0, "total_throughput_per_accelerator": 100.0}])   # dominated
    lines = str(f).splitlines()
    assert lines[0].split() == ["interactivity", "total_throughput_per_accelerator"]
    assert [line.split() for line in lines[1:]] == [["10", "5,000"], ["50", "1,234"]]
