"""The simulator's seed of an SLO search: the predicted knee, and the knee corrected by a measurement."""

from __future__ import annotations

import pytest

from scoville.sim.config import SimConfigError
from scoville.sim.knee import predict_config, predict_curve
from scoville.slo import Slo


@pytest.fixture(scope="module")
def curve():
    return predict_curve(predict_config("h200/llama-3.1-8b"), 1024, 128, 256)


def test_the_knee_is_the_last_concurrency_whose_prediction_meets_every_limit(curve):
    slo = Slo.parse("tpot_p90=12ms")
    k = curve.knee(slo)
    assert curve.tpot[k - 1] <= 0.012 < curve.tpot[k]
    assert curve.knee(Slo.parse("tpot_p90=12ms,ttft_p90=1ms")) == 1           # met nowhere
    assert curve.knee(Slo.parse("tpot_p90=10s")) == 256                        # met everywhere
    assert curve.predicted(slo, k) == {"tpot_p90": pytest.approx(float(curve.tpot[k - 1]))}


def test_a_measurement_scales_the_predicted_curve_through_itself(curve):
    slo = Slo.parse("tpot_p90=12ms")
    k = curve.knee(slo)
    exact = float(curve.tpot[k - 1]) / 0.012
    assert curve.corrected_knee(slo, k, {"tpot_p90": exact}) == k             # as predicted: no change
    slower = curve.corrected_knee(slo, k, {"tpot_p90": exact * 1.2})
    faster = curve.corrected_knee(slo, k, {"tpot_p90": exact * 0.8})
    assert slower < k < faster
    assert curve.corrected_knee(slo, k, {}) is None and curve.corrected_knee(slo, 10_000, {"tpot_p90": 1.0}) is None


def test_predict_names_hardware_and_model_or_a_config_file(tmp_path):
    cfg = predict_config("H200/llama-3.1-8b")
    assert cfg.hardware == "h200" and cfg.model == "llama-3.1-8b"
    path = tmp_path / "pinned.yaml"
    path.write_text("hardware: h200\nmodel: llama-3.1-8b\nmax_num_seqs: 64\n")
    assert predict_config(str(path)).max_num_seqs == 64
    with pytest.raises(SimConfigError, match="HARDWARE/MODEL"):
        predict_config("h200")


def test_e2e_at_a_rate_is_read_where_the_closed_loop_reaches_it(curve):
    assert curve.e2e_at_rate(0.0) == pytest.approx(float(curve.e2e[0]))
    assert curve.e2e_at_rate(1e9) == pytest.approx(float(curve.e2e[-1]))       # past saturation: the last
    mid = float(curve.request_rate[99])
    assert curve.e2e_at_rate(mid) == pytest.approx(float(curve.e2e[99]))
    assert curve.e2e_at_rate(1e9, max_in_flight=40) == pytest.approx(float(curve.e2e[39]))   # 40 requests at most


def test_a_ttft_median_limit_reads_the_predicted_median_and_a_tail_limit_the_burst_lifted_mean(curve):
    """A point opens with a burst of its users' first prompts: it lifts the mean TTFT, not the median, so a
    median limit is met at more users than a p90 limit of the same bound (which reads the mean, the safer side)."""
    loaded = slice(32, None)
    assert (curve.ttft_median[loaded] < curve.ttft[loaded]).all()
    bound = float(curve.ttft_median[127]) * 1.01
    median, tail = Slo.parse(f"ttft_median={bound}"), Slo.parse(f"ttft_p90={bound}")
    assert curve.predicted(median, 128) == {"ttft_median": pytest.approx(float(curve.ttft_median[127]))}
    assert curve.predicted(tail, 128) == {"ttft_p90": pytest.approx(float(curve.ttft[127]))}
    assert curve.knee(tail) < curve.knee(median) >= 128
