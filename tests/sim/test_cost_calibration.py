"""The three seed points: a regression guard on what the simulator may be fitted to.

TensorRT-LLM's host costs in data/hardware/frameworks.yaml were fitted on these 9 published figures
(bench/bench_sim_calibration.py --fit), each predicted over the deployments InferenceX ran it on (Dynamo
disaggregated pools, up to its configuration's concurrency); kernel times come from measured tables and its
kernel_scale from the module tables (bench/bench_module_scale.py, decode and prefill). With those scales held
the highest interactivities land from 13% slow (gpt-oss) to 10% fast (Kimi) and the peaks +30% (gpt-oss) to -18%
(Kimi; +13% to -23% before the search sized prefill pools up to 95% busy and tried the load balancer, which
reaches the deployments InferenceX ran): host costs cannot close it. A change to the cost model, the estimator
or the search that moves a prediction further off a seed fails here, not silently in a report. One figure is a
known miss (DeepSeek-R1 throughput at its highest interactivity, -48%); it is held to a factor instead of a
percentage.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from scoville.sim.frameworks import load_framework
from scoville.sim.kernels import tables

BENCH = Path(__file__).resolve().parents[2] / "bench" / "bench_sim_calibration.py"
KNOWN_MISSES = {("deepseek-r1@gb300", "tput_per_kw_at_max_interactivity")}


@pytest.fixture(scope="module")
def cal():
    spec = importlib.util.spec_from_file_location("bench_sim_calibration", BENCH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod          # dataclasses resolve their module by name
    spec.loader.exec_module(mod)
    return mod


def test_reference_data_documents_its_source_and_token_convention(cal):
    ref = cal.reference()
    assert ref["throughput_tokens"] == "total" and ref["power_basis"] == "rated" and "InferenceX" in ref["source"]
    assert len(ref["points"]) == 3 and ref["claims"]["hardware"] == "jalapeno"


@pytest.mark.slow   # the calibration bench's nine reference figures, each through the whole layout search
@pytest.mark.skipif(tables.data_dir() is None,
                    reason="the seeds are fitted with measured kernel tables (scoville[silicon])")
def test_seed_figures_stay_where_the_fit_put_them(cal):
    rows = cal.errors(cal.reference(), load_framework("trtllm"))
    assert len(rows) == 9
    for name, key, pub, pred in rows:
        ratio = pred / pub
        if (name, key) in KNOWN_MISSES:
            assert 0.4 <= ratio <= 2.5, f"{name} {key}: {pred:.4g} vs {pub:.4g}"
        else:
            assert abs(ratio - 1) <= 0.35, f"{name} {key}: {pred:.4g} vs {pub:.4g}"


@pytest.fixture(scope="module")
def module_scale():
    spec = importlib.util.spec_from_file_location("bench_module_scale", BENCH.with_name("bench_module_scale.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow   # ~60,000 module cells per framework against our kernel sums, six systems
@pytest.mark.skipif(tables.data_dir() is None, reason="the module tables come with scoville[silicon]")
@pytest.mark.parametrize("framework", ["trtllm", "vllm"])
def test_kernel_scales_are_what_the_module_tables_measure(module_scale, framework):
    """frameworks.yaml's kernel_scale and prefill_kernel_ratio are derived, not chosen: the median whole-module /
    kernel-sum ratios of bench/bench_module_scale.py, decode and context, over the collections that time what a
    server runs. New tables or a changed cost model that move them fail here, not silently."""
    decode = [c for hw in module_scale.SYSTEMS for c in module_scale.cells(hw, framework, "decode")]
    context = [c for hw in module_scale.SYSTEMS for c in module_scale.cells(hw, framework, "context")]
    assert sum(c.serving for c in decode) > 10_000 and sum(c.serving for c in context) > 7_000
    costs = load_framework(framework)
    assert costs.kernel_scale == pytest.approx(module_scale.supported_scale(decode), abs=0.01)
    ratio = module_scale.supported_scale(context) / module_scale.supported_scale(decode)
    assert costs.prefill_kernel_ratio == pytest.approx(ratio, abs=0.01)


@pytest.mark.skipif(tables.data_dir() is None, reason="the module tables come with scoville[silicon]")
def test_only_vllm_module_collections_that_time_serving_count():
    """aiconfigurator-core's older vLLM module collections ran a norm chain serving never runs (its own note in
    b200's collection_meta.yaml); B200 (re-collected) and GB300 (serving runtime) count, H200 does not."""
    newest = {hw: tables.table_path(hw, "mla", "vllm", "mla_generation_module_perf.parquet")
              for hw in ("b200_sxm", "gb300", "h200_sxm")}
    assert all(newest.values())
    serving = {hw: tables.times_serving(path, "vllm") for hw, path in newest.items()}
    assert serving == {"b200_sxm": True, "gb300": True, "h200_sxm": False}
