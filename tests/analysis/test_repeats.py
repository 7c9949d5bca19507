"""--repeats as the analysis sees them: one point per load with intervals, ratios with intervals, drawn bars."""

import numpy as np
import pytest
from runs_factory import BASELINE_POINTS, make_run

from scoville.analysis import compare, load_systems
from scoville.reporting.charts import frontier_chart
from scoville.reporting.plotly_fig import figure
from scoville.results.store import read_point_metrics
from scoville.stats import REPEATS_BAND, REQUESTS_BAND

Y = "total_throughput_per_kw"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    kw = {"jitter": 0.15, "requests_per_point": 12, "repeats": 4}
    a = make_run(root, "20261203T100000Z-aaaaaa", BASELINE_POINTS, seed=1, **kw)
    # 0.1% faster, with the same request-to-request noise (same seed): a difference the noise hides
    b = make_run(root, "20261203T100001Z-bbbbbb", [(x, y * 1.001) for x, y in BASELINE_POINTS], seed=1, **kw)
    fast = make_run(root, "20261203T100002Z-cccccc", [(x * 1.6, y * 2.0) for x, y in BASELINE_POINTS], seed=3, **kw)
    return a, b, fast


def test_repeats_keep_their_rows_on_disk_and_fold_into_one_point_per_load(runs):
    a, _, _ = runs
    stored = read_point_metrics(a)
    assert len(stored) == 4 * len(BASELINE_POINTS)
    assert {r["band_kind"] for r in stored} == {REQUESTS_BAND}   # each repeat: intervals over its requests
    assert [r["repeat"] for r in stored[:6]] == [1, 1, 1, 1, 1, 2] and stored[5]["load"] == "c=1"
    (system,) = load_systems([[a]])
    assert len(system.repeat_rows) == len(stored) and len(system.rows) == len(BASELINE_POINTS)
    for row in system.rows:
        reps = [r for r in system.repeat_rows if r["load"] == row["label"]]
        assert row["repeats"] == 4 and row["repeat_points"] == [r["point"] for r in reps]
        assert row["band_kind"] == REPEATS_BAND
        assert row["num_ok"] == sum(r["num_ok"] for r in reps)
        assert row[Y] == pytest.approx(np.mean([r[Y] for r in reps]))
        assert min(r[Y] for r in reps) <= row[f"{Y}_lo"] <= row[Y] <= row[f"{Y}_hi"] <= max(r[Y] for r in reps)
        assert row["interactivity"] == pytest.approx(1 / row["tpot_s_median"])   # still 1/median(TPOT)
        assert row["interactivity_lo"] == pytest.approx(1 / row["tpot_s_median_hi"])
        assert row["ttft_s_median_lo"] <= row["ttft_s_median"] <= row["ttft_s_median_hi"]


def test_a_difference_inside_the_noise_is_not_distinguishable_and_a_large_one_is(runs):
    a, b, fast = runs
    c = compare(load_systems([[a], [b], [fast]]), ["common"], per="kW")
    _, again, quicker = c.systems
    assert again.ratios["peak"] == pytest.approx(1.001, rel=1e-4)
    for key in ("peak", "highest_interactivity"):
        lo, hi = again.ratio_intervals[key]
        assert lo <= again.ratios[key] <= hi and lo <= 1.0 <= hi, key
        assert not quicker.ratio_intervals[key][0] <= 1.0 <= quicker.ratio_intervals[key][1], key
    at_again, at_quicker = again.at[0], quicker.at[0]
    assert at_again.ratio_interval is not None and at_again.ratio_interval[0] <= 1.0 <= at_again.ratio_interval[1]
    assert at_quicker.ratio_interval is not None and at_quicker.ratio_interval[0] > 1.0
    _, rows = c.table()
    peak = next(r for r in rows if r[0].startswith("peak"))
    assert peak[4].endswith("not distinguishable") and "not distinguishable" not in peak[5]
    d = c.to_dict()
    assert d["systems"][1]["distinguishable"]["peak"] is False and d["systems"][2]["distinguishable"]["peak"] is True
    assert d["systems"][2]["at_interactivity"][0]["distinguishable"] is True
    assert "bootstrap" in d["interval_method"]


def test_frontier_charts_draw_the_intervals_across_repeats(runs):
    a, _, _ = runs
    chart = frontier_chart(load_systems([[a]]), "interactivity", "kW")
    points = next(s for s in chart.series if s.kind == "points")
    assert points.y_band and points.x_band and all(b is not None for b in points.y_band)
    assert all(lo <= y <= hi for (lo, hi), y in zip(points.y_band, points.y, strict=True))
    assert REPEATS_BAND in chart.note
    trace = next(t for t in figure(chart)["data"] if "error_y" in t)
    assert all(v >= 0 for v in trace["error_y"]["array"] + trace["error_y"]["arrayminus"])


def _system(label, points, x_halfwidth):
    """A system of hand-made rows: (interactivity, tok/s/kW) points with repeat intervals of ±x_halfwidth and ±1%."""
    from pathlib import Path

    from scoville.analysis.runs import System
    from scoville.results.manifest import Manifest

    rows = [{"interactivity": x, "interactivity_lo": x - x_halfwidth, "interactivity_hi": x + x_halfwidth,
             Y: y, f"{Y}_lo": 0.99 * y, f"{Y}_hi": 1.01 * y, "band_kind": REPEATS_BAND, "num_ok": 10}
            for x, y in points]
    return System(label, [Path(label)], [Manifest()], rows, rows)


def test_doubt_about_interactivity_widens_the_interval_of_a_steep_frontier():
    steep = [(100.0, 1_000.0), (98.0, 3_000.0)]           # 2% less interactivity buys 3x the throughput
    base = _system("base", [(100.0, 1_000.0), (98.0, 3_000.0)], 0.1)
    sure = compare([base, _system("sure", [(x, 0.5 * y) for x, y in steep], 0.1)], [99.0], per="kW")
    vague = compare([base, _system("vague", [(x, 0.5 * y) for x, y in steep], 5.0)], [99.0], per="kW")
    a_sure, a_vague = sure.systems[1].at[0], vague.systems[1].at[0]
    assert a_sure.value == pytest.approx(a_vague.value) and a_sure.ratio == pytest.approx(0.5)
    lo, hi = a_sure.interval
    assert lo <= a_sure.value <= hi < 3_000.0 and a_sure.ratio_interval[1] < 1.0   # half the baseline: distinguishable
    # the same points, but no one knows their interactivity within 5 tok/s/user: 99 may lie past either one
    assert a_vague.interval == (0.0, float("inf"))
    assert a_vague.ratio_interval[0] <= 1.0 <= a_vague.ratio_interval[1]
    assert "not distinguishable" in vague.table()[1][-1][-1]


def test_a_load_is_valid_only_if_every_repeat_is_and_keeps_their_reasons():
    from scoville.analysis.repeats import combine_repeats

    reason = {"code": "errors", "detail": "3 of 40 measured requests failed"}
    rows = [{"point": 0, "load": "c=4", "repeat": 1, "valid": True, "invalid_reasons": [], "tpot_s_median": 0.02},
            {"point": 1, "load": "c=4", "repeat": 2, "valid": False, "invalid_reasons": [reason],
             "tpot_s_median": 0.03}]
    row = combine_repeats(rows)
    assert row["valid"] is False and row["invalid_reasons"] == [reason]
    assert combine_repeats([dict(rows[0]), dict(rows[0], point=1, repeat=2)])["valid"] is True
