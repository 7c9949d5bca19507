"""Model catalog: published parameter totals, shapes the cost model needs, precision per weight group."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scoville.catalog.models import list_models, load_model
from scoville.errors import UserError


@pytest.mark.parametrize(
    "name, total_b, tol",
    [
        ("gpt-oss-120b", 116.8, 0.005),   # OpenAI model card
        ("deepseek-r1", 671.0, 0.005),    # DeepSeek (MTP module excluded, as in the 671 B headline)
        ("kimi-k2.5", 1030.0, 0.01),      # Moonshot: ~1.03-1.04 T incl. the ~0.4 B vision tower
        ("llama-3.1-8b", 8.03, 0.005),
        ("llama-3.1-70b", 70.6, 0.005),
        ("qwen3-32b", 32.8, 0.01),
    ],
)
def test_parameter_totals_match_published(name, total_b, tol):
    m = load_model(name)
    assert m.total_params / 1e9 == pytest.approx(total_b, rel=tol)


def test_shipped_catalog():
    shipped = {"gpt-oss-120b", "deepseek-r1", "kimi-k2.5", "llama-3.1-8b", "llama-3.1-70b", "qwen3-32b"}
    assert shipped <= set(list_models())


def test_gpt_oss_shapes_and_mxfp4_experts():
    m = load_model("gpt-oss-120b")
    assert (m.attention, m.num_sliding_layers, m.sliding_window) == ("gqa", 18, 128)
    assert (m.num_experts, m.experts_per_token, m.num_moe_layers) == (128, 4, 36)
    assert m.precision["experts"] == "mxfp4" and m.precision["attn"] == "bf16"
    # ~61 GB MXFP4 experts + ~4 GB BF16 (SIM-REFERENCE table B)
    assert sum(m.weight_bytes().values()) / 1e9 == pytest.approx(65.2, rel=0.02)


def test_deepseek_mla_and_dense_layers():
    m = load_model("deepseek-r1")
    assert m.attention == "mla" and m.kv_elements_per_token_per_layer() == 576
    assert (m.num_dense_layers, m.num_moe_layers, m.num_shared_experts, m.mtp_layers) == (3, 58, 1, 1)
    assert m.active_params / 1e9 == pytest.approx(37.6, rel=0.01)
    assert m.precision["experts"] == "fp8"
    nvfp4 = m.weight_bytes(m.with_precision("nvfp4"))
    assert sum(nvfp4.values()) / 1e9 == pytest.approx(385, rel=0.03)  # NVFP4 experts, FP8 attention


def test_kimi_reads_text_config_and_int4_experts():
    m = load_model("kimi-k2.5")
    assert (m.num_heads, m.num_experts, m.num_dense_layers) == (64, 384, 1)
    assert (m.precision["experts"], m.precision["attn"], m.precision["shared_experts"]) == ("int4", "bf16", "bf16")
    assert sum(m.weight_bytes().values()) / 1e9 == pytest.approx(594, rel=0.02)


def test_any_config_json_path_and_mixtral_style_moe(tmp_path):
    cfg = {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "hidden_size": 4096,
           "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
           "num_local_experts": 8, "num_experts_per_tok": 2, "vocab_size": 32000, "max_position_embeddings": 32768}
    d = tmp_path / "mixtral"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    m = load_model(str(d))
    assert m.name == "mixtral" and m.num_moe_layers == 32 and m.expert_intermediate == 14336
    assert m.total_params / 1e9 == pytest.approx(46.7, rel=0.01)   # Mixtral 8x7B: 46.7 B


def test_qwen_moe_shared_expert_width(tmp_path):
    # Qwen1.5-MoE-A2.7B: 60 experts of 1408 + one shared MLP of 5632 (= 4 experts); 14.3 B total
    cfg = {"architectures": ["Qwen2MoeForCausalLM"], "model_type": "qwen2_moe", "hidden_size": 2048,
           "intermediate_size": 5632, "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632,
           "num_hidden_layers": 24, "num_attention_heads": 16, "num_key_value_heads": 16, "num_experts": 60,
           "num_experts_per_tok": 4, "vocab_size": 151936, "max_position_embeddings": 8192, "attention_bias": True}
    p = tmp_path / "qwen-moe.json"
    p.write_text(json.dumps(cfg))
    m = load_model(str(p))
    assert m.num_shared_experts == 4 and m.num_moe_layers == 24
    assert m.total_params / 1e9 == pytest.approx(14.3, rel=0.02)


def test_bad_config_is_one_line_user_error(tmp_path):
    p = tmp_path / "config.json"
    p.write_text(json.dumps({"hidden_size": 1024, "num_hidden_layers": 2, "vocab_size": 10}))
    with pytest.raises(UserError) as exc:
        load_model(str(p))
    assert "num_attention_heads" in str(exc.value) and str(p) in str(exc.value) and "\n" not in str(exc.value)
    p.write_text("{not json")
    with pytest.raises(UserError, match="not valid JSON"):
        load_model(str(tmp_path / "config.json"))
    with pytest.raises(UserError, match="deepseek-r1"):
        load_model("no-such-model")


def test_zero_sized_config_field_is_a_user_error_not_a_division_traceback(tmp_path):
    p = tmp_path / "zero-heads.json"
    p.write_text(json.dumps({"hidden_size": 1024, "num_hidden_layers": 2, "vocab_size": 10,
                             "num_attention_heads": 0, "intermediate_size": 4096}))
    with pytest.raises(UserError, match="num_attention_heads must be a whole number"):
        load_model(str(p))


@pytest.mark.parametrize("field, value", [("num_hidden_layers", 0), ("hidden_size", float("inf")),
                                          ("hidden_size", -4096), ("num_attention_heads", "many"),
                                          ("vocab_size", True)])
def test_a_bad_shape_field_is_one_line_naming_it(tmp_path, field, value):
    import json as _json

    from scoville.catalog.models import load_model as _load
    from scoville.errors import UserError

    cfg = _json.loads((Path(__file__).resolve().parents[2] / "src/scoville/data/models/llama-3.1-8b.json").read_text())
    cfg[field] = value
    p = tmp_path / "bad.json"
    p.write_text(_json.dumps(cfg))
    with pytest.raises(UserError, match=field):
        _load(str(p))


def _llama_8b_config() -> dict:
    return json.loads((Path(__file__).resolve().parents[2] / "src/scoville/data/models/llama-3.1-8b.json").read_text())


@pytest.mark.parametrize("extra, named", [
    ({"layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"] * 8},
     "layer_types linear_attention"),                                    # Qwen3.5 / Qwen3-Next Gated DeltaNet
    ({"index_topk": 2048}, "index_topk"),                               # DeepSeek-V3.2 / GLM-5 sparse attention
    ({"hybrid_override_pattern": "M-M*-" * 6}, "hybrid_override_pattern"),   # Nemotron-H Mamba layers
    ({"attention_chunk_size": 8192}, "attention_chunk_size"),           # Llama 4 chunked local attention
])
def test_a_layer_design_the_cost_model_lacks_is_refused_in_one_line_naming_its_field(tmp_path, extra, named):
    """Read as the nearest supported family, such a model would get an estimate that is wrong without a sign."""
    p = tmp_path / "config.json"
    p.write_text(json.dumps({**_llama_8b_config(), **extra}))
    with pytest.raises(UserError) as exc:
        load_model(str(p))
    assert named in str(exc.value) and str(p) in str(exc.value) and "\n" not in str(exc.value)


def test_sliding_and_full_layer_types_still_load():
    m = load_model("gpt-oss-120b")
    assert m.num_sliding_layers == 18 and m.num_full_layers == 18


def test_moe_layers_follow_a_per_layer_list_and_qwen_dense_only_layers(tmp_path):
    base = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 2048,
            "intermediate_size": 6144, "moe_intermediate_size": 768, "num_hidden_layers": 8, "num_attention_heads": 32,
            "num_key_value_heads": 4, "num_experts": 64, "num_experts_per_tok": 8, "vocab_size": 151936}
    listed = tmp_path / "listed.json"
    listed.write_text(json.dumps({**base, "moe_layer_freq": [0, 0, 1, 1, 1, 1, 1, 1]}))
    m = load_model(str(listed))
    assert (m.num_dense_layers, m.num_moe_layers) == (2, 6)
    dense_only = tmp_path / "dense-only.json"
    dense_only.write_text(json.dumps({**base, "mlp_only_layers": [0, 7]}))
    m = load_model(str(dense_only))
    assert (m.num_dense_layers, m.num_moe_layers) == (2, 6)
