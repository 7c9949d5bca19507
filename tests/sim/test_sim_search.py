"""Deployment search: the frontier is the non-dominated set of what it looked at, it searches the layouts
real deployments use, each point's configuration reproduces it, and `scoville simulate` writes it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from scoville.errors import UserError
from scoville.results.store import read_point_metrics
from scoville.sim.acceptance import MTP_ACCEPTANCE
from scoville.sim.config import AttentionDpBalanceConfig, SimConfig
from scoville.sim.defaults import fp8_cache_is_slower, resolve_kv_dtype
from scoville.sim.kernels import tables
from scoville.sim.search import SearchSpace, draft_options, instance_layouts, pareto, search
from scoville.sim.steady import estimate
from scoville.simulation import SimulateSpec, base_config

needs_tables = pytest.mark.skipif(tables.data_dir() is None, reason="needs aiconfigurator-core's kernel tables")
BASE = SimConfig(hardware="h200", model="llama-3.1-8b", kv_dtype="fp8")
ISL, OSL = 0.9 * 1024, 0.9 * 1024


@pytest.fixture(scope="module")
def result():
    return search(BASE, ISL, OSL, space=SearchSpace(max_accelerators=2, max_concurrency=256), points=8)


def test_frontier_is_non_dominated_and_spans_interactivity(result):
    front = result.frontier
    assert 2 <= len(front) <= 8
    xs = [p.interactivity for p in front]
    ys = [p.total_tput_per_accelerator for p in front]
    assert xs == sorted(xs, reverse=True)                   # fastest first
    assert ys == sorted(ys)                                 # and each slower point buys throughput
    assert all(p.ttft <= 0.3 * p.e2e for p in front)        # no queue-bound point
    assert all(0 < p.sigma < 2 and p.config.accelerators <= 2 for p in front)


def test_each_points_configuration_reproduces_it(result):
    for p in result.frontier:
        est = estimate(p.config, ISL, OSL, np.array([p.concurrency]))
        assert est.total_tput_per_accelerator[0] == pytest.approx(p.total_tput_per_accelerator, rel=0.05)
        assert est.interactivity[0] == pytest.approx(p.interactivity, rel=0.05)


def test_pareto_keeps_the_upper_envelope():
    xs = np.array([10, 5, 4, 1, 1.0])
    ys = np.array([1, 5, 4, 9, 8.0])
    assert [(xs[i], ys[i]) for i in pareto(xs, ys)] == [(10, 1), (5, 5), (1, 9)]


def test_layouts_include_wide_ep_across_nvl72_and_multi_node_hopper():
    gb300 = SimConfig(hardware="gb300", model="deepseek-r1", precision="nvfp4", kv_dtype="fp8")
    wide = instance_layouts(gb300, SearchSpace(), 8192 + 1024)
    assert any(p.dp == 64 and p.ep == 64 for p in wide)     # the whole NVL72 domain's worth of experts
    h100 = SimConfig(hardware="h100", model="deepseek-r1", kv_dtype="fp8")
    multi = instance_layouts(h100, SearchSpace(), 8192 + 1024)
    assert min(p.accelerators for p in multi) == 16 and max(p.accelerators for p in multi) == 32
    # TP spans at most two nodes (InferenceX's H100 recipes: SGLang tp16, TensorRT-LLM tep16); EP spans more
    assert max(p.tp for p in multi) == 16 and any(p.tp == 16 and p.ep == 16 for p in multi)
    assert all(p.tp == 1 for p in multi if p.accelerators == 32)
    single_node = instance_layouts(SimConfig(hardware="h100", model="llama-3.1-8b"), SearchSpace(), 2048)
    assert all(p.accelerators <= 8 for p in single_node)    # a model that fits one node is never split over two


@needs_tables
def test_tensorrt_llms_wide_ep_layouts_are_searched_under_its_load_balancer_too():
    """A TensorRT-LLM wide-EP layout comes also with the balancer's 256 and 288 slots where its tables time them
    (288 up to ep32), never under another framework or off the wide-EP path."""
    trt = SimConfig(hardware="gb200", model="deepseek-r1", precision="nvfp4", kv_dtype="fp8", framework="trtllm")
    slots = {(p.dp, p.ep, p.expert_slots) for p in instance_layouts(trt, SearchSpace(), 8192 + 1024)}
    assert {(16, 16, None), (16, 16, 256), (16, 16, 288), (32, 32, 288), (64, 64, 256)} <= slots
    assert (64, 64, 288) not in slots                      # 288 slots do not divide over 64 ranks
    assert all(s is None or (dp > 1 and ep > 8) for dp, ep, s in slots)
    sglang = trt.model_copy(update={"framework": "sglang"})
    assert all(p.expert_slots is None for p in instance_layouts(sglang, SearchSpace(), 8192 + 1024))


@needs_tables
def test_the_search_is_never_far_below_a_deployment_inferencex_ran():
    """InferenceX's GB200 DeepSeek-R1 FP4 8k/1k recipe at 1229 users (7 DEP4 prefill instances, one DEP16 decode
    instance under the load balancer's 256 slots, MTP1) priced by the same estimator: the default search, which
    covers that deployment, reaches within 10% of it at that interactivity (the step of its concurrency and pool
    grids); it fell 18% short while it sized prefill pools 80% busy and left the balancer out."""
    base = SimConfig(hardware="gb200", model="deepseek-r1", precision="nvfp4", kv_dtype="fp8", framework="trtllm",
                     attention_dp_balance=AttentionDpBalanceConfig())
    dep16 = {"ep": 16, "dp": 16, "expert_slots": 256}
    recipe = SimConfig.model_validate({
        **base.model_dump(), "parallel": dep16, "speculative": {"acceptance_rate": 0.85},
        "disaggregation": {"prefill": {"parallel": {"ep": 4, "dp": 4}, "replicas": 7, "max_num_batched_tokens": 16384},
                           "decode": {"parallel": dep16, "max_num_seqs": 1024}}})
    isl, osl = 0.9 * 8192, 0.9 * 1024
    ran = estimate(recipe, isl, osl, np.array([1229.0]), osl_spread=1 / 0.9)
    found = search(base, isl, osl, osl_spread=1 / 0.9, space=SearchSpace(unified=False, max_concurrency=4096),
                   points=64).frontier
    at_least_as_fast = [p.total_tput_per_accelerator for p in found if p.interactivity >= ran.interactivity[0]]
    assert max(at_least_as_fast) >= 0.9 * ran.total_tput_per_accelerator[0]


@needs_tables
def test_searching_mtp_as_well_never_leaves_a_hole_where_plain_pools_reach():
    """Offering drafts can only add deployments: at every interactivity the plain-only search reaches, the search
    with MTP reaches within the step of its grids (10%) of it. GB200 FP8 SGLang 1k/1k disaggregated: MTP1 pools
    screened above the plain DEP16/DEP32 ones from 35 to 60 tok/s/user, came out over the bound on the wait for a
    first token, and while only the screen's overall envelope was confirmed, the plain pools never were: at 40
    tok/s/user the frontier fell to 0.88 of the plain search's (to 0.76 of InferenceX's recipe there)."""
    base = SimConfig(hardware="gb200", model="deepseek-r1", precision="fp8", kv_dtype="fp8", framework="sglang")
    isl, osl = 0.9 * 1024, 0.9 * 1024

    def frontier(mtp: str) -> tuple[np.ndarray, np.ndarray]:
        space = SearchSpace(unified=False, max_concurrency=6144, max_accelerators=72, mtp=mtp)
        found = search(base, isl, osl, osl_spread=1 / 0.9, space=space, points=2000).frontier
        return (np.array([p.interactivity for p in found]), np.array([p.total_tput_per_accelerator for p in found]))

    plain_x, plain_y = frontier("off")
    both_x, both_y = frontier("auto")
    reach = np.array([both_y[both_x >= 0.995 * x].max(initial=0.0) for x in plain_x])
    assert np.all(reach >= 0.9 * plain_y), list(zip(plain_x.round(1), (reach / plain_y).round(2), strict=True))


@needs_tables
def test_the_search_sweeps_a_disaggregated_deployment_below_its_design_load():
    """InferenceX's H200 DeepSeek-R1 SGLang 1k/1k recipe at its fastest: 16 users over nine TP8 decode instances
    with MTP2, priced by the estimator. The search's pools hold a whole number of users an instance, and one user
    more doubles throughput per GPU; estimated at its design load alone, the nearest deployment at least as fast
    reached 0.60 of the recipe's throughput; swept down to 0.6 of it, as a benchmark sweeps one, within 15%."""
    base = SimConfig(hardware="h200", model="deepseek-r1", precision="fp8", kv_dtype="fp8", framework="sglang")
    recipe = SimConfig.model_validate({
        **base.model_dump(), "parallel": {"tp": 8}, "speculative": {"num_draft_tokens": 2, "acceptance_rate": 0.75},
        "disaggregation": {"prefill": {"parallel": {"tp": 8}}, "kv_transfer": "scaleout",
                           "decode": {"parallel": {"tp": 8}, "replicas": 9, "max_num_seqs": 16}}})
    isl, osl = 0.9 * 1024, 0.9 * 1024
    ran = estimate(recipe, isl, osl, np.array([16.0]), osl_spread=1 / 0.9)
    found = search(base, isl, osl, osl_spread=1 / 0.9, points=2000,
                   space=SearchSpace(unified=False, max_concurrency=32, max_accelerators=80)).frontier
    at_least_as_fast = [p.total_tput_per_accelerator for p in found if p.interactivity >= ran.interactivity[0]]
    assert max(at_least_as_fast) >= 0.85 * ran.total_tput_per_accelerator[0]


def test_mtp_is_searched_only_where_the_model_has_mtp_heads():
    from scoville.catalog.models import load_model

    ds = draft_options(SimConfig(hardware="gb300", model="deepseek-r1"), load_model("deepseek-r1"), SearchSpace())
    assert ds[0] is None and [d.num_draft_tokens for d in ds[1:]] == list(MTP_ACCEPTANCE)
    assert draft_options(BASE, load_model("llama-3.1-8b"), SearchSpace()) == [None]
    assert draft_options(SimConfig(hardware="gb300", model="deepseek-r1"), load_model("deepseek-r1"),
                         SearchSpace(mtp="off")) == [None]


def test_disaggregated_pools_are_sized_and_priced(result):
    big = search(SimConfig(hardware="gb300", model="deepseek-r1", precision="nvfp4", kv_dtype="fp8",
                           framework="trtllm"), 0.9 * 8192, 0.9 * 1024, space=SearchSpace(mtp="off"), points=8)
    disagg = [p for p in big.frontier if p.config.disaggregation is not None]
    assert disagg, "wide-EP disaggregated decode should reach the DeepSeek-R1 frontier on NVL72"
    for p in disagg:
        d = p.config.disaggregation
        assert d.prefill.replicas >= 1 and d.decode.max_num_seqs >= 1
        assert d.kv_transfer == ("scaleup" if p.config.accelerators <= 72 else "scaleout")


def test_no_unified_searches_disaggregated_pools_only():
    base = SimConfig(hardware="gb200", model="gpt-oss-120b", kv_dtype="fp8", framework="trtllm")
    both = search(base, 0.9 * 8192, 0.9 * 1024, space=SearchSpace(mtp="off", max_concurrency=512), points=8)
    pools = search(base, 0.9 * 8192, 0.9 * 1024, space=SearchSpace(mtp="off", max_concurrency=512, unified=False),
                   points=8)
    assert pools.frontier and all(p.config.disaggregation is not None for p in pools.frontier)
    # a narrower search never beats the wider one at either end of the frontier (thinning keeps both ends)
    assert max(p.total_tput_per_accelerator for p in both.frontier) >= max(
        p.total_tput_per_accelerator for p in pools.frontier)
    assert both.frontier[0].interactivity >= pools.frontier[0].interactivity
    with pytest.raises(UserError, match="nothing to search"):
        search(base, ISL, OSL, space=SearchSpace(unified=False, disaggregation=False))


def test_a_model_that_fits_nowhere_is_one_line():
    with pytest.raises(UserError, match="does not fit"):
        search(SimConfig(hardware="h100", model="deepseek-r1"), ISL, OSL, space=SearchSpace(max_accelerators=8))


@pytest.mark.skipif(tables.data_dir() is None, reason="the choice reads measured kernel tables (scoville[silicon])")
def test_auto_kv_cache_is_fp8_unless_the_frameworks_own_kernel_runs_it_slower():
    # SGLang's FP8 MLA decode kernel on Hopper takes ~6x its BF16 one at 16 heads, 64 sequences, 8k context;
    # TensorRT-LLM's is faster on FP8, and on Blackwell both are
    assert fp8_cache_is_slower("h200", "deepseek-r1", "sglang")
    assert resolve_kv_dtype("auto", "h200", "deepseek-r1", "sglang") == "bf16"
    assert resolve_kv_dtype("auto", "h200", "deepseek-r1", "trtllm") == "fp8"
    assert resolve_kv_dtype("auto", "b200", "deepseek-r1", "sglang") == "fp8"
    assert resolve_kv_dtype("auto", "h200") == "fp8"                      # nothing to compare without the stack
    assert resolve_kv_dtype("fp8", "h200", "deepseek-r1", "sglang") == "fp8"   # an explicit choice stands
    assert resolve_kv_dtype("auto", "a100", "deepseek-r1", "sglang") == "bf16"   # no FP8 math
    assert resolve_kv_dtype("auto", "epyc-zen2-2vcpu", precision="fp32") == "fp32"   # the cache follows the model


def test_auto_kv_cache_follows_an_fp32_checkpoint(tmp_path: Path):
    """A checkpoint saved in float32 and served as it is (no --precision) keeps an FP32 cache, as the server's auto
    cache dtype follows the model's; served in BF16 it does not."""
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 512, "intermediate_size": 1408,
           "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 4, "vocab_size": 8000,
           "max_position_embeddings": 4096, "torch_dtype": "float32"}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    model = str(tmp_path / "config.json")
    assert resolve_kv_dtype("auto", "epyc-zen2-2vcpu", model) == "fp32"
    assert resolve_kv_dtype("auto", "epyc-zen2-2vcpu", model, precision="native") == "fp32"
    assert resolve_kv_dtype("auto", "epyc-zen2-2vcpu", model, precision="bf16") == "bf16"


def test_the_search_deploys_tensorrt_llm_attention_dp_with_its_balance_and_the_others_without():
    """InferenceX's TensorRT-LLM DEP recipes all enable the attention-DP balance (TensorRT-LLM's own default is
    off), so the search's TensorRT-LLM layouts hold it at TensorRT-LLM's default timeout and batching wait;
    vLLM and SGLang have no such hold."""
    def balance(framework: str) -> AttentionDpBalanceConfig | None:
        spec = SimulateSpec.of_flat(hardware="b200", model="deepseek-r1", framework=framework)
        return base_config(spec, None).attention_dp_balance

    assert balance("trtllm") == AttentionDpBalanceConfig(timeout_iters=50, batching_wait_iters=10)
    assert balance("vllm") is None and balance("sglang") is None


def _app() -> typer.Typer:
    from scoville.cli import simulate_cmd

    app = typer.Typer()
    simulate_cmd.register(app)

    @app.command("noop")
    def _noop() -> None:  # a second command keeps Typer in multi-command mode
        pass
    return app


def test_simulate_searches_and_writes_an_analytic_run(tmp_path: Path):
    res = CliRunner().invoke(_app(), ["simulate", "--hardware", "h200", "--model", "llama-3.1-8b", "--scenario", "1k1k",
                                      "--concurrency", "1-64", "--max-accelerators", "2", "--runs", str(tmp_path),
                                      "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout[res.stdout.index("{"):])
    run = Path(out["run_dir"])
    m = json.loads((run / "manifest.json").read_text())  # the file as written
    assert m["target"]["fidelity"] == "analytic"
    assert m["target"]["cost_model"]["operators"] and len(m["target"]["predictions"]) == len(out["points"])
    rows = read_point_metrics(run)
    for r in rows:
        assert r["interactivity_lo"] < r["interactivity"] < r["interactivity_hi"]
        assert r["total_throughput_per_accelerator_lo"] < r["total_throughput_per_accelerator"]
        assert r["total_throughput_per_kw"] > 0 and json.loads(r["config"])["model"] == "llama-3.1-8b"


def test_simulate_des_fidelity_replays_the_frontier_points(tmp_path: Path):
    res = CliRunner().invoke(_app(), ["simulate", "--hardware", "h200", "--model", "llama-3.1-8b", "--scenario", "1k1k",
                                      "--concurrency", "1-8", "--max-accelerators", "1", "--no-disagg",
                                      "--fidelity", "des", "--num-requests", "16", "--runs", str(tmp_path), "--json"])
    assert res.exit_code == 0, res.output
    run = Path(json.loads(res.stdout[res.stdout.index("{"):])["run_dir"])
    m = json.loads((run / "manifest.json").read_text())  # the file as written
    assert m["target"]["fidelity"] == "discrete-event" and m["target"]["predictions"]
    rows = read_point_metrics(run)
    assert rows and all(r["num_ok"] == 16 for r in rows)


def test_simulate_command_pinned_config_and_errors(tmp_path: Path):
    app = _app()
    cfg = tmp_path / "pin.yaml"
    cfg.write_text("hardware: h200\nmodel: llama-3.1-8b\nmax_num_seqs: 64\n")
    runner = CliRunner()
    res = runner.invoke(app, ["simulate", "--config", str(cfg), "--scenario", "1k1k", "--concurrency", "1,4",
                              "--num-requests", "8", "--runs", str(tmp_path / "runs"), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout[res.stdout.index("{"):])
    assert Path(out["run_dir"]).exists() and [p["label"] for p in out["points"]] == ["c=1", "c=4"]
    bad = runner.invoke(app, ["simulate", "--hardware", "h200", "--runs", str(tmp_path / "runs")])
    assert bad.exit_code != 0 and "--model" in str(bad.exception)
    runs_before = set((tmp_path / "runs").iterdir())
    compat = runner.invoke(app, ["simulate", "--config", str(cfg), "--compat", "foo", "--concurrency", "1",
                                 "--num-requests", "2", "--runs", str(tmp_path / "runs")])
    assert compat.exit_code != 0 and "compat" in str(compat.exception)
    assert set((tmp_path / "runs").iterdir()) == runs_before   # refused before anything was written
    mtp = runner.invoke(app, ["simulate", "--hardware", "h200", "--model", "llama-3.1-8b", "--mtp", "x:y",
                              "--runs", str(tmp_path / "runs")])
    assert mtp.exit_code != 0 and "--mtp" in str(mtp.exception)
    nothing = runner.invoke(app, ["simulate", "--hardware", "h200", "--model", "llama-3.1-8b", "--no-unified",
                                  "--no-disagg", "--runs", str(tmp_path / "runs")])
    assert nothing.exit_code != 0 and "--no-unified or --no-disagg" in str(nothing.exception)
