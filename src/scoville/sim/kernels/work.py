"""What each operator asks of the silicon: FLOPs, bytes and the tensor-core rate it runs at.

One accounting, used three ways: the transfer model turns it into time for a datasheet
(``transfer.py``), the fit turns measured times into achieved ÷ roofline (``fit.py``), and the cost
model reports it for the power model. Keeping a single definition is what makes an efficiency
fitted on H100 tables mean the same thing when applied to a chip nobody profiled.

Kernel formats (``dtype`` below) follow the measured tables' names, because those are the formats
kernels really run in; ``formats.py`` maps a model's weight groups onto them per hardware.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeAlias

from scoville.errors import UserError

if TYPE_CHECKING:
    import numpy as np

# A shape parameter: one number (the cost model's layer) or one per row of a measured table (``fit.py``).
Operand: TypeAlias = "float | np.ndarray"

# Bytes per stored weight element (scales included; see scoville.catalog.models.WEIGHT_BYTES for the derivation).
KERNEL_WEIGHT_BYTES = {
    "bfloat16": 2.0, "fp8": 1.0, "fp8_block": 1.0 + 4 / (128 * 128), "nvfp4": 4.5 / 8,
    "w4a8_mxfp4_mxfp8": 4.25 / 8, "w4a16_mxfp4": 4.25 / 8, "int4_wo": 4.5 / 8, "w4a16_int4": 4.5 / 8,
    "float32": 4.0,
}
# Bytes per activation element a kernel reads: weight-and-activation formats quantise activations first.
KERNEL_ACT_BYTES = {
    "bfloat16": 2.0, "fp8": 1.0, "fp8_block": 1.0, "nvfp4": 0.5625, "w4a8_mxfp4_mxfp8": 1.0,
    "w4a16_mxfp4": 2.0, "int4_wo": 2.0, "w4a16_int4": 2.0, "float32": 4.0,
}
# Tensor-core rate (a key of Hardware.flops_tflops) each kernel format runs at.
KERNEL_RATE = {
    "bfloat16": "bf16", "fp8": "fp8", "fp8_block": "fp8", "nvfp4": "fp4", "w4a8_mxfp4_mxfp8": "fp8",
    "w4a16_mxfp4": "bf16", "int4_wo": "bf16", "w4a16_int4": "bf16", "float32": "fp32",
}
KV_ELEMENT_BYTES = {"bfloat16": 2.0, "fp8": 1.0, "float32": 4.0}


def _check(dtype: str) -> None:
    if dtype not in KERNEL_WEIGHT_BYTES:
        raise UserError(f"unknown kernel format {dtype!r}; known: {', '.join(KERNEL_WEIGHT_BYTES)}")


def gemm(m: Any, n: float, k: float, dtype: str) -> tuple[Any, Any]:
    """(FLOPs, bytes) of an m×k by k×n GEMM: weights once, activations in, BF16 out (FP32 for an FP32 GEMM)."""
    _check(dtype)
    flops = 2.0 * m * n * k
    out = 4.0 if dtype == "float32" else 2.0
    nbytes = n * k * KERNEL_WEIGHT_BYTES[dtype] + m * k * KERNEL_ACT_BYTES[dtype] + out * m * n
    return flops, nbytes


def touched_share(tokens: Any, topk: Operand, experts: Operand) -> Any:
    """The share of the experts that at least one of ``tokens`` reaches, each token choosing ``topk`` of
    ``experts`` at random (``1 − e^(−tokens·topk/experts)``): few at batch 1, all at a large batch."""
    import numpy as np

    return 1.0 - np.exp(-tokens * topk / experts)


def moe_flops(tokens: Any, hidden: Operand, inter: Operand, topk: Operand) -> Any:
    """FLOPs of a MoE layer's routed experts over ``tokens``, each sent to ``topk`` experts whose gated MLP is three
    ``hidden`` × ``inter`` GEMMs (gate, up, down), over all ranks together."""
    return 2.0 * tokens * topk * 3.0 * hidden * inter


def moe(tokens: Any, hidden: Operand, inter: Operand, topk: Operand, experts: Operand, tp: Operand, ep: Operand,
        dtype: str) -> tuple[Any, Any]:
    """(FLOPs, bytes) of one MoE layer's routed experts on one rank, ``tokens`` counted over the EP group.

    Balanced routing: each rank holds ``experts/ep`` experts split ``tp`` ways and receives
    ``tokens·topk/ep`` assignments; weights are read only for the experts some token reaches
    (``touched_share``).
    """
    _check(dtype)
    local = experts / ep
    load = tokens * topk / ep
    per_expert = 3.0 * hidden * inter / tp
    touched = local * touched_share(tokens, topk, experts)
    flops = moe_flops(tokens, hidden, inter, topk) / (tp * ep)
    nbytes = touched * per_expert * KERNEL_WEIGHT_BYTES[dtype] + load * (hidden + 2 * inter / tp) * 2.0
    return flops, nbytes


def gqa_decode(batch: Any, ctx: Any, heads: Operand, kv_heads: Operand, head_dim: Operand,
               kv_dtype: str) -> tuple[Any, Any]:
    """(FLOPs, bytes) of one layer's decode attention on one rank: every sequence reads its whole KV."""
    tokens = batch * ctx
    flops = 4.0 * heads * head_dim * tokens
    nbytes = tokens * 2.0 * kv_heads * head_dim * KV_ELEMENT_BYTES[kv_dtype] + batch * heads * head_dim * 4.0
    return flops, nbytes


def gqa_prefill(batch: Any, isl: Any, heads: Operand, kv_heads: Operand, head_dim: Operand) -> tuple[Any, Any]:
    """(FLOPs, bytes) of causal prefill attention over ``isl`` new tokens per sequence on one rank."""
    pairs = batch * isl * (isl + 1) / 2.0
    flops = 4.0 * heads * head_dim * pairs
    nbytes = batch * isl * (2.0 * heads + 2.0 * kv_heads) * head_dim * 2.0
    return flops, nbytes


def mla_decode(batch: Any, ctx: Any, heads: Operand, kv_lora: int, rope: int, kv_dtype: str) -> tuple[Any, Any]:
    """(FLOPs, bytes) of absorbed-MLA decode attention: scores and values over the shared latent."""
    tokens = batch * ctx
    flops = 2.0 * heads * (2 * kv_lora + rope) * tokens
    nbytes = tokens * (kv_lora + rope) * KV_ELEMENT_BYTES[kv_dtype] + batch * heads * (2 * kv_lora + rope) * 2.0
    return flops, nbytes


def mla_prefill(batch: Any, isl: Any, heads: Operand, qk_dim: int, v_dim: int) -> tuple[Any, Any]:
    """(FLOPs, bytes) of non-absorbed MLA prefill attention (decompressed K/V, 192/128-dim heads)."""
    pairs = batch * isl * (isl + 1) / 2.0
    flops = 2.0 * heads * (qk_dim + v_dim) * pairs
    nbytes = batch * isl * heads * (2 * qk_dim + 2 * v_dim) * 2.0
    return flops, nbytes


def bmm(tokens: Any, heads: Operand, a: int, b: int) -> tuple[Any, Any]:
    """(FLOPs, bytes) of a per-head batched matmul tokens×a by a×b (MLA's absorbed projections)."""
    flops = 2.0 * tokens * heads * a * b
    nbytes = heads * a * b * 2.0 + tokens * heads * (a + b) * 2.0
    return flops, nbytes


def rate_key(dtype: str) -> str:
    """The Hardware.flops_tflops key a kernel format's math runs at."""
    _check(dtype)
    return KERNEL_RATE[dtype]


def attention_rate_key(kv_dtype: str) -> str:
    """Decode attention over an FP8 cache runs its math in FP8 where the chip has it (TRT-LLM MLA, FlashMLA);
    ``Hardware.peak_flops`` falls back to BF16 on chips without FP8. An FP32 cache is an FP32 model's: FP32 math."""
    return {"fp8": "fp8", "float32": "fp32"}.get(kv_dtype, "bf16")
