"""Model architectures read from HF-style ``config.json`` files.

The cost model needs shapes, not weights: layer counts and widths, which layers
use sliding-window attention, MLA ranks, how many experts and how they route,
and what precision each *weight group* is stored in (MXFP4 experts with BF16
attention on gpt-oss, FP8 block-scaled DeepSeek, INT4 W4A16 Kimi experts ...).
Everything is derived from the config the way the serving engines derive it,
so any compatible config.json works, not only the shipped ones.

Supported families: Llama/Qwen/Mistral-style dense GQA, Mixtral/Qwen-MoE-style
MoE, GptOss (alternating sliding/full attention with sinks), DeepseekV3/Kimi
(MLA, shared experts, first-k dense layers, MTP), and multimodal wrappers that
nest the language model in ``text_config``. A config whose layers are something
else (linear attention, Mamba, sparse or chunked attention, per-layer block
configs: ``UNMODELLED``) is refused with a one-line error naming the field, not
read as the nearest supported family: its estimate would be wrong without a sign.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import msgspec

from scoville.errors import UserError

# Bytes per weight, scales included: MXFP4 = 4-bit E2M1 + 8-bit scale per 32 (4.25 bit); NVFP4 = 4-bit +
# FP8 scale per 16 (4.5 bit); INT4 W4A16 group 32 with BF16 scales (4.5 bit); FP8 with 128x128 FP32 block
# scales (~1.0002 B). FP32 is a whole model served unquantised in single precision (`vllm serve --dtype float32`,
# what vLLM's CPU backend runs fastest on a CPU without AVX-512 BF16).
WEIGHT_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0 + 4 / (128 * 128), "int8": 1.0,
                "mxfp4": 4.25 / 8, "nvfp4": 4.5 / 8, "int4": 4.5 / 8, "fp4": 4.5 / 8, "fp32": 4.0}
# The tensor-core rate a GEMM with those weights runs at (activations' format decides): W4A16 INT4 runs in
# BF16; MXFP4 experts run W4A8 (MXFP4 x MXFP8, the TensorRT-LLM/vLLM default for gpt-oss); NVFP4 is W4A4.
COMPUTE_PRECISION = {"bf16": "bf16", "fp16": "bf16", "fp8": "fp8", "int8": "int8",
                     "mxfp4": "bf16", "nvfp4": "fp4", "fp4": "fp4", "int4": "bf16", "fp32": "fp32"}
KV_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "fp4": 0.5625, "fp32": 4.0}

GROUPS = ("attn", "dense_ffn", "experts", "shared_experts", "embed", "lm_head")
# Attention kinds a ``layer_types`` entry may name: full causal attention and a sliding window over it
MODELLED_LAYER_TYPES = ("full_attention", "sliding_attention")
# Config fields of layer designs the cost model has no operators for, and what each one is
UNMODELLED = {
    "index_topk": "DeepSeek sparse attention, a top-k indexer per layer, as in DeepSeek-V3.2/V4 and GLM-5",
    "linear_attn_config": "linear attention layers, as in Kimi Linear",
    "sparse_attention_config": "sparse attention, as in MiniMax-M3",
    "hybrid_override_pattern": "Mamba layers, as in Nemotron-H",
    "layers_block_type": "Mamba layers, as in Nemotron-H",
    "attention_chunk_size": "chunked local attention, as in Llama 4 and MiMo-V2",
    "hybrid_layer_pattern": "a per-layer attention pattern, as in MiMo-V2",
    "block_configs": "per-layer block configs, as in DeciLM / Nemotron-Super",
}


class ModelArch(msgspec.Struct, kw_only=True):
    """Shapes and precisions of one decoder-only model (all counts are for the whole model)."""

    name: str
    architecture: str
    hidden_size: int
    num_layers: int
    vocab_size: int
    max_context: int
    # attention
    attention: str                      # "gqa" or "mla"
    num_heads: int
    num_kv_heads: int
    head_dim: int
    sliding_window: int | None = None
    num_sliding_layers: int = 0         # layers attending over at most sliding_window tokens
    attention_bias: bool = False
    attention_sinks: bool = False
    # RMSNorm of queries and keys (``use_qk_norm``): "per_head" over each head's width, "per_layer" over all of
    # a layer's heads (MiniMax M2: ``qk_norm_type``), which under tensor parallelism all-reduces the sums
    qk_norm: str | None = None
    q_lora_rank: int | None = None      # MLA
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    # feed-forward
    num_dense_layers: int = 0
    dense_intermediate: int = 0
    num_moe_layers: int = 0
    num_experts: int = 0
    experts_per_token: int = 0
    expert_intermediate: int = 0
    num_shared_experts: int = 0
    expert_bias: bool = False
    mtp_layers: int = 0                 # DeepSeek multi-token-prediction modules (not in the headline total)
    tie_embeddings: bool = False
    extra_params: int = 0               # e.g. a vision tower, counted in the total, never in decode cost
    precision: dict[str, str] = {}      # weight group -> storage format (see WEIGHT_BYTES)
    default_precision: str = "bf16"     # short label for manifests, e.g. "mxfp4", "fp8", "int4"

    # -- per-layer parameter counts --------------------------------------------------------------
    @property
    def num_full_layers(self) -> int:
        return self.num_layers - self.num_sliding_layers

    @property
    def attn_params_per_layer(self) -> int:
        """Attention projection weights of one layer (router weights of MoE layers are added separately)."""
        h = self.hidden_size
        if self.attention == "mla":
            qk = self.qk_nope_head_dim + self.qk_rope_head_dim
            if self.q_lora_rank:
                q = h * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * self.num_heads * qk
            else:
                q = h * self.num_heads * qk
            kv = h * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank
            kv += self.kv_lora_rank * self.num_heads * (self.qk_nope_head_dim + self.v_head_dim)
            o = self.num_heads * self.v_head_dim * h
            return q + kv + o
        qd, kvd = self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
        n = h * qd + 2 * h * kvd + qd * h
        if self.attention_bias:
            n += qd + 2 * kvd + h
        if self.attention_sinks:
            n += self.num_heads
        return n

    @property
    def expert_params(self) -> int:
        """One routed expert (gate, up, down; plus biases where the model has them)."""
        h, i = self.hidden_size, self.expert_intermediate
        return 3 * h * i + ((2 * i + h) if self.expert_bias else 0)

    @property
    def router_params(self) -> int:
        return self.hidden_size * self.num_experts + (self.num_experts if self.expert_bias else 0)

    @property
    def shared_params_per_layer(self) -> int:
        return 3 * self.hidden_size * self.expert_intermediate * self.num_shared_experts

    def group_params(self) -> dict[str, int]:
        """Parameters per weight group (norms counted with attention)."""
        h, L = self.hidden_size, self.num_layers
        attn = L * (self.attn_params_per_layer + 2 * h) + h + self.num_moe_layers * self.router_params
        return {
            "attn": attn,
            "dense_ffn": self.num_dense_layers * 3 * h * self.dense_intermediate,
            "experts": self.num_moe_layers * self.num_experts * self.expert_params,
            "shared_experts": self.num_moe_layers * self.shared_params_per_layer,
            "embed": self.vocab_size * h,
            "lm_head": 0 if self.tie_embeddings else self.vocab_size * h,
        }

    @property
    def total_params(self) -> int:
        """Headline total (DeepSeek's 671 B convention: MTP modules excluded, a vision tower included)."""
        return sum(self.group_params().values()) + self.extra_params

    @property
    def active_params(self) -> int:
        """Parameters touched per token (embedding and LM head both counted)."""
        g = self.group_params()
        routed = self.num_moe_layers * self.experts_per_token * self.expert_params
        return g["attn"] + g["dense_ffn"] + routed + g["shared_experts"] + g["embed"] + g["lm_head"]

    def weight_bytes(self, precision: dict[str, str] | None = None) -> dict[str, float]:
        prec = precision or self.precision
        return {g: n * WEIGHT_BYTES[prec.get(g, "bf16")] for g, n in self.group_params().items()}

    def kv_elements_per_token_per_layer(self) -> int:
        """Cached elements per token per layer: MLA latent + RoPE key, or K and V of every KV head."""
        if self.attention == "mla":
            return self.kv_lora_rank + self.qk_rope_head_dim
        return 2 * self.num_kv_heads * self.head_dim

    def served_precision(self, override: str | None) -> str:
        """The precision label a deployment serves this model in: ``override``, or the checkpoint's own for
        ``None``/``"native"``."""
        return override if override not in (None, "native") else self.default_precision

    def with_precision(self, override: str | None) -> dict[str, str]:
        """Weight-group formats for a deployment precision label.

        ``None``/``"native"`` keeps the checkpoint's formats. ``"nvfp4"``/``"mxfp4"``/``"int4"`` quantize the
        feed-forward groups (routed, shared, dense FFN) and keep attention, embeddings and LM head as shipped —
        what NVIDIA's NVFP4 and AMD's MXFP4 DeepSeek/Kimi checkpoints do. ``"fp8"``/``"bf16"`` set every
        linear layer (embeddings and LM head stay BF16). ``"fp32"`` is the whole model in single precision,
        embeddings and LM head too (a server's ``--dtype float32``).
        """
        if override in (None, "native", self.default_precision):
            return dict(self.precision)
        if override not in WEIGHT_BYTES:
            raise UserError(f"unknown precision {override!r} for {self.name}; "
                            f"use one of native, {', '.join(WEIGHT_BYTES)}")
        prec = dict(self.precision)
        if override in ("nvfp4", "mxfp4", "int4", "fp4"):
            for g in ("experts", "shared_experts", "dense_ffn"):
                prec[g] = override
        elif override == "fp32":
            prec = dict.fromkeys(GROUPS, "fp32")
        else:
            for g in ("attn", "experts", "shared_experts", "dense_ffn"):
                prec[g] = override
        return prec

    def to_dict(self) -> dict[str, Any]:
        d = msgspec.to_builtins(self)
        d["total_params"] = self.total_params
        d["active_params"] = self.active_params
        return d


# -- config.json parsing ----------------------------------------------------------------------------
def _quant_precision(cfg: dict[str, Any], base: str) -> tuple[dict[str, str], str]:
    """Which format each weight group is stored in, from ``quantization_config``."""
    prec = {g: base for g in GROUPS}
    q = cfg.get("quantization_config") or {}
    method = str(q.get("quant_method", "")).lower()
    if not q:
        return prec, base
    if method == "mxfp4":  # gpt-oss: experts MXFP4; attention, router, embeddings, LM head not converted
        prec.update(experts="mxfp4", dense_ffn="mxfp4", shared_experts="mxfp4")
        return prec, "mxfp4"
    if method == "fp8":    # DeepSeek block FP8: every linear layer; embeddings and LM head BF16
        prec.update(attn="fp8", dense_ffn="fp8", experts="fp8", shared_experts="fp8")
        return prec, "fp8"
    if method in ("modelopt", "nvfp4") or "nvfp4" in json.dumps(q).lower():
        prec.update(experts="nvfp4", shared_experts="nvfp4", dense_ffn="nvfp4")
        return prec, "nvfp4"
    if method == "compressed-tensors":
        groups = q.get("config_groups") or {}
        bits = {(g.get("weights") or {}).get("num_bits") for g in groups.values()}
        wtype = {(g.get("weights") or {}).get("type") for g in groups.values()}
        fmt = "int4" if 4 in bits and "int" in wtype else ("fp8" if 8 in bits else base)
        ignore = " ".join(map(str, q.get("ignore", [])))
        prec["experts"] = fmt
        if "shared_experts" not in ignore:
            prec["shared_experts"] = fmt
        if "self_attn" not in ignore:
            prec["attn"] = fmt
        if "mlp\\\\.(gate" not in ignore and "mlp\\.(gate" not in ignore:
            prec["dense_ffn"] = fmt
        return prec, fmt
    return prec, base


def _req(cfg: dict[str, Any], key: str, source: str) -> Any:
    if key not in cfg:
        raise UserError(f"{source}: config.json lacks field {key!r}, which the simulator needs; "
                        "add it or use a full HF config")
    return cfg[key]


def _count(cfg: dict[str, Any], key: str, source: str, default: Any = None, *, minimum: int = 1) -> int:
    """A whole-number field (layers, widths, heads ...), at least ``minimum``, as one line when it is not."""
    raw = cfg.get(key, default) if default is not None else _req(cfg, key, source)
    ok = isinstance(raw, int) and not isinstance(raw, bool) or (isinstance(raw, float) and raw.is_integer())
    if not ok or int(raw) < minimum or int(raw) > 10**9:
        raise UserError(f"{source}: {key} must be a whole number >= {minimum}, got {raw!r}; fix config.json")
    return int(raw)


def _refuse_unmodelled(cfg: dict[str, Any], arch: str, source: str) -> None:
    """A one-line error for a config whose layers the cost model cannot represent (``UNMODELLED``, or a
    ``layer_types`` entry other than full or sliding-window attention)."""
    found = [f"{field} ({what})" for field, what in UNMODELLED.items() if cfg.get(field)]
    kinds = sorted({str(t) for t in cfg.get("layer_types") or []} - set(MODELLED_LAYER_TYPES))
    if kinds:
        found.insert(0, f"layer_types {'/'.join(kinds)}")
    if found:
        raise UserError(f"{source}: {arch} uses {'; '.join(found)}, which scoville's cost model does not represent; "
                        "it models dense and MoE decoders with full or sliding-window GQA or MLA attention, so "
                        "simulate one of those")


def _moe_layers(cfg: dict[str, Any], num_layers: int) -> int:
    """How many decoder layers are MoE layers: after the first ``first_k_dense_replace``, every
    ``moe_layer_freq`` / ``decoder_sparse_step``-th (or those a per-layer 0/1 ``moe_layer_freq`` list marks), none
    of Qwen-MoE's ``mlp_only_layers``."""
    freq = cfg.get("moe_layer_freq")
    if isinstance(freq, list):
        return sum(1 for flag in freq[:num_layers] if flag)
    first_dense = int(cfg.get("first_k_dense_replace", 0))
    step = int(freq or cfg.get("decoder_sparse_step") or 1)
    dense_only = {int(i) for i in cfg.get("mlp_only_layers") or []}
    return sum(1 for i in range(first_dense, num_layers) if (i - first_dense) % step == 0 and i not in dense_only)


def parse_config(cfg: dict[str, Any], name: str, source: str = "config.json") -> ModelArch:
    """A ModelArch from a parsed HF config dict (``source`` names the file in error messages)."""
    outer = cfg
    extra = int(cfg.get("_vision_params", 0))
    if "text_config" in cfg and "hidden_size" not in cfg:
        cfg = cfg["text_config"]
    arch = (cfg.get("architectures") or outer.get("architectures") or ["unknown"])[0]
    _refuse_unmodelled(cfg, arch, source)
    mtype = str(cfg.get("model_type", ""))
    h = _count(cfg, "hidden_size", source)
    L = _count(cfg, "num_hidden_layers", source)
    heads = _count(cfg, "num_attention_heads", source)
    vocab = _count(cfg, "vocab_size", source)
    base = str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16")
    base = base.replace("bfloat16", "bf16").replace("float16", "fp16").replace("float32", "fp32")
    if base not in WEIGHT_BYTES:
        base = "bf16"
    prec, label = _quant_precision(cfg, base)
    common: dict[str, Any] = dict(
        name=name, architecture=arch, hidden_size=h, num_layers=L, vocab_size=vocab, num_heads=heads,
        max_context=int(cfg.get("max_position_embeddings", 4096)),
        tie_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        attention_bias=bool(cfg.get("attention_bias", False)), extra_params=extra, precision=prec,
        default_precision=label,
        qk_norm=str(cfg.get("qk_norm_type") or "per_head") if cfg.get("use_qk_norm") else None,
    )
    if "kv_lora_rank" in cfg and cfg.get("kv_lora_rank"):  # DeepseekV2/V3, Kimi K2: MLA
        common.update(
            attention="mla", num_kv_heads=heads, head_dim=int(cfg["qk_nope_head_dim"]) + int(cfg["qk_rope_head_dim"]),
            q_lora_rank=cfg.get("q_lora_rank"), kv_lora_rank=int(cfg["kv_lora_rank"]),
            qk_nope_head_dim=int(cfg["qk_nope_head_dim"]), qk_rope_head_dim=int(cfg["qk_rope_head_dim"]),
            v_head_dim=int(cfg["v_head_dim"]), mtp_layers=int(cfg.get("num_nextn_predict_layers", 0)),
        )
    else:
        kvh = _count(cfg, "num_key_value_heads", source, heads)
        hd = _count(cfg, "head_dim", source, cfg.get("head_dim") or h // heads)
        sliding = 0
        window = cfg.get("sliding_window")
        if cfg.get("layer_types"):
            sliding = sum(1 for t in cfg["layer_types"] if "sliding" in str(t))
        elif window and cfg.get("use_sliding_window", mtype in ("mistral",)):
            sliding = L
        common.update(attention="gqa", num_kv_heads=kvh, head_dim=hd,
                      sliding_window=int(window) if window and sliding else None, num_sliding_layers=sliding,
                      attention_sinks=mtype == "gpt_oss")
    n_exp = int(cfg.get("n_routed_experts") or cfg.get("num_local_experts") or cfg.get("num_experts") or 0)
    if n_exp:
        moe_layers = _moe_layers(cfg, L)
        common.update(
            num_dense_layers=L - moe_layers, dense_intermediate=int(cfg.get("intermediate_size", 0)),
            num_moe_layers=moe_layers, num_experts=n_exp,
            experts_per_token=int(cfg.get("num_experts_per_tok") or cfg.get("experts_per_token") or 2),
            expert_intermediate=int(cfg.get("moe_intermediate_size") or cfg["intermediate_size"]),
            # DeepSeek counts shared experts; Qwen-MoE gives one shared MLP's width (a multiple of an expert's)
            num_shared_experts=int(cfg.get("n_shared_experts") or round(
                int(cfg.get("shared_expert_intermediate_size") or 0)
                / int(cfg.get("moe_intermediate_size") or cfg["intermediate_size"]))),
            expert_bias=mtype == "gpt_oss",
        )
    else:
        common.update(num_dense_layers=L, dense_intermediate=_count(cfg, "intermediate_size", source))
    return ModelArch(**common)


def _data_dir() -> Path:
    return Path(str(resources.files("scoville") / "data" / "models"))


def list_models() -> list[str]:
    """Names of the shipped model configs."""
    return sorted(p.stem for p in _data_dir().glob("*.json"))


@lru_cache(maxsize=64)
def _load_path(path: str, name: str) -> ModelArch:
    p = Path(path)
    try:
        cfg = json.loads(p.read_text())
    except OSError as e:
        raise UserError(f"cannot read model config {p}: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise UserError(f"{p}: not valid JSON (line {e.lineno}: {e.msg}); point at an HF config.json") from None
    if not isinstance(cfg, dict):
        raise UserError(f"{p}: a config.json must be a JSON object")
    try:
        return parse_config(cfg, name, str(p))
    except (TypeError, ValueError, KeyError, ZeroDivisionError) as e:
        raise UserError(f"{p}: unusable config field ({e}); check the numeric fields of config.json") from None


def load_model(name_or_path: str) -> ModelArch:
    """A shipped model by name (gpt-oss-120b, deepseek-r1, kimi-k2.5, ...), a config.json path, or a folder holding
    one."""
    p = Path(name_or_path).expanduser()
    if p.is_dir():
        p = p / "config.json"
    if p.suffix == ".json" or p.exists():
        if not p.exists():
            raise UserError(f"model config {p} does not exist")
        name = p.parent.name if p.name == "config.json" else p.stem
        return _load_path(str(p.resolve()), name)
    key = name_or_path.strip().lower().split("/")[-1]
    aliases = {"deepseek-r1-0528": "deepseek-r1", "kimi-k2.5-nvfp4": "kimi-k2.5", "gpt-oss": "gpt-oss-120b",
               "meta-llama-3.1-8b": "llama-3.1-8b", "meta-llama-3.1-70b": "llama-3.1-70b"}
    key = aliases.get(key, key)
    path = _data_dir() / f"{key}.json"
    if not path.exists():
        raise UserError(f"unknown model {name_or_path!r}; "
                        f"choose one of {', '.join(list_models())} or give a config.json path")
    return _load_path(str(path), key)
