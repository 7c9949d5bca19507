"""Which kernel a stored weight format runs as on a given chip.

A checkpoint's format is not what the silicon executes: NVFP4 experts run as W4A4 tensor-core
GEMMs on Blackwell, but on Hopper (no FP4 tensor cores) they are dequantised and multiplied in BF16
(Marlin-style W4A16); gpt-oss's MXFP4 experts run W4A8 (MXFP4 × MXFP8) on Blackwell and W4A16 on
Hopper. Bytes moved follow the stored format, math follows the kernel; getting this wrong is how a
simulator ends up crediting an H100 with FP4 speed.

The rule per chip comes from its catalog entry: a chip whose ``flops_tflops`` lists ``fp4`` runs 4-bit
formats natively; any other runs them weight-only, at its ``bf16`` rate (the extra dequantisation work
is in the measured W4A16 kernels, and in the transfer fit of those kernels).

A model served in FP32 (``fp32``: every weight group, the activations between operators and the KV cache) runs
FP32 kernels throughout; vLLM's CPU backend does so on a CPU without AVX-512 BF16, where its BF16 GEMMs run
~10x slower than its FP32 ones.
"""

from __future__ import annotations

from scoville.catalog.hardware import Hardware
from scoville.errors import UserError
from scoville.sim.kernels.work import KERNEL_ACT_BYTES

FOUR_BIT = ("nvfp4", "mxfp4", "fp4", "int4")


def gemm_format(weight_format: str, hw: Hardware) -> str:
    """Kernel format of a dense linear layer stored as ``weight_format`` (a ModelArch precision value)."""
    f = weight_format.lower()
    if f in ("bf16", "fp16"):
        return "bfloat16"
    if f == "fp32":
        return "float32"
    if f == "fp8":
        return "fp8_block" if "fp8" in hw.flops_tflops else "bfloat16"
    if f == "int8":
        return "fp8" if "fp8" in hw.flops_tflops else "bfloat16"
    if f in FOUR_BIT:
        if f != "int4" and "fp4" in hw.flops_tflops:
            return "nvfp4"
        return "w4a16_int4"
    raise UserError(f"unknown weight format {weight_format!r}; use bf16, fp8, int8, nvfp4, mxfp4, int4 or fp32")


def moe_format(weight_format: str, hw: Hardware) -> str:
    """Kernel format of the routed experts stored as ``weight_format``."""
    f = weight_format.lower()
    native4 = "fp4" in hw.flops_tflops
    if f in ("bf16", "fp16"):
        return "bfloat16"
    if f == "fp32":
        return "float32"
    if f in ("fp8", "int8"):
        return "fp8_block" if "fp8" in hw.flops_tflops else "bfloat16"
    if f == "mxfp4":
        return "w4a8_mxfp4_mxfp8" if native4 else "w4a16_mxfp4"
    if f in ("nvfp4", "fp4"):
        return "nvfp4" if native4 else "w4a16_mxfp4"
    if f == "int4":
        return "int4_wo"
    raise UserError(f"unknown weight format {weight_format!r}; use bf16, fp8, int8, nvfp4, mxfp4, int4 or fp32")


def kv_format(kv_dtype: str, hw: Hardware) -> str:
    """Kernel KV format: FP8 caches need FP8 support (on chips without it they are stored as BF16)."""
    k = kv_dtype.lower()
    if k in ("bf16", "fp16"):
        return "bfloat16"
    if k == "fp32":
        return "float32"
    if k in ("fp8", "fp4"):
        return "fp8" if "fp8" in hw.flops_tflops else "bfloat16"
    raise UserError(f"unknown kv_dtype {kv_dtype!r}; use bf16, fp8 or fp32")


def activation_format(precision: dict[str, str]) -> str:
    """Format of the activations between operators (norms, residuals, router and LM-head inputs, collectives):
    BF16, or FP32 for a model served in FP32 (its attention weights say so: ``ModelArch.with_precision``)."""
    return "float32" if precision.get("attn") == "fp32" else "bfloat16"


def activation_bytes(precision: dict[str, str]) -> float:
    """Bytes of one activation element between operators (:func:`activation_format`'s)."""
    return KERNEL_ACT_BYTES[activation_format(precision)]


def describe(weight_format: str, kernel: str, hw: Hardware) -> str:
    """One line for manifests: how a stored format executes on this chip."""
    if weight_format.lower() in FOUR_BIT and kernel.startswith(("w4a16", "int4")):
        native = "" if "fp4" in hw.flops_tflops else f"; {hw.name} has no FP4 tensor cores"
        return f"{weight_format} weights run weight-only as {kernel} (dequantised to BF16 math{native})"
    return f"{weight_format} weights run as {kernel}"
