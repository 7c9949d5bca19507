"""Step cost: its structure and the properties the engine, the estimator and the search rely on.

Kernel times come from measured tables (when aiconfigurator-core is installed) or from the transfer
model; these tests assert what holds either way (monotonicity, the split of work between operators,
memory accounting), and pin the datasheet-only path with a catalog entry that has no tables.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import msgspec
import numpy as np
import pytest
import yaml

from scoville.catalog.hardware import load_hardware
from scoville.catalog.models import WEIGHT_BYTES, load_model
from scoville.errors import UserError
from scoville.sim.config import SimConfig, SimConfigError
from scoville.sim.cost import COMPONENTS, Parallel, StepCost
from scoville.sim.frameworks import load_framework
from scoville.sim.kernels import tables
from scoville.sim.kernels.curve import Curve, Surface
from scoville.sim.kernels.ops import OpSet

DATASHEET = """
vendor: test
family: blackwell
flops_tflops: {{fp8: 4000, bf16: 2000}}
hbm_capacity_gb: 200
hbm_bandwidth_tbps: {bw}
scaleup_bandwidth_gbps: 900
scaleup_domain: 8
scaleout_bandwidth_gbps: 50
rated_watts: 1000
idle_watts: 100
"""

TINY = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 1024, "intermediate_size": 4096,
        "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 128,
        "vocab_size": 1000, "max_position_embeddings": 8192, "torch_dtype": "bfloat16"}

needs_tables = pytest.mark.skipif(tables.data_dir() is None,
                                  reason="aiconfigurator-core (scoville[silicon]) not installed")


@pytest.fixture
def datasheet(tmp_path):
    """A chip known only from its datasheet (no kernel tables): the transfer model prices every operator."""
    def make(bw: float = 8.0):
        p = tmp_path / f"chip{bw}.yaml"
        p.write_text(DATASHEET.format(bw=bw))
        return load_hardware(str(p))
    return make


@pytest.fixture
def tiny(tmp_path):
    p = tmp_path / "tiny.json"
    p.write_text(json.dumps(TINY))
    return load_model(str(p))


def decode(c: StepCost, batch, ctx: float):
    b = np.asarray(batch, dtype=float)
    return c.step_time(b, b, b * ctx, b * ctx)


def test_components_add_up_to_the_step_and_every_operator_says_where_it_came_from(datasheet):
    c = StepCost("deepseek-r1", datasheet(), Parallel(dp=8, ep=8), precision="nvfp4", kv_dtype="fp8")
    parts = c.breakdown(64, 64, 64 * 8000.0, 64 * 8000.0)
    assert set(parts) == set(COMPONENTS)
    assert sum(parts.values()) == pytest.approx(c.step_time(64, 64, 64 * 8000.0, 64 * 8000.0))
    assert parts["comm"] > 0                                        # DP attention + EP: dispatch and combine
    assert all(s.startswith(("transfer", "modelled")) for s in c.ops.provenance.values())
    assert set(c.ops.sigma) == set(c.ops.provenance) and all(v > 0 for v in c.ops.sigma.values())
    assert 0 < c.sigma(64, 64, 64 * 8000.0, 64 * 8000.0) < 2


def test_vectorised_equals_scalar():
    c = StepCost("deepseek-r1", "gb300", Parallel(dp=8, ep=8), precision="nvfp4", kv_dtype="fp8")
    T = np.array([1, 8, 300, 8192])
    S = np.array([1, 8, 300, 1])
    A = T * 4000.0
    vec = c.step_time(T, S, A, A)
    one_by_one = [c.step_time(int(t), int(s), float(a), float(a)) for t, s, a in zip(T, S, A, strict=True)]
    assert one_by_one == pytest.approx(list(vec))


@pytest.mark.parametrize("model, par", [("gpt-oss-120b", Parallel(tp=2)), ("deepseek-r1", Parallel(tp=8, ep=8)),
                                        ("llama-3.1-70b", Parallel(tp=4)), ("kimi-k2.5", Parallel(dp=8, ep=8))])
def test_decode_grows_with_batch_and_context_and_shrinks_with_bandwidth(datasheet, model, par):
    bs = np.array([1, 4, 16, 64, 256, 1024])
    slow, fast = StepCost(model, datasheet(4.0), par), StepCost(model, datasheet(16.0), par)
    for c in (slow, fast):
        t = decode(c, bs, 8192)
        assert np.all(np.diff(t) >= 0) and t[-1] > t[0]
        assert np.all(decode(c, bs, 32768) >= t)
    assert np.all(decode(fast, bs, 8192) <= decode(slow, bs, 8192))
    assert np.any(decode(fast, bs, 8192) < decode(slow, bs, 8192))


def test_gqa_kv_split_by_kv_head_and_mla_latent_replicated(datasheet, tiny):
    c = StepCost(tiny, datasheet())
    assert c.kv_bytes_per_token == 2 * 2 * 2 * 128 * 2           # layers x (K,V) x kv_heads x head_dim x BF16
    assert StepCost(tiny, datasheet(), Parallel(tp=2)).kv_bytes_per_token == c.kv_bytes_per_token
    assert StepCost(tiny, datasheet(), Parallel(tp=4)).kv_bytes_per_token == 2 * c.kv_bytes_per_token
    # MLA latent replicates over TP ranks, so DP attention holds ~8x the tokens of TP8 on the same GPUs
    tp8 = StepCost("deepseek-r1", "gb300", Parallel(tp=8, ep=8), kv_dtype="fp8")
    dp8 = StepCost("deepseek-r1", "gb300", Parallel(dp=8, ep=8), kv_dtype="fp8")
    assert dp8.kv_capacity_tokens() / tp8.kv_capacity_tokens() == pytest.approx(8, rel=0.15)


def test_attention_dp_without_ep_splits_the_experts_over_every_rank_and_gathers_their_tokens():
    """InferenceX's B300 DeepSeek-R1 recipes run attention DP with tensor-parallel experts (``tp 8, ep 1,
    dp-attn``): the experts are split over all eight ranks, as under EP (the same bytes a GPU, so the model fits
    with room for KV), and each MoE layer gathers every rank's tokens and reduce-scatters the outputs, which EP's
    all-to-all replaces."""
    no_ep = StepCost("deepseek-r1", "b300", Parallel(dp=8, ep=1), kv_dtype="fp8", framework="trtllm")
    ep8 = StepCost("deepseek-r1", "b300", Parallel(dp=8, ep=8), kv_dtype="fp8", framework="trtllm")
    assert no_ep.weight_bytes_per_accelerator == pytest.approx(ep8.weight_bytes_per_accelerator, rel=1e-6)
    assert no_ep.kv_capacity_tokens() == pytest.approx(ep8.kv_capacity_tokens(), rel=1e-6)
    assert no_ep.ops.moe_gather is not None and no_ep.ops.ep_exchange is None
    assert ep8.ops.moe_gather is None and ep8.ops.ep_exchange is not None
    tokens = 8 * 64.0
    gathered = no_ep.breakdown(tokens, tokens, tokens * 2048, tokens * 2048)["comm"]
    assert gathered == pytest.approx(no_ep.model.num_moe_layers * no_ep.framework.kernel_scale
                                     * no_ep.ops.moe_gather(tokens * no_ep.model.hidden_size * no_ep.act_bytes))


def test_sliding_window_layers_stop_growing_at_their_window(datasheet):
    oss = StepCost("gpt-oss-120b", datasheet())
    assert oss.kv_bytes_per_token == 18 * 2 * 8 * 64 * 2            # full-attention layers only
    assert oss.kv_bytes_per_seq == 18 * 128 * 2 * 8 * 64 * 2        # ~4.7 MB per sequence (BF16)
    # Growth of decode attention from 16k to 64k context comes from the 18 full layers alone: half of what
    # 36 full layers of the same shape would add.
    core = lambda c, ctx: c.breakdown(64, 64, 64 * ctx, 64 * ctx)["attn_core"]  # noqa: E731
    grow = core(oss, 65536) - core(oss, 16384)
    per_layer = (oss.ops.attn_decode(64, 65536) - oss.ops.attn_decode(64, 16384))
    assert grow == pytest.approx(18 * per_layer, rel=1e-6)


def test_prefill_chunk_with_cached_context_costs_more_than_a_fresh_one(datasheet):
    c = StepCost("llama-3.1-70b", datasheet(), Parallel(tp=4))
    q = 2048
    fresh = c.breakdown(q, 1, q * (q + 1) / 2, q, 0, 0)["attn_core"]
    late = c.breakdown(q, 1, q * 6000 + q * (q + 1) / 2, 6000 + q, 0, 0)["attn_core"]
    assert late > 2 * fresh


def test_a_few_tokens_after_a_long_prefix_cost_a_short_prompts_attention(datasheet):
    """A chunk attending a cached prefix does the attention of a fresh prompt with as many causal pairs; for the
    last few tokens of a long prompt that is a short prompt's kernel, not the chunk's launch-bound kernel
    multiplied by its pairs over a fresh chunk's (which priced 16 tokens after 8k like ~900 such kernels)."""
    c = StepCost("llama-3.1-70b", datasheet(), Parallel(tp=4))

    def core(q: float, prior: float) -> float:
        return c.breakdown(q, 1, q * prior + q * (q + 1) / 2, prior + q, 0, 0)["attn_core"]

    pairs = 16 * 8000 + 16 * 17 / 2
    span = (math.sqrt(8 * pairs + 1) - 1) / 2
    assert core(16, 8000) == pytest.approx(core(span, 0))
    assert core(16, 0) < core(16, 8000) < core(16, 0) * pairs / (16 * 17 / 2) / 50


def test_draft_passes_cost_but_not_per_token(datasheet):
    plain = StepCost("deepseek-r1", datasheet(), Parallel(dp=8, ep=8), precision="nvfp4", kv_dtype="fp8")
    mtp = StepCost("deepseek-r1", datasheet(), Parallel(dp=8, ep=8), precision="nvfp4", kv_dtype="fp8", drafts=2)
    b, ctx = 64, 8000.0
    t_plain = plain.step_time(b, b, b * ctx, b * ctx)
    t_mtp = mtp.step_time(3 * b, b, 3 * b * ctx, b * ctx, b, b * ctx)
    assert mtp.breakdown(3 * b, b, 3 * b * ctx, b * ctx, b, b * ctx)["draft"] > 0
    assert t_plain < t_mtp < 3 * t_plain                            # a verify step is cheaper than 3 plain steps
    assert mtp.weight_bytes_per_accelerator > plain.weight_bytes_per_accelerator   # the MTP layer is resident


def test_a_layer_wide_qk_norm_costs_its_kernels_and_under_tp_an_all_reduce(datasheet, tmp_path):
    """MiniMax M2 normalises a layer's queries and keys over all heads (``qk_norm_type: per_layer``): the sums
    of squares cross the tensor-parallel ranks, one small all-reduce a layer; a per-head norm needs none."""
    def model(**extra):
        p = tmp_path / f"m{len(extra)}{extra.get('qk_norm_type', '')}.json"
        p.write_text(json.dumps({**TINY, **extra}))
        return load_model(str(p))

    plain, per_head = model(), model(use_qk_norm=True)
    per_layer = model(use_qk_norm=True, qk_norm_type="per_layer")
    assert (plain.qk_norm, per_head.qk_norm, per_layer.qk_norm) == (None, "per_head", "per_layer")
    b, ctx, hw = 8, 2000.0, datasheet()

    def parts(m, tp):
        c = StepCost(m, hw, Parallel(tp=tp))
        return c, c.breakdown(b, b, b * ctx, b * ctx)

    c, base = parts(plain, 2)
    _, head = parts(per_head, 2)
    c_layer, layer = parts(per_layer, 2)
    assert c.ops.qk_norm is None and head["comm"] == base["comm"] and head["attn_proj"] > base["attn_proj"]
    extra = TINY["num_hidden_layers"] * c_layer.ops.allreduce(b * 2 * 4.0)
    assert layer["comm"] == pytest.approx(base["comm"] + extra) and extra > 0
    _, alone = parts(per_layer, 1)
    _, alone_plain = parts(plain, 1)
    assert alone["comm"] == alone_plain["comm"] == 0          # one rank: nothing to reduce


def test_a_draft_pass_is_a_whole_decoder_block_on_the_same_ranks(datasheet):
    """The MTP module is one decoder block: each draft pass pays its attention over the sequence's context and
    the EP dispatch and combine its experts need on a data-parallel, expert-parallel layout, as a main layer does,
    besides its projections, experts and the LM head. The first pass takes every token the step verified (drafts
    + 1 a sequence: TensorRT-LLM's MTPEagleWorker, SGLang's draft extend), the later ones one a sequence; each
    pass's LM head reads one position a sequence."""
    mtp = StepCost("deepseek-r1", datasheet(), Parallel(dp=8, ep=8), precision="nvfp4", kv_dtype="fp8", drafts=2,
                   framework="trtllm")
    ops, b, ctx = mtp.ops, 64, 8000.0
    x = b / 8                                                   # decoding sequences per rank

    def block(queries):                                         # one pass of the draft layer, queries a sequence
        t = x * queries
        return (ops.attn_proj(t) + ops.elementwise(t) + ops.mla_decode_rows(x, ctx, queries) + ops.moe(t * 8)
                + ops.router(t) + ops.shared_ffn(t) + ops.ep_exchange(t))

    scale = mtp.kernel_factor * mtp.framework.kernel_scale
    expected = (block(3) + block(1) + 2 * ops.lm_head(x)) * scale
    assert mtp.breakdown(3 * b, b, 3 * b * ctx, b * ctx, b, b * ctx)["draft"] == pytest.approx(expected)
    assert ops.attn_decode(x, ctx) > 0 and ops.ep_exchange(x) > 0   # the terms a projection-only draft lacked
    assert block(3) > block(1)                                      # the verified tokens reach more experts


@needs_tables
def test_a_verify_step_reads_each_sequences_mla_kv_once_for_all_its_query_tokens():
    """A speculative step brings 1 + drafts query tokens a sequence; MLA's kernels fold them into the heads over
    the one latent KV (FlashMLA's s_q * h_q // h_kv), so the core costs what the table measured at that many
    heads, not at that many sequences. Between measured head counts time runs log-linear in heads; past the
    widest tile (128 heads on one rank) the rows take more tiles, each reading the KV again."""
    cost = StepCost("deepseek-r1", "b200", Parallel(tp=8, ep=8), precision="nvfp4", kv_dtype="fp8",
                    framework="trtllm", drafts=3)
    core = cost.ops.mla_decode_rows
    assert core is not None and core.heads == (16, 32, 64, 128)
    seqs, ctx = 16.0, 8192.0
    assert core(seqs, ctx, 1.0) == cost.ops.attn_decode(seqs, ctx)
    wide = tables.KernelTables("b200_sxm", "trtllm").mla_decode(64, "fp8")
    assert wide is not None
    assert core(seqs, ctx, 4.0) == pytest.approx(Surface(wide.x, wide.y, wide.t)(seqs, ctx))
    assert cost.ops.attn_decode(seqs, ctx) < core(seqs, ctx, 4.0) < 0.6 * cost.ops.attn_decode(4 * seqs, ctx)
    w = np.log(48 / 32) / np.log(64 / 32)                                          # 48 heads: log-linear
    assert core(seqs, ctx, 3.0) == pytest.approx(core(seqs, ctx, 2.0) ** (1 - w) * core(seqs, ctx, 4.0) ** w)
    assert core(seqs, ctx, 16.0) == pytest.approx(core(2 * seqs, ctx, 8.0))       # past 128 heads: more tiles

    step = cost.breakdown(4 * seqs, seqs, 4 * seqs * ctx, seqs * ctx, seqs, seqs * ctx)
    ratio = cost.ops.decode_module_ratio
    assert ratio is not None
    assert step["attn_core"] == pytest.approx(
        cost.model.num_layers * (core(seqs, ctx, 4.0) + cost.ops.mla_absorb(4 * seqs)) * ratio(4 * seqs, ctx))
    wide_ep = StepCost("deepseek-r1", "b200", Parallel(dp=8, ep=8), precision="nvfp4", kv_dtype="fp8",
                       framework="trtllm", drafts=3).ops
    assert wide_ep.mla_decode_rows is not None and wide_ep.mla_decode_rows.heads == (128,)
    assert wide_ep.mla_decode_rows(seqs, ctx, 4.0) == pytest.approx(wide_ep.attn_decode(4 * seqs, ctx))


def test_framework_costs_add_host_time_and_kernel_scale_scales_only_kernels(datasheet):
    hw = datasheet()
    base = StepCost("llama-3.1-8b", hw, framework="vllm")
    fw = load_framework("vllm")
    slower_host = msgspec.structs.replace(fw, step_overhead_us=fw.step_overhead_us + 1000.0)
    host = StepCost("llama-3.1-8b", hw, framework_costs=slower_host)
    assert host.step_time(8, 8, 8000.0, 8000.0) - base.step_time(8, 8, 8000.0, 8000.0) == pytest.approx(1e-3)
    half = StepCost("llama-3.1-8b", hw, framework_costs=msgspec.structs.replace(fw, kernel_scale=0.5))
    b, h = base.breakdown(8, 8, 8000.0, 8000.0), half.breakdown(8, 8, 8000.0, 8000.0)
    assert h["overhead"] == pytest.approx(b["overhead"])
    assert h["ffn"] == pytest.approx(0.5 * b["ffn"])


def test_prefill_tokens_run_at_the_prefill_kernel_ratio_and_a_mixed_step_weighs_both(datasheet):
    hw = datasheet()
    fw = msgspec.structs.replace(load_framework("vllm"), kernel_scale=1.0, prefill_kernel_ratio=1.0)
    flat = StepCost("llama-3.1-8b", hw, framework_costs=fw)
    split = StepCost("llama-3.1-8b", hw, framework_costs=msgspec.structs.replace(fw, prefill_kernel_ratio=1.5))
    decode = (8, 8, 8000.0, 8000.0, 8, 8000.0)                 # eight sequences, one token each
    prefill = (1024, 1, 1024 * 1025 / 2, 1024.0, 0, 0.0)         # one fresh 1k prompt
    mixed = (1032, 9, 8000.0 + 1024 * 1025 / 2, 9024.0, 8, 8000.0)
    assert split.breakdown(*decode)["ffn"] == pytest.approx(flat.breakdown(*decode)["ffn"])
    assert split.breakdown(*prefill)["ffn"] == pytest.approx(1.5 * flat.breakdown(*prefill)["ffn"])
    share = 1024 / 1032
    assert split.breakdown(*mixed)["ffn"] == pytest.approx((1 + 0.5 * share) * flat.breakdown(*mixed)["ffn"])
    assert split.breakdown(*prefill)["overhead"] == pytest.approx(flat.breakdown(*prefill)["overhead"])


def test_four_bit_weights_run_weight_only_on_a_chip_without_fp4():
    hopper = StepCost("deepseek-r1", "h200", Parallel(dp=8, ep=8), precision="nvfp4", kv_dtype="fp8")
    blackwell = StepCost("deepseek-r1", "b200", Parallel(dp=8, ep=8), precision="nvfp4", kv_dtype="fp8")
    assert "no FP4 tensor cores" in hopper.ops.formats["experts"]
    assert "weight-only" not in blackwell.ops.formats["experts"]


@needs_tables
def test_measured_tables_price_covered_shapes_and_say_so():
    c = StepCost("deepseek-r1", "b200", Parallel(tp=8), precision="fp8", kv_dtype="fp8", framework="sglang",
                 backend="measured")
    for op in ("attn_proj", "attn_decode", "moe", "allreduce"):
        assert c.ops.provenance[op].startswith("measured (b200_sxm"), c.ops.provenance[op]
    # a GEMM on a measured grid shape is the fastest measured kernel for it
    m, n, k, t = tables.KernelTables("b200_sxm", "sglang").gemm("bfloat16")
    i, j, ik = int(np.searchsorted(m, 64)), int(np.searchsorted(n, 7168)), int(np.searchsorted(k, 7168))
    from scoville.sim.kernels.ops import _interp_nk
    assert Curve(m, _interp_nk(n, k, t, 7168, 7168))(64.0) == pytest.approx(t[i, j, ik])


@needs_tables
def test_an_mla_core_is_priced_on_its_own_frameworks_kernel():
    """SGLang's FP8-cache MLA decode on H200 is a far slower kernel than TensorRT-LLM's: each framework is costed on
    its own, and vLLM (no core table) on TensorRT-LLM's."""
    def core(framework: str) -> tuple[str, float]:
        c = StepCost("deepseek-r1", "h200", Parallel(tp=8), precision="fp8", kv_dtype="fp8", framework=framework)
        return c.ops.provenance["attn_decode"], c.breakdown(64, 64, 64 * 8192, 64 * 8192)["attn_core"]

    (trt_src, trt), (sgl_src, sgl), (vllm_src, _) = core("trtllm"), core("sglang"), core("vllm")
    assert "/mla/trtllm/" in trt_src and "/mla/sglang/" in sgl_src and "/mla/trtllm/" in vllm_src
    assert sgl > 3 * trt


@needs_tables
def test_wide_expert_parallelism_on_nvl72_costs_tensorrt_llms_measured_nvlink_all_to_all():
    """TensorRT-LLM's NVLink all-to-all was timed on GB200 up to EP 64: EP 32 is that table, EP 72 the largest degree
    below it with a wider band; another framework falls back to the transfer all-to-all."""
    def exchange(framework: str, ep: int) -> StepCost:
        return StepCost("deepseek-r1", "gb200", Parallel(tp=1, dp=ep, ep=ep), precision="nvfp4", kv_dtype="fp8",
                        framework=framework)

    ep32, ep72, vllm = exchange("trtllm", 32), exchange("trtllm", 72), exchange("vllm", 32)
    assert "trtllm_alltoall_perf" in ep32.ops.provenance["alltoall"]
    assert "ep64 for ep72" in ep72.ops.provenance["alltoall"]
    assert ep72.ops.sigma["alltoall"] > ep32.ops.sigma["alltoall"]
    assert vllm.ops.provenance["alltoall"].startswith("transfer")
    curve = ep32.ops.ep_exchange
    assert curve is not None
    times = curve(np.array([1.0, 16.0, 256.0, 4096.0]))
    assert np.all(np.diff(times) >= 0) and 20e-6 < times[0] < 100e-6      # tens of microseconds at one token


@needs_tables
def test_wide_ep_experts_run_tensorrt_llms_wideep_module_only_where_it_serves_them():
    """Attention DP with experts beyond one 8-GPU board runs TensorRT-LLM's WideEP MoE (its own measured table,
    slower than the fused MoE at decode-size batches); EP 8, no attention DP, or another framework keep the
    framework's MoE table."""
    def experts(framework: str, tp: int, dp: int, ep: int) -> StepCost:
        return StepCost("deepseek-r1", "gb200", Parallel(tp=tp, dp=dp, ep=ep), precision="nvfp4", kv_dtype="fp8",
                        framework=framework)

    wide = experts("trtllm", 1, 32, 32)
    assert "wideep_moe_perf" in wide.ops.provenance["moe"] and "no load balancer" in wide.ops.provenance["moe"]
    for framework, tp, dp, ep in (("trtllm", 1, 8, 8), ("trtllm", 32, 1, 32), ("sglang", 1, 32, 32)):
        assert "wideep" not in experts(framework, tp, dp, ep).ops.provenance["moe"], (framework, tp, dp, ep)
    assert wide.ops.moe is not None and wide.ops.moe(160.0) > experts("sglang", 1, 32, 32).ops.moe(160.0)


@needs_tables
def test_sglang_with_attention_dp_runs_its_experts_on_deepeps_moe_kernel():
    """SGLang's large-scale EP (DP attention, experts spread over the ranks) runs DeepEPMoE, timed in its own
    table; at the ~3,700 tokens of DEP32 with 115 decodes a rank it is several times faster than the fused MoE
    kernel SGLang runs without DP attention. A format the DeepEP table lacks (NVFP4) keeps the MoE table."""
    def experts(tp: int, dp: int, ep: int, precision: str = "fp8") -> StepCost:
        return StepCost("deepseek-r1", "gb200", Parallel(tp=tp, dp=dp, ep=ep), precision=precision, kv_dtype="fp8",
                        framework="sglang")
    dep32, tep32 = experts(1, 32, 32), experts(32, 1, 32)
    assert "wideep_generation_moe_perf" in dep32.ops.provenance["moe"], dep32.ops.provenance["moe"]
    assert "DeepEPMoE" not in tep32.ops.provenance["moe"]
    assert "DeepEPMoE" not in experts(1, 32, 32, "nvfp4").ops.provenance["moe"]
    # its table has no EP 8: DEP8 reads EP 4 and EP 16 and interpolates in log EP between them
    assert "ep4..ep16 interpolated to ep8" in experts(1, 8, 8).ops.provenance["moe"]
    assert dep32.ops.moe is not None and tep32.ops.moe is not None
    assert dep32.ops.moe(3680.0) * 3 < tep32.ops.moe(3680.0)


@needs_tables
def test_experts_spread_over_nodes_exchange_tokens_on_deepeps_measured_cross_node_kernels():
    """Beyond one 8-GPU node the dispatch and combine are DeepEP's, timed over 2-8 H100 nodes: TensorRT-LLM's
    multi-node recipes force its normal kernels, SGLang runs the low-latency ones for decode-size batches and the
    normal ones beyond. Their fixed cost (notify, RDMA latency) is above the datasheet all-to-all at a few tokens a
    rank, their per-node deduplication far below it at prefill sizes; EP 24 sits between the 2- and 4-node
    timings. Within one node the NCCL all-to-all stays."""
    def exchange(framework: str, ep: int, hardware: str = "h100") -> StepCost:
        return StepCost("deepseek-r1", hardware, Parallel(tp=1, dp=ep, ep=ep), kv_dtype="fp8", framework=framework)

    trtllm, sglang = exchange("trtllm", 16), exchange("sglang", 16)
    assert "deepep_normal_perf" in trtllm.ops.provenance["alltoall"]
    assert "deepep_ll_perf" in sglang.ops.provenance["alltoall"] and "2 nodes" in sglang.ops.provenance["alltoall"]
    assert "nccl" in exchange("sglang", 8).ops.provenance["alltoall"]
    tt, ts, t24, t32 = (c.ops.ep_exchange for c in (trtllm, sglang, exchange("trtllm", 24), exchange("trtllm", 32)))
    assert tt is not None and ts is not None and t24 is not None and t32 is not None
    assert ts(16.0) < 0.7 * tt(16.0)                 # low-latency kernels at a decode batch
    assert ts(1024.0) < tt(1024.0) < 2 * ts(1024.0)  # both normal at prefill sizes, TensorRT-LLM on its own fork
    assert tt(16.0) < t24(16.0) < t32(16.0) and tt(1024.0) < t24(1024.0) < t32(1024.0)
    datasheet = StepCost("deepseek-r1", "h100", Parallel(tp=1, dp=16, ep=16), kv_dtype="fp8", framework="trtllm",
                         backend="transfer").ops.ep_exchange
    assert datasheet is not None and tt(1.0) > datasheet(1.0) and tt(4096.0) < 0.5 * datasheet(4096.0)


@needs_tables
def test_tensorrt_llm_without_attention_dp_runs_its_experts_on_the_faster_of_its_table_and_trtllm_gen():
    """TensorRT-LLM's collection times FP8 block-scale experts with DeepGEMM only, which at a few tokens a step is
    2-3x the trtllm-gen kernels of its TRTLLM backend (timed in SGLang's table, FlashInfer's copy of them); the
    backend InferenceX picks without attention DP. Under attention DP the table's own kernel stays."""
    def moe(framework: str, tp: int, dp: int, ep: int) -> StepCost:
        return StepCost("deepseek-r1", "b200", Parallel(tp=tp, dp=dp, ep=ep), precision="fp8", kv_dtype="fp8",
                        framework=framework)
    tp8, dep8, sglang = moe("trtllm", 8, 1, 1), moe("trtllm", 1, 8, 8), moe("sglang", 8, 1, 1)
    assert "TRTLLM backend" in tp8.ops.provenance["moe"] and "/sglang/" in tp8.ops.provenance["moe"]
    assert "TRTLLM backend" not in dep8.ops.provenance["moe"]
    assert tp8.ops.sigma["moe"] == pytest.approx(1.5 * dep8.ops.sigma["moe"])   # borrowed timings are less sure
    assert tp8.ops.moe is not None and sglang.ops.moe is not None
    for tokens in (4.0, 32.0):
        assert tp8.ops.moe(tokens) == pytest.approx(sglang.ops.moe(tokens), rel=0.02)   # trtllm-gen wins here


@needs_tables
def test_an_expert_format_missing_from_the_frameworks_table_is_read_from_the_framework_whose_kernel_runs_it():
    """vLLM's B200 collection has no MXFP4 x MXFP8 MoE; vLLM runs it through FlashInfer's trtllm-gen kernel, so
    TensorRT-LLM's measurement prices it (said in the provenance, with a wider band) instead of the datasheet
    transfer; a format the framework did measure stays on its own table."""
    vllm = StepCost("gpt-oss-120b", "b200", framework="vllm", kv_dtype="fp8")
    trtllm = StepCost("gpt-oss-120b", "b200", framework="trtllm", kv_dtype="fp8")
    source = vllm.ops.provenance["moe"]
    assert source.startswith("measured") and "/trtllm/" in source and "vllm measured no w4a8_mxfp4_mxfp8" in source
    assert vllm.ops.moe is not None and trtllm.ops.moe is not None
    assert vllm.ops.moe(64.0) == pytest.approx(trtllm.ops.moe(64.0))
    own = StepCost("gpt-oss-120b", "h200", framework="vllm", kv_dtype="fp8").ops
    assert "/vllm/" in own.provenance["moe"] and "measured no" not in own.provenance["moe"]
    assert vllm.ops.sigma["moe"] > own.sigma["moe"]


def test_a_family_measured_below_nvidia_efficiency_runs_its_roofline_times_slower(tmp_path, tiny):
    """cdna3's microbenchmarked efficiencies (families.yaml: compute x2.07, memory x1.11 against the NVIDIA fit)
    reach the transfer model: a compute-bound GEMM slows by about the compute factor, a memory-bound one by about
    the memory factor, on a chip with the same datasheet."""
    raw = yaml.safe_load(DATASHEET.format(bw=8))
    chips = {}
    for family in ("blackwell", "cdna3"):
        p = tmp_path / f"{family}.yaml"
        p.write_text(yaml.safe_dump(dict(raw, family=family)))
        chips[family] = StepCost(tiny, load_hardware(str(p)), backend="transfer").ops.attn_proj
    compute_bound, memory_bound = np.array([65536.0]), np.array([1.0])
    slow = {name: float(chips["cdna3"](x)[0] / chips["blackwell"](x)[0])
            for name, x in (("compute", compute_bound), ("memory", memory_bound))}
    assert 1.8 < slow["compute"] <= 2.07 + 1e-9 and 1.0 < slow["memory"] <= 1.11 + 1e-9, slow


def test_a_kernel_class_s_own_time_factors_reach_that_class_alone(tmp_path, tiny):
    """A hardware file's ``kernel_time_factors`` for BF16 GEMMs (what AITER's tuned tables give a CDNA part) slow the
    attention projections (BF16 GEMMs of the tiny model) by about their compute factor where they are compute-bound
    and not at all where memory-bound (memory factor 1); the provenance says whose factors priced them, and the
    class's uncertainty is the spread of that fit, which the platform's kernel_factor does not scale."""
    raw = yaml.safe_load(DATASHEET.format(bw=8))
    own = {"gemm.bfloat16": {"compute": 3.0, "memory": 1.0, "sigma": 0.2}}
    files = {"plain": raw, "fitted": dict(raw, kernel_time_factors=own),
             "fitted, platform x2": dict(raw, kernel_time_factors=own, efficiency={"kernel_factor": 2.0})}
    ops = {}
    for name, content in files.items():
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(content))
        ops[name] = StepCost(tiny, load_hardware(str(path)), backend="transfer").ops
    compute_bound, memory_bound = np.array([65536.0]), np.array([1.0])
    slow = float(ops["fitted"].attn_proj(compute_bound)[0] / ops["plain"].attn_proj(compute_bound)[0])
    same = float(ops["fitted"].attn_proj(memory_bound)[0] / ops["plain"].attn_proj(memory_bound)[0])
    assert 2.5 < slow <= 3.0 + 1e-9 and same == pytest.approx(1.0, rel=0.02), (slow, same)
    assert "own gemm.bfloat16 kernels x3 compute" in ops["fitted"].provenance["attn_proj"]
    assert "own" not in ops["plain"].provenance["attn_proj"]
    assert ops["fitted"].sigma["attn_proj"] == pytest.approx(0.2)      # the fit's spread, not the transfer's
    # the platform's kernel_factor stands for kernels nobody timed on it; these were
    assert ops["fitted, platform x2"].attn_proj(compute_bound)[0] == ops["fitted"].attn_proj(compute_bound)[0]


@needs_tables
def test_elementwise_kernels_run_at_the_floor_and_rate_the_quantize_tables_measured():
    """Norms and activations are priced on the launch floor and streaming rate measured for an elementwise kernel
    on the system (a microsecond or two, most of HBM bandwidth), not on the priors, as many of them a layer as
    the framework launches."""
    kt = tables.KernelTables("h200_sxm", "trtllm")
    measured = kt.elementwise()
    assert measured is not None
    floor, rate = measured
    h200 = load_hardware("h200")
    assert 0.5e-6 < floor < 5e-6 and 0.6 < rate / h200.hbm_bytes_per_s < 1.0
    for framework in ("trtllm", "vllm"):
        cost = StepCost("llama-3.1-8b", h200, framework=framework)
        kernels = load_framework(framework).elementwise_kernels
        assert cost.ops.provenance["elementwise"].startswith("measured floor")
        assert f"{kernels} kernels a layer ({framework})" in cost.ops.provenance["elementwise"]
        assert cost.ops.elementwise(1.0) == pytest.approx(kernels * floor, rel=0.05)
    # TensorRT-LLM fuses its norms into the all-reduce and RoPE into attention: fewer standalone kernels
    assert load_framework("trtllm").elementwise_kernels < load_framework("vllm").elementwise_kernels


@needs_tables
def test_measured_backend_refuses_a_chip_without_tables():
    with pytest.raises(UserError, match="no measured kernel tables"):
        StepCost("llama-3.1-8b", "mi355x", backend="measured")


def test_scoville_measured_cpu_tables_price_the_cpu_entry_without_the_silicon_extra(tmp_path):
    # the real-vLLM check's model (hidden 512, 8/4 heads of 64, FFN 1408, vocab 32000) on this machine's CPU entry
    p = tmp_path / "vllm-cpu-check.json"
    p.write_text(json.dumps({**TINY, "hidden_size": 512, "intermediate_size": 1408, "num_hidden_layers": 6,
                             "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 64, "vocab_size": 32000}))
    c = StepCost(load_model(str(p)), "xeon-icx-2vcpu", backend="measured")
    for op in ("attn_decode", "attn_prefill"):
        assert "scoville/data/kernels/xeon_icx_2vcpu/attention/vllm" in c.ops.provenance[op], c.ops.provenance[op]
    for op in ("attn_proj", "dense_ffn", "lm_head"):
        assert c.ops.provenance[op].startswith("measured (xeon_icx_2vcpu/gemm"), c.ops.provenance[op]
    # keyed by the tables and by the code that slices them: a changed query never reads an old slice
    code = hashlib.sha256(Path(tables.__file__).read_bytes()).hexdigest()[:8]
    assert tables.tables_version("xeon_icx_2vcpu").startswith("scoville-")
    assert tables.tables_version("xeon_icx_2vcpu").endswith(f"-{code}")
    # what a roofline cannot know and the tables do: oneDNN serves one token on a GEMV path, two on a GEMM path
    assert c.ops.lm_head(2.0) > 2.5 * c.ops.lm_head(1.0)
    # a second CPU is its own entry with its own measured tables: the Zen 4 slice has AVX-512 BF16, so its GEMMs
    # beyond one token run several times faster than the Ice Lake slice's (which converts BF16 to FP32 first)
    zen4 = StepCost(load_model(str(p)), "epyc-zen4-2vcpu", backend="measured")
    assert zen4.ops.provenance["lm_head"].startswith("measured (epyc_zen4_2vcpu/gemm")
    assert "scoville/data/kernels/epyc_zen4_2vcpu/attention/vllm" in zen4.ops.provenance["attn_decode"]
    assert zen4.ops.lm_head(64.0) * 3 < c.ops.lm_head(64.0)
    # a third, with AMX tiles: its oneDNN BF16 GEMMs beyond a few tokens run on them, several times the Zen 4's rate
    amx = StepCost(load_model(str(p)), "xeon-amx-2vcpu", backend="measured")
    assert amx.ops.provenance["lm_head"].startswith("measured (xeon_amx_2vcpu/gemm")
    assert amx.ops.lm_head(512.0) * 3 < zen4.ops.lm_head(512.0)


def test_a_model_served_in_fp32_moves_four_bytes_an_element_and_runs_the_fp32_kernels_measured_for_it(tmp_path):
    """`vllm serve --dtype float32`, what vLLM's CPU backend runs fastest on a CPU without AVX-512 BF16: every
    weight, the activations between operators and the KV cache in FP32, priced from the FP32 tables measured on
    that CPU (epyc-zen2-2vcpu); a BF16 deployment there never reads FP32 timings."""
    p = tmp_path / "vllm-cpu-check.json"
    p.write_text(json.dumps({**TINY, "hidden_size": 512, "intermediate_size": 1408, "num_hidden_layers": 6,
                             "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 64, "vocab_size": 32000}))
    model = load_model(str(p))
    bf16 = StepCost(model, "epyc-zen2-2vcpu", precision="bf16", kv_dtype="bf16")
    fp32 = StepCost(model, "epyc-zen2-2vcpu", precision="fp32", kv_dtype="fp32", backend="measured")
    assert fp32.weight_bytes_per_accelerator == pytest.approx(2 * bf16.weight_bytes_per_accelerator)
    assert fp32.kv_bytes_per_token == pytest.approx(2 * bf16.kv_bytes_per_token)
    assert (fp32.act_bytes, bf16.act_bytes) == (4.0, 2.0)
    for op in ("attn_proj", "dense_ffn", "lm_head"):
        assert fp32.ops.provenance[op].startswith("measured (epyc_zen2_2vcpu/gemm") and "float32" in \
            fp32.ops.provenance[op]
    assert "KV float32" in fp32.ops.provenance["attn_decode"]
    assert "epyc_zen2_2vcpu/attention" in fp32.ops.provenance["attn_prefill"]
    borrowed = ("attn_proj", "attn_decode", "attn_prefill")
    assert all(not bf16.ops.provenance[op].startswith("measured") for op in borrowed)
    # on this CPU FP32 is the fast path: a 512-token prompt's step is several times the BF16 transfer's speed
    assert 3 * fp32.step_time(512, 1, 512 * 256.5, 512) < bf16.step_time(512, 1, 512 * 256.5, 512)


def test_a_model_in_fp32_on_an_entry_without_an_fp32_rate_is_refused_naming_the_field():
    with pytest.raises(UserError, match=r"flops_tflops has no fp32 rate.*add flops_tflops\.fp32"):
        StepCost("llama-3.1-8b", "h100", precision="fp32", kv_dtype="fp32", backend="transfer")
    with pytest.raises(UserError, match="use one of bf16, fp16, fp8, fp4, fp32"):
        StepCost("llama-3.1-8b", "h100", kv_dtype="int2")


def test_kv_capacity_is_capacity_minus_weights_activations_reserve():
    c = StepCost("llama-3.1-8b", "h100")
    assert c.weight_bytes_per_accelerator == pytest.approx(2 * 8.03e9, rel=0.003)
    free = c.hw.hbm_bytes * 0.9 - c.weight_bytes_per_accelerator - c.activation_bytes_per_accelerator() - 3.9e9
    assert c.kv_capacity_tokens(0.9) == int(free // c.kv_bytes_per_token)
    assert c.kv_capacity_tokens(0.5) < c.kv_capacity_tokens(0.9)
    assert StepCost("llama-3.1-8b", "h100", Parallel(tp=2)).kv_capacity_tokens() > 2 * c.kv_capacity_tokens()
    assert StepCost("deepseek-r1", "h100").kv_capacity_tokens() == 0    # 671 GB of FP8 on one 80 GB GPU


def test_tensorrt_llms_memory_fraction_is_a_share_of_what_the_loaded_model_leaves_free():
    # DeepSeek-R1 FP8 over four B200s: 168 GB of weights a GPU. vLLM's 0.9 of the whole 192 GB leaves a few GB of
    # cache; TensorRT-LLM's free_gpu_memory_fraction 0.9 takes 90% of the ~20 GB the weights leave
    trt = StepCost("deepseek-r1", "b200", Parallel(tp=4), precision="fp8", kv_dtype="fp8", framework="trtllm")
    vllm = StepCost("deepseek-r1", "b200", Parallel(tp=4), precision="fp8", kv_dtype="fp8", framework="vllm")
    left = (trt.hw.hbm_bytes - trt.weight_bytes_per_accelerator - trt.activation_bytes_per_accelerator()
            - trt.hw.runtime_reserve_gb * 1e9)
    assert trt.kv_capacity_tokens(0.9) == int(0.9 * left * 4 // trt.kv_bytes_per_token)
    assert trt.kv_capacity_tokens(0.9) > 10 * vllm.kv_capacity_tokens(0.9) > 0


def test_kv_transfer_scaleout_slower_than_scaleup():
    c = StepCost("deepseek-r1", "gb200", Parallel(tp=8))
    assert c.kv_transfer_time(8192, scaleout=True) > c.kv_transfer_time(8192, scaleout=False) > 0


def test_bad_inputs_are_one_line_user_errors(tmp_path):
    with pytest.raises(UserError, match="ep=3"):
        StepCost("deepseek-r1", "gb200", Parallel(tp=8, ep=3))
    with pytest.raises(UserError, match="kv_dtype"):
        StepCost("llama-3.1-8b", "h100", kv_dtype="int3")
    with pytest.raises(UserError, match="cost backend"):
        StepCost("llama-3.1-8b", "h100", backend="guess")
    with pytest.raises(UserError, match="framework"):
        StepCost("llama-3.1-8b", "h100", framework="tgi")
    # attention shards by whole heads: DeepSeek-R1's 128 heads do not split 72 ways (a published "tp 72" row)
    with pytest.raises(UserError, match=r"tp=72 does not divide deepseek-r1's 128 attention heads; use tp in .*64"):
        StepCost("deepseek-r1", "gb200", Parallel(tp=72))


def test_unknown_family_and_bad_fields_name_the_field(tmp_path):
    raw = yaml.safe_load(DATASHEET.format(bw=8))
    for change, words in ((("family", "cdna9"), "family 'cdna9' is unknown"),
                          (("hbm_bandwidth_tbps", 0), "hbm_bandwidth_tbps"),
                          (("rated_watts", -5), "rated_watts"),
                          (("scaleup_domain", 0), "scaleup_domain")):
        bad = dict(raw, **{change[0]: change[1]})
        p = tmp_path / "bad.yaml"
        p.write_text(yaml.safe_dump(bad))
        with pytest.raises(UserError, match=words):
            load_hardware(str(p))
    inf = tmp_path / "inf.yaml"
    inf.write_text(DATASHEET.format(bw=".inf"))
    with pytest.raises(UserError, match="hbm_bandwidth_tbps"):
        load_hardware(str(inf))
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(UserError, match="not a text file|not valid YAML"):
        load_hardware(str(binary))


def test_data_parallel_attention_prices_each_prompt_chunk_on_its_own_rank():
    """A prompt chunk lives on one attention rank and every rank waits for the busiest at the expert exchange:
    one 4k chunk beside 64 decodes on DEP8 costs most of what eight do (one a rank, in parallel; only the routed
    experts see eight times the tokens), and a ninth, sharing a rank, adds about one chunk again."""
    cost = StepCost("deepseek-r1", "b200", Parallel(tp=1, dp=8, ep=8), "nvfp4", "fp8")
    n, ctx, P = 64, 4096, 4096

    def step(chunks: int) -> float:
        return float(cost.step_time(n + chunks * P, n + chunks, n * ctx + chunks * P * (P + 1) / 2,
                                    n * ctx + chunks * P, n, n * ctx))

    one_chunk = step(1) - step(0)
    assert step(8) < step(0) + 2 * one_chunk
    assert step(9) - step(8) > 0.5 * one_chunk


def test_under_data_parallel_attention_each_rank_schedules_its_own_sequences_side_by_side():
    """Host time per sequence is the busiest attention rank's: 256 decodes on DEP8 pay the per-sequence cost of the
    32 on one rank (each rank runs its own scheduler), where 256 on one TP8 instance pay it for all 256."""
    fw = msgspec.structs.replace(load_framework("sglang"), step_overhead_us=100.0, seq_overhead_us=2.0)
    dep8 = StepCost("deepseek-r1", "b200", Parallel(tp=1, dp=8, ep=8), "nvfp4", "fp8", framework_costs=fw)
    tp8 = StepCost("deepseek-r1", "b200", Parallel(tp=8), "nvfp4", "fp8", framework_costs=fw)
    n, ctx = 256, 2048
    decode = (n, n, n * ctx, n * ctx, n, n * ctx)
    assert dep8.breakdown(*decode)["overhead"] == pytest.approx((100.0 + 2.0 * 32) * 1e-6)
    assert tp8.breakdown(*decode)["overhead"] == pytest.approx((100.0 + 2.0 * 256) * 1e-6)


@pytest.mark.parametrize("rows, cols", [(1, 1), (1, 5), (4, 1), (4, 6)])
def test_a_surface_reads_the_same_by_the_array_and_by_the_scalar(rows, cols):
    """The array path (every row at once over the log-time matrix) follows the scalar path's edge rules: below,
    inside and above each axis's grid."""

    rng = np.random.default_rng(rows * 10 + cols)
    a, b = np.geomspace(2.0, 64.0, rows), np.geomspace(16.0, 4096.0, cols)
    surface = Surface(a, b, rng.uniform(1e-5, 1e-3, (rows, cols)))
    xs, ys = rng.uniform(0.5, 200.0, (3, 7)), rng.uniform(1.0, 20000.0, (3, 7))
    by_array = surface(xs, ys)
    assert by_array.shape == (3, 7)
    by_scalar = [surface(float(x), float(y)) for x, y in zip(xs.ravel(), ys.ravel(), strict=True)]
    assert by_array.ravel() == pytest.approx(by_scalar, rel=1e-12)


@needs_tables
def test_marlin_experts_run_at_marlins_measured_rate_where_it_is_slower_than_the_tables_kernel():
    """InferenceX's gpt-oss H100/H200 vLLM recipes put the MXFP4 experts on Marlin (VLLM_MXFP4_USE_MARLIN=1); vLLM's
    table times Marlin at another model's shape only, so its FLOP rate is carried over by tokens per expert: a
    prompt's worth of tokens runs at about half the Triton kernel's rate, a decode step's few tokens per expert
    stay on the shape's own table."""
    auto = StepCost("gpt-oss-120b", "h200", framework="vllm", kv_dtype="fp8")
    marlin = StepCost("gpt-oss-120b", "h200", framework="vllm", kv_dtype="fp8", moe_kernel="marlin")
    assert auto.ops.moe is not None and marlin.ops.moe is not None
    assert "Marlin rate" in marlin.ops.provenance["moe"] and "Marlin" not in auto.ops.provenance["moe"]
    assert marlin.ops.sigma["moe"] > auto.ops.sigma["moe"]
    assert marlin.ops.moe(16.0) == pytest.approx(auto.ops.moe(16.0))
    assert 1.5 < marlin.ops.moe(8192.0) / auto.ops.moe(8192.0) < 2.5
    with pytest.raises(UserError, match="no measured Marlin MoE rate"):
        StepCost("gpt-oss-120b", "b200", framework="vllm", kv_dtype="fp8", moe_kernel="marlin")


def test_marlin_is_vllms_kernel_and_another_framework_asking_for_it_is_refused():

    with pytest.raises((SimConfigError, ValueError), match="moe_kernel marlin is vLLM's"):
        SimConfig(hardware="h200", model="gpt-oss-120b", framework="trtllm", moe_kernel="marlin")


@needs_tables
def test_tensorrt_llms_expert_load_balancer_runs_its_wide_ep_experts_on_the_tables_balanced_runs():
    """InferenceX's widest NVL72 recipes run TensorRT-LLM's load balancer (``_eplb256_`` in the launch config): the
    WideEP tables time those runs apart, and at a decode step's token counts balanced placement is faster than the
    static one; off the wide-EP path, an untimed slot count or fewer slots than experts is refused."""
    def dep16(slots: int) -> StepCost:
        return StepCost("deepseek-r1", "gb300", Parallel(tp=1, dp=16, ep=16, expert_slots=slots), precision="nvfp4",
                        kv_dtype="fp8", framework="trtllm")
    static, balanced = dep16(0), dep16(256)
    assert "load balancer over 256 slots" in balanced.ops.provenance["moe"]
    assert "no load balancer" in static.ops.provenance["moe"]
    assert static.ops.moe is not None and balanced.ops.moe is not None
    for tokens in (256.0, 1024.0, 4096.0):
        assert balanced.ops.moe(tokens) < static.ops.moe(tokens)
    for parallel, match in ((Parallel(tp=8, ep=8, expert_slots=256), "wide-EP path only"),
                            (Parallel(tp=1, dp=16, ep=16, expert_slots=300), "no measured load-balanced"),
                            (Parallel(tp=1, dp=16, ep=16, expert_slots=128), "fewer than")):
        with pytest.raises(UserError, match=match):
            StepCost("deepseek-r1", "gb300", parallel, precision="nvfp4", kv_dtype="fp8", framework="trtllm")
    with pytest.raises(UserError, match="no measured load-balanced"):    # not the static datasheet figure instead
        StepCost("deepseek-r1", "gb300", Parallel(tp=1, dp=16, ep=16, expert_slots=256), precision="nvfp4",
                 kv_dtype="fp8", framework="trtllm", backend="transfer")


@needs_tables
def test_the_load_balancers_replica_slots_hold_their_experts_weights():
    """288 slots over 16 ranks keep 18 experts a rank resident where 256 keep 16: the weights grow by two
    experts a rank in every MoE layer, and the KV cache gives up what they take."""
    def dep16(slots: int) -> StepCost:
        return StepCost("deepseek-r1", "gb300", Parallel(tp=1, dp=16, ep=16, expert_slots=slots), precision="nvfp4",
                        kv_dtype="fp8", framework="trtllm")
    one, replicas = dep16(256), dep16(288)
    extra = replicas.weight_bytes_per_accelerator - one.weight_bytes_per_accelerator
    expert_bytes = one.model.expert_params * WEIGHT_BYTES[one.precision["experts"]]    # one whole expert a rank
    assert extra == pytest.approx(2 * one.model.num_moe_layers * expert_bytes)
    assert replicas.kv_capacity_tokens() < one.kv_capacity_tokens()
    assert dep16(0).weight_bytes_per_accelerator == one.weight_bytes_per_accelerator   # one slot an expert


def test_a_deployment_with_the_load_balancer_says_so_in_its_label():

    cfg = SimConfig(hardware="gb300", model="deepseek-r1", framework="trtllm",
                    parallel={"tp": 1, "dp": 16, "ep": 16, "expert_slots": 288})
    assert "eplb288" in cfg.label()


def test_a_decode_steps_least_read_is_the_touched_weights_and_the_batches_kv():
    """One sequence reads gpt-oss's attention and 4 of its 128 experts a layer; a large batch reads every expert
    (all the weights but the embedding table); each token of context adds its KV."""
    cost = StepCost("gpt-oss-120b", "h200", kv_dtype="fp8")
    one, many = cost.decode_floor_bytes(1.0, 0.0), cost.decode_floor_bytes(1e5, 0.0)
    assert one < 0.15 * many
    assert 0.9 * cost.weight_bytes_per_accelerator < many < cost.weight_bytes_per_accelerator
    assert cost.decode_floor_bytes(8.0, 1000.0) - cost.decode_floor_bytes(8.0, 0.0) == pytest.approx(
        8 * 1000 * cost.kv_bytes_per_token)


@needs_tables
def test_an_all_reduce_over_two_nodes_is_the_node_local_one_plus_the_tree_over_the_nics():
    """Tensor parallelism over two H100 boards all-reduces through NCCL: the 8-GPU measured all-reduce plus two
    scale-out hops and the bytes over each GPU's NIC. The hop latency is the entry's, set from nccl-tests on 2x8
    Hopper boards (46-48 us for a few bytes), which the tree then reproduces."""
    hw = load_hardware("h100")
    two_nodes = StepCost("deepseek-r1", hw, Parallel(tp=16, ep=16), precision="fp8", kv_dtype="fp8",
                         framework="trtllm")
    one_node = tables.KernelTables("h100_sxm", "trtllm").nccl("all_reduce", 8)
    assert one_node is not None
    small = 7168 * 2.0                                  # one token's hidden state in BF16
    tree = Curve(*one_node)(small) + 2 * hw.scaleout_latency_us * 1e-6
    assert float(two_nodes.ops.allreduce(small)) == pytest.approx(tree, rel=0.02)
    assert 46e-6 <= float(two_nodes.ops.allreduce(8.0)) <= 48e-6
    # large buffers are bound by the NICs: each GPU's ring share at 50 GB/s
    big = 256e6
    assert float(two_nodes.ops.allreduce(big)) > big * 2 * 15 / 16 / (hw.scaleout_bandwidth_gbps * 1e9)
    assert "within a node" in two_nodes.ops.provenance["allreduce"]


@needs_tables
def test_tensorrt_llms_deepep_over_two_nodes_carries_its_own_forks_one_node_cost():
    """TensorRT-LLM's H100 recipes force DeepEP over two nodes; its collection timed its own fork (BF16 dispatch
    for FP8 experts) on one node only, so the cross-node table (SGLang's DeepEP) is scaled by the fork's one-node
    time over SGLang's one-node time, token count by token count."""
    lay = Parallel(tp=1, dp=16, ep=16)
    trt = StepCost("deepseek-r1", "h100", lay, precision="fp8", kv_dtype="fp8", framework="trtllm")
    sgl = StepCost("deepseek-r1", "h100", lay, precision="fp8", kv_dtype="fp8", framework="sglang")
    assert "moe_a2a_perf" in trt.ops.provenance["alltoall"]
    kt = tables.KernelTables("h100_sxm", "trtllm")
    fork, sglang_one_node = kt.trtllm_deepep(7168, 8, 256, "bfloat16"), kt.deepep_exchange(7168, 8, 256, 1, "normal")
    assert fork is not None and sglang_one_node is not None
    tokens = 256.0                    # above the low-latency kernels' range, where SGLang runs the normal ones too
    ratio = Curve(*fork)(tokens) / Curve(*sglang_one_node)(tokens)
    assert 1.0 < ratio < 2.0
    assert float(trt.ops.ep_exchange(tokens)) == pytest.approx(float(sgl.ops.ep_exchange(tokens)) * ratio, rel=0.02)


@needs_tables
def test_mla_attention_runs_at_the_whole_modules_measured_ratio_to_its_kernels():
    """Where module tables time DeepSeek-V3's whole MLA layer, attention runs at that module's ratio to our sum of
    the same layer's kernels, cell by cell and held flat beyond the grid: a decode's at the decode table's, a
    prompt's at the prefill table's, not at the framework's kernel_scale and prefill_kernel_ratio; other
    operators keep those."""
    cost = StepCost("deepseek-r1", "gb200", Parallel(tp=8, ep=8), precision="nvfp4", kv_dtype="fp8",
                    framework="trtllm")
    ops, fw, layers = cost.ops, cost.framework, cost.model.num_layers
    assert ops.decode_module_ratio is not None and ops.prefill_module_ratio is not None
    assert "mla_generation_module_perf" in ops.provenance["attn_module_decode"]
    assert "mla_context_module_perf" in ops.provenance["attn_module_prefill"]
    kt = tables.KernelTables("gb200", "trtllm")

    decode = kt.mla_module("decode", 16, "fp8_block", "fp8")
    assert decode is not None
    j = int(np.searchsorted(decode.y, 8192))
    batch, ctx = decode.x[0], decode.y[j]
    kernels = ops.attn_proj(batch) + ops.mla_absorb(batch) + ops.attn_decode(batch, ctx)
    ratio = ops.decode_module_ratio(batch, ctx)
    assert ratio == pytest.approx(decode.t[0, j] / kernels)
    assert ops.decode_module_ratio(1e6, 1e7) == pytest.approx(ops.decode_module_ratio(decode.x[-1], decode.y[-1]))
    step = cost.breakdown(batch, batch, batch * ctx, batch * ctx, batch, batch * ctx)
    assert step["attn_proj"] == pytest.approx(
        layers * (ops.attn_proj(batch) * ratio + ops.elementwise(batch) * fw.kernel_scale))
    assert step["lm_head"] == pytest.approx(ops.lm_head(batch) * fw.kernel_scale)

    prefill = kt.mla_module("prefill", 16, "fp8_block", "fp8")
    assert prefill is not None
    j = int(np.searchsorted(prefill.y, 1024))
    prompts, length = prefill.x[0], prefill.y[j]
    tokens = prompts * length
    kernels = ops.attn_proj(tokens) + ops.mla_kv_up(tokens) + ops.attn_prefill(prompts, length)
    ratio = ops.prefill_module_ratio(prompts, length)
    assert ratio == pytest.approx(prefill.t[0, j] / kernels)
    step = cost.breakdown(tokens, prompts, tokens * (length + 1) / 2, tokens, 0, 0.0)
    assert step["attn_proj"] == pytest.approx(layers * (ops.attn_proj(tokens) * ratio + ops.elementwise(tokens)
                                                        * fw.kernel_scale * fw.prefill_kernel_ratio))
    assert step["ffn"] == pytest.approx(
        (cost.model.num_dense_layers * ops.dense_ffn(tokens) + cost.model.num_moe_layers
         * (ops.moe(tokens) + ops.router(tokens) + ops.shared_ffn(tokens))) * fw.kernel_scale * fw.prefill_kernel_ratio)


@needs_tables
def test_only_a_module_table_of_the_serving_path_sets_the_attention_ratio():
    """No ratio for attention the module tables do not time (GQA), nor from a vLLM collection that ran an unfused
    norm chain serving never runs (H100); B200's vLLM collection, re-timed with the fused ops, sets both. SGLang's
    tables time its prompts' layer only (its decode runs under CUDA graphs, where the core table prices it)."""
    def ops(model: str, hw: str, framework: str) -> OpSet:
        return StepCost(model, hw, Parallel(tp=8), precision="fp8", kv_dtype="fp8", framework=framework).ops
    for model, hw, framework in (("llama-3.1-70b", "b200", "trtllm"), ("deepseek-r1", "h100", "vllm")):
        got = ops(model, hw, framework)
        assert got.decode_module_ratio is None and got.prefill_module_ratio is None, (model, hw, framework)
    b200 = ops("deepseek-r1", "b200", "vllm")
    assert b200.decode_module_ratio is not None and b200.prefill_module_ratio is not None
    sglang = ops("deepseek-r1", "b200", "sglang")
    assert sglang.decode_module_ratio is None and sglang.prefill_module_ratio is not None
    assert "wideep_context_mla_perf" in sglang.provenance["attn_module_prefill"]


@needs_tables
def test_sglangs_prompts_run_its_eager_layer_as_its_module_table_times_it():
    """SGLang runs a prompt's forward without CUDA graphs, and its wide-EP module table times that layer (under its
    default backend on the family, less the q/kv down-projection its communicator runs): a short prompt's
    attention costs the table's per-layer floor, several times its kernels; the ratio reproduces the table cell
    plus our down-projection GEMMs, a part of our projections."""
    cost = StepCost("deepseek-r1", "b200", Parallel(tp=8), precision="fp8", kv_dtype="fp8", framework="sglang")
    ops, m = cost.ops, cost.model
    table = tables.KernelTables("b200_sxm", "sglang").mla_module("prefill", 16, "fp8_block", "fp8", "trtllm_mla")
    assert table is not None and ops.prefill_module_ratio is not None
    j = int(np.searchsorted(table.y, 1024))
    prompts, length = table.x[0], table.y[j]
    tokens = prompts * length
    kernels = ops.attn_proj(tokens) + ops.mla_kv_up(tokens) + ops.attn_prefill(prompts, length)
    ratio = ops.prefill_module_ratio(prompts, length)
    assert ratio > 3                                         # the eager floor: ~0.53 ms a layer at 1k tokens
    down = ratio * kernels - table.t[0, j]                   # what the ratio adds beyond the table: the q/kv GEMMs
    assert 0 < down < ops.attn_proj(tokens)
    attention = cost.breakdown(tokens, prompts, tokens * (length + 1) / 2, tokens, 0, 0.0)
    assert attention["attn_proj"] + attention["attn_core"] > m.num_layers * table.t[0, j]


@needs_tables
def test_sglangs_prompt_layer_is_read_off_the_fp8_cache_cells_whatever_the_cache():
    """SGLang's collection timed FP8 caches only, and a fresh prompt's layer attends to the K/V it just computed,
    only writing the cache: a BF16 cache (H200's recipe) takes the same cells, not the medians."""
    def ratio(kv: str) -> float:
        got = StepCost("deepseek-r1", "h200", Parallel(tp=8), precision="fp8", kv_dtype=kv, framework="sglang").ops
        assert got.prefill_module_ratio is not None, kv
        return float(got.prefill_module_ratio(1, 1024))
    assert ratio("bf16") > 3 and ratio("fp8") > 3


def test_shared_experts_beside_the_routed_path_cost_only_what_outlasts_it(datasheet):
    """vLLM runs an MoE layer's shared experts on a second stream beside the routed path for batches up to 256
    tokens on NVIDIA GPUs (FusedMoE): such a step waits for the longer of the two; a larger step, a stack without
    the second stream, or another vendor's chip pays both in turn."""
    hw = msgspec.structs.replace(datasheet(), vendor="nvidia")
    fw = load_framework("vllm")
    assert fw.shared_experts_overlap_tokens == 256
    beside = StepCost("deepseek-r1", hw, Parallel(tp=8), precision="fp8", kv_dtype="fp8", framework_costs=fw)
    serial = StepCost("deepseek-r1", hw, Parallel(tp=8), precision="fp8", kv_dtype="fp8",
                      framework_costs=msgspec.structs.replace(fw, shared_experts_overlap_tokens=0))
    ops, moe_layers = beside.ops, beside.model.num_moe_layers
    for batch in (8.0, 256.0, 512.0):
        step = (batch, batch, batch * 2000.0, batch * 2000.0)
        saved = serial.breakdown(*step)["ffn"] - beside.breakdown(*step)["ffn"]
        hidden = min(ops.shared_ffn(batch), ops.moe(batch) + ops.router(batch))
        expected = moe_layers * hidden * fw.kernel_scale if batch <= 256 else 0.0
        assert saved == pytest.approx(expected), batch
    assert serial.breakdown(8.0, 8.0, 16000.0, 16000.0)["comm"] == beside.breakdown(8.0, 8.0, 16000.0, 16000.0)["comm"]
    other_vendor = StepCost("deepseek-r1", datasheet(), Parallel(tp=8), precision="fp8", kv_dtype="fp8",
                            framework_costs=fw)
    assert other_vendor.breakdown(8.0, 8.0, 16000.0, 16000.0)["ffn"] == pytest.approx(
        serial.breakdown(8.0, 8.0, 16000.0, 16000.0)["ffn"])
