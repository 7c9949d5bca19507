"""The deployment choices a simulation makes when the user leaves them open: the KV cache format a stack would
pick, and how TensorRT-LLM runs attention data parallelism. ``simulate``'s search and the InferenceX recipes
(``recipes.py``) both start from them, so they live below either."""

from __future__ import annotations

from scoville.sim.config import AttentionDpBalanceConfig, SimConfigError


def resolve_kv_dtype(value: str | None, hardware: str, model: str | None = None, framework: str | None = None,
                     precision: str | None = None) -> str:
    """``kv_dtype="auto"``: FP8 where the chip has FP8 math (what InferenceX's recipes run), else BF16; and BF16
    where the serving framework's own measured decode attention runs slower on an FP8 cache than on BF16
    (:func:`fp8_cache_is_slower`: SGLang's MLA kernel on Hopper), given ``model`` and ``framework``. A model
    served in FP32 (``precision``, or with none given its checkpoint's ``torch_dtype``) keeps an FP32 cache, as a
    server's auto cache format follows the model's."""
    from scoville.catalog.hardware import load_hardware
    from scoville.catalog.models import load_model

    v = (value or "auto").lower()
    if v == "auto":
        served = load_model(model).served_precision(precision) if model is not None else precision
        if served == "fp32":                    # a server's auto cache format is its model's dtype
            return "fp32"
        if "fp8" not in load_hardware(hardware).flops_tflops:
            return "bf16"
        slower = model is not None and framework is not None and fp8_cache_is_slower(hardware, model, framework)
        return "bf16" if slower else "fp8"
    if v not in ("bf16", "fp8", "fp32"):
        raise SimConfigError(f"--kv-dtype {value!r}: use auto, bf16, fp8 or fp32")
    return v


KV_CHOICE_SHAPE = (8, 64.0, 8192.0)    # tp (heads per rank), sequences, context: a typical 8k/1k decode step


def fp8_cache_is_slower(hardware: str, model: str, framework: str) -> bool:
    """Whether ``framework``'s measured decode attention core for ``model`` on ``hardware`` takes longer with an
    FP8 KV cache than with BF16, at ``KV_CHOICE_SHAPE``. Only measured kernels can say so (on the roofline an
    FP8 cache reads half the bytes); without tables for both formats the answer is no."""
    from scoville.catalog.hardware import load_hardware
    from scoville.catalog.models import load_model
    from scoville.sim.kernels import tables
    from scoville.sim.kernels.curve import Surface

    system = load_hardware(hardware).kernel_tables
    if not system or tables.root_for(system) is None:
        return False
    m, kt = load_model(model), tables.KernelTables(system, framework)
    tp, seqs, ctx = KV_CHOICE_SHAPE
    heads = max(m.num_heads // tp, 1)
    times = {}
    for kv in ("fp8", "bfloat16"):               # the tables' own names of the two cache formats
        grid = (kt.mla_decode(heads, kv) if m.attention == "mla"
                else kt.gqa_decode(heads, max(m.num_kv_heads // tp, 1), m.head_dim, kv))
        if grid is None:
            return False
        times[kv] = float(Surface(grid.x, grid.y, grid.t)(seqs, ctx))
    return times["fp8"] > times["bfloat16"]


def default_attention_dp_balance(framework: str) -> AttentionDpBalanceConfig | None:
    """How the search deploys ``framework`` under attention data parallelism: TensorRT-LLM with its balance on at
    its default timeout and batching wait (its own default is off, but every InferenceX TensorRT-LLM DEP recipe
    turns it on); vLLM and SGLang have no such hold. It acts only on the layouts with dp > 1."""
    return AttentionDpBalanceConfig() if framework == "trtllm" else None
