"""Roofline arithmetic against hand-computed cases, and the properties the engine relies on."""

from __future__ import annotations

import json

import msgspec
import numpy as np
import yaml
import pytest

from scoville.errors import UserError
from scoville.sim.cost import Parallel, StepCost
from scoville.sim.hardware import load_hardware
from scoville.sim.models import load_model

IDEAL = """
vendor: test
family: blackwell
flops_tflops: {{fp8: 2000, bf16: 1000}}
hbm_capacity_gb: 100
hbm_bandwidth_tbps: {bw}
scaleup_bandwidth_gbps: 100
scaleup_domain: 8
scaleout_bandwidth_gbps: 10
rated_watts: 1000
idle_watts: 100
runtime_reserve_gb: 4
efficiency: {{compute: 1.0, memory: 1.0, attention_compute: 1.0, scaleup: 1.0, scaleout: 1.0,
             step_overhead_us: 0.0, kernel_overhead_us: 0.0, collective_us: 0.0, moe_imbalance: 0.0}}
"""

TINY = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 1024, "intermediate_size": 4096,
        "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 128,
        "vocab_size": 1000, "max_position_embeddings": 8192, "torch_dtype": "bfloat16"}


@pytest.fixture
def ideal(tmp_path):
    def make(bw: float = 1.0):
        p = tmp_path / f"ideal{bw}.yaml"
        p.write_text(IDEAL.format(bw=bw))
        return load_hardware(str(p))
    return make


@pytest.fixture
def tiny(tmp_path):
    p = tmp_path / "tiny.json"
    p.write_text(json.dumps(TINY))
    return load_model(str(p))


def test_gemm_memory_bound_at_batch_1_and_compute_bound_at_8k(ideal, tiny):
    c = StepCost(tiny, ideal(1.0))
    attn_params = 1024 * 1024 * 2 + 2 * 1024 * 256  # q, o, k, v (norms are elementwise, not GEMMs)
    # decode of one token: weights (BF16) + activations in/out, at 1 TB/s
    bytes_1 = attn_params * 2 + 1 * 2048 * 2
    assert c.breakdown(1, 1, 10, 10)["attn_proj"] == pytest.approx(2 * bytes_1 / 1e12)
    # 8192-token prefill chunk: 2 FLOPs per param per token at 1 PFLOP/s beats the bytes
    t = 8192
    flops = 2 * t * attn_params
    assert flops / 1e15 > (attn_params * 2 + t * 2048 * 2) / 1e12
    assert c.breakdown(t, 1, t * (t + 1) / 2, t)["attn_proj"] == pytest.approx(2 * flops / 1e15)


def test_gqa_decode_reads_kv_of_every_kv_head(ideal, tiny):
    c = StepCost(tiny, ideal(1.0))
    assert c.kv_bytes_per_token == 2 * 2 * 2 * 128 * 2          # layers x (K,V) x kv_heads x head_dim x BF16
    kv = 1000
    per_layer = kv * 2 * 2 * 128 * 2                              # bytes read: 1.024 MB
    flops = 4 * 8 * 128 * kv                                      # QK^T and PV over 8 query heads
    assert flops / 1e15 < per_layer / 1e12                        # bandwidth-bound (~8 FLOP/B)
    assert c.breakdown(1, 1, kv, kv)["attn_core"] == pytest.approx(2 * per_layer / 1e12)
    # TP=2 splits the 2 KV heads; TP=4 must replicate them
    assert StepCost(tiny, ideal(1.0), Parallel(tp=2)).kv_bytes_per_token == c.kv_bytes_per_token
    assert StepCost(tiny, ideal(1.0), Parallel(tp=4)).kv_bytes_per_token == 2 * c.kv_bytes_per_token


def test_mla_decode_flops_absorbed_and_compute_bound(ideal):
    m = load_model("deepseek-r1")
    ctx = 8192
    fast = StepCost(m, ideal(1e6), kv_dtype="fp8")               # bandwidth ~infinite: compute alone
    flops = ctx * 2 * 128 * (512 + 64 + 512) + 2 * 128 * 512 * (128 + 128)
    assert 2 * 128 * (512 + 64 + 512) == 278_528                  # SIM-REFERENCE 4.2
    assert fast.breakdown(1, 1, ctx, ctx)["attn_core"] == pytest.approx(61 * flops / 2e15)
    # On a real H200 with FP8 KV and all 128 heads on a rank (DP attention), the 484 FLOP/B kernel sits
    # above the achievable ridge: compute-bound, unlike GQA.
    h200 = StepCost(m, "h200", Parallel(dp=8, ep=8), kv_dtype="fp8")
    bs = 64 * 8
    core = h200.breakdown(bs, bs, bs * ctx, bs * ctx)["attn_core"]
    kv_bytes_time = 61 * 64 * ctx * 576 / (4.8e12 * h200.hw.eff("memory"))
    assert core > 1.2 * kv_bytes_time
    # With TP8 each rank still reads the whole latent but does 1/8 of the heads: memory-bound again.
    tp8 = StepCost(m, "h200", Parallel(tp=8), kv_dtype="fp8")
    assert tp8.breakdown(64, 64, 64 * ctx, 64 * ctx)["attn_core"] == pytest.approx(kv_bytes_time)


def test_sliding_window_layers_capped_at_their_window():
    c = StepCost("gpt-oss-120b", "h200")
    assert c.kv_bytes_per_token == 18 * 2 * 8 * 64 * 2            # 36 KiB, full-attention layers only
    assert c.kv_bytes_per_seq == 18 * 128 * 2 * 8 * 64 * 2        # ~4.7 MB per sequence (BF16)
    full_only = StepCost("llama-3.1-8b", "h200")                  # control: no sliding layers
    short, long = 4096, 65536
    d_oss = c.breakdown(1, 1, long, long)["attn_core"] - c.breakdown(1, 1, short, short)["attn_core"]
    per_full_layer = (long - short) * 2 * 8 * 64 * 2 / (c.hw.hbm_bytes_per_s * c.hw.eff("memory"))
    assert d_oss == pytest.approx(18 * per_full_layer, rel=1e-6)  # only the 18 full layers grew
    assert full_only.breakdown(1, 1, long, long)["attn_core"] > full_only.breakdown(1, 1, short, short)["attn_core"]


@pytest.mark.parametrize("model, par", [("gpt-oss-120b", Parallel(tp=2)), ("deepseek-r1", Parallel(tp=8, ep=8)),
                                        ("llama-3.1-70b", Parallel(tp=4)), ("kimi-k2.5", Parallel(dp=8, ep=8))])
def test_more_hbm_bandwidth_never_makes_decode_slower(ideal, model, par):
    bs = np.array([1, 4, 16, 64, 256, 1024])
    ctx = 8192
    times = [StepCost(model, ideal(bw), par).step_time(bs, bs, bs * ctx, bs * ctx) for bw in (1, 2, 4, 8, 16)]
    for slow, fast in zip(times, times[1:]):
        assert np.all(fast <= slow) and np.any(fast < slow)


def test_vectorised_equals_scalar():
    c = StepCost("deepseek-r1", "gb300", Parallel(dp=8, ep=8), precision="nvfp4", kv_dtype="fp8")
    T = np.array([1, 8, 300, 8192])
    S = np.array([1, 8, 300, 1])
    A = T * 4000.0
    vec = c.step_time(T, S, A, A)
    assert [c.step_time(int(t), int(s), float(a), float(a)) for t, s, a in zip(T, S, A)] == pytest.approx(list(vec))


def test_moe_busiest_rank_costs_more_than_the_mean(tmp_path):
    base = load_hardware("gb300")
    raw = msgspec.to_builtins(base)
    raw["efficiency"] = {"moe_imbalance": 0.0}
    even_yaml = tmp_path / "even.yaml"
    even_yaml.write_text(yaml.safe_dump(raw))
    even = load_hardware(str(even_yaml))
    par = Parallel(dp=8, ep=8)
    skewed, fair = StepCost("deepseek-r1", base, par), StepCost("deepseek-r1", even, par)
    t = 2048  # large batch: compute of the busiest rank dominates
    assert skewed.breakdown(t, t, t * 8000, t * 8000)["ffn"] > fair.breakdown(t, t, t * 8000, t * 8000)["ffn"]
    # without EP there is no dispatch/combine traffic
    no_ep = StepCost("deepseek-r1", even, Parallel(dp=8, ep=1))
    assert no_ep.breakdown(t, t, t * 8000, t * 8000)["comm"] == pytest.approx(0.0)


def test_kv_capacity_is_capacity_minus_weights_activations_reserve():
    c = StepCost("llama-3.1-8b", "h100")
    assert c.weight_bytes_per_accelerator == pytest.approx(2 * 8.03e9, rel=0.003)
    free = c.hw.hbm_bytes * 0.9 - c.weight_bytes_per_accelerator - c.activation_bytes_per_accelerator() - 3.9e9
    assert c.kv_capacity_tokens(0.9) == int(free // c.kv_bytes_per_token)
    assert c.kv_capacity_tokens(0.5) < c.kv_capacity_tokens(0.9)
    # TP2 halves the weights per GPU, so the instance holds more than twice the KV
    assert StepCost("llama-3.1-8b", "h100", Parallel(tp=2)).kv_capacity_tokens() > 2 * c.kv_capacity_tokens()
    # 671 GB of FP8 weights do not fit one H100: no KV at all
    assert StepCost("deepseek-r1", "h100").kv_capacity_tokens() == 0
    # MLA latent replicates over TP ranks, so DP attention holds 8x the tokens of TP8 on the same GPUs
    tp8 = StepCost("deepseek-r1", "gb300", Parallel(tp=8, ep=8), kv_dtype="fp8")
    dp8 = StepCost("deepseek-r1", "gb300", Parallel(dp=8, ep=8), kv_dtype="fp8")
    assert dp8.kv_capacity_tokens() / tp8.kv_capacity_tokens() == pytest.approx(8, rel=0.15)


def test_kv_transfer_scaleout_slower_than_scaleup():
    c = StepCost("deepseek-r1", "gb200", Parallel(tp=8))
    assert c.kv_transfer_time(8192, scaleout=True) > c.kv_transfer_time(8192, scaleout=False) > 0


def test_bad_parallelism_is_user_error():
    with pytest.raises(UserError, match="ep=3"):
        StepCost("deepseek-r1", "gb200", Parallel(tp=8, ep=3))
    with pytest.raises(UserError, match="kv_dtype"):
        StepCost("llama-3.1-8b", "h100", kv_dtype="int3")
