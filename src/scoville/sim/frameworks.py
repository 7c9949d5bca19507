"""Serving-stack costs per framework (vLLM, SGLang, TensorRT-LLM): the host time a step adds to its kernels.

Kernel tables time the GPU; a served step also pays for scheduling, input preparation, sampling and
output processing that async scheduling and CUDA graphs do not fully hide. Those costs belong to the
framework, not the chip, so they live in ``data/hardware/frameworks.yaml`` as documented priors, and a
calibration on the user's own runs (``scoville calibrate``) replaces them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from importlib import resources
from pathlib import Path

import msgspec
import yaml

from scoville.errors import UserError

FRAMEWORK_NAMES = ("vllm", "sglang", "trtllm")


# What a kernel scale (kernel_scale, prefill_kernel_ratio) may be: within a factor of 20 either side of the kernel
# tables' own times (calibrate's kernel factors are bounded alike, as a trial passes them through here)
KERNEL_SCALE_RANGE = (0.05, 20.0)


class FrameworkCosts(msgspec.Struct, frozen=True, kw_only=True):
    """Host-side costs: each step ``step_overhead_us + seq_overhead_us × sequences`` (the busiest rank's under
    data-parallel attention, whose ranks schedule side by side: ``StepCost.breakdown``); each request
    ``request_overhead_ms`` before it reaches the scheduler (HTTP, tokenisation, detokenised first chunk),
    which only its time to first token sees; under disaggregated serving, ``disagg_handover_ms`` between the
    prompt's KV copy and its first token at the client, which the copy does not explain (routing the request to
    the decode instance, that scheduler noticing the loaded KV at a step boundary, the forward that emits the
    token)."""

    name: str
    step_overhead_us: float
    seq_overhead_us: float
    request_overhead_ms: float
    sigma: float
    disagg_handover_ms: float = 0.0
    source: str
    # The stack's kernels run as a whole step relative to the sum of their isolated table timings: fusion and
    # CUDA-graph replay (< 1) or gaps between kernels (> 1). 1.0 where nothing was fitted.
    kernel_scale: float = 1.0
    # Prefill kernels' scale relative to ``kernel_scale`` (whole prefill module / kernel sum over whole decode
    # module / kernel sum); a mixed step weighs the two by its tokens of each phase. 1.0 where not measured.
    prefill_kernel_ratio: float = 1.0
    # Host time a step adds when no overlap scheduler hides it (``SimConfig.schedules_ahead`` false: the step is
    # formed, and the last one's results processed, between GPU steps). 0 where not measured.
    serial_host_us: float = 0.0
    # Steps of at most this many tokens a rank run an MoE layer's shared experts on a second CUDA stream beside its
    # routed path (router, expert exchange, routed experts), so the layer waits for the longer of the two. 0: the
    # two run one after the other.
    shared_experts_overlap_tokens: int = 0
    # Standalone elementwise kernels of one decoder layer (norms, residual adds, RoPE, activations) that no
    # measured operator already contains; what the stack fuses into GEMMs, attention or all-reduce is not here.
    elementwise_kernels: int = 6

    def __post_init__(self) -> None:
        if not 0 <= self.elementwise_kernels <= 32:
            raise ValueError(f"{self.name}.elementwise_kernels must be within 0-32, got {self.elementwise_kernels}")
        for field in ("kernel_scale", "prefill_kernel_ratio"):
            value = getattr(self, field)
            lo, hi = KERNEL_SCALE_RANGE
            if not lo <= value <= hi:
                raise ValueError(f"{self.name}.{field} must be within {lo:g}-{hi:g}, got {value}")
        if self.shared_experts_overlap_tokens < 0:
            raise ValueError(f"{self.name}.shared_experts_overlap_tokens must be >= 0, got "
                             f"{self.shared_experts_overlap_tokens}")
        for field in ("step_overhead_us", "seq_overhead_us", "request_overhead_ms", "disagg_handover_ms",
                      "serial_host_us"):
            value = getattr(self, field)
            if not (value >= 0 and value < 1e9):
                raise ValueError(f"{self.name}.{field} must be a finite number >= 0, got {value}")


def rank_token_budget(framework: str, max_num_batched_tokens: int, dp: int) -> int:
    """Tokens one attention rank may schedule a step, from the framework's token-budget flag: vLLM's
    ``--max-num-batched-tokens`` and TensorRT-LLM's ``max_num_tokens`` hold per data-parallel rank (each rank runs
    its own scheduler with it: vLLM's "Data Parallel Deployment" docs, one engine-core process a rank); SGLang
    divides ``--chunked-prefill-size`` by the DP size under DP attention (``server_args._handle_data_parallelism``),
    so its flag is the instance's."""
    return max(max_num_batched_tokens // dp, 1) if framework == "sglang" else max_num_batched_tokens


def token_budget_flag(framework: str, rank_budget: int, dp: int) -> int:
    """The framework's token-budget flag that gives each of ``dp`` attention ranks ``rank_budget`` tokens (the
    inverse of :func:`rank_token_budget`)."""
    return rank_budget * dp if framework == "sglang" else rank_budget


@lru_cache(maxsize=1)
def _all() -> dict[str, FrameworkCosts]:
    path = Path(str(resources.files("scoville") / "data" / "hardware" / "frameworks.yaml"))
    raw = yaml.safe_load(path.read_text())
    return {k: msgspec.convert({"name": k, **v}, FrameworkCosts) for k, v in raw.items()}


_OVERRIDES: dict[str, FrameworkCosts] = {}


def load_framework(name: str) -> FrameworkCosts:
    """The shipped priors of ``name`` (or the costs :func:`overridden` put in force); an unknown name is a
    one-line error listing the known ones."""
    key = name.strip().lower().replace("-", "").replace("_", "")
    key = {"tensorrtllm": "trtllm", "trt": "trtllm"}.get(key, key)
    costs = _OVERRIDES.get(key) or _all().get(key)
    if costs is None:
        raise UserError(f"unknown framework {name!r}; use one of {', '.join(FRAMEWORK_NAMES)}")
    return costs


@contextmanager
def overridden(costs: FrameworkCosts) -> Iterator[None]:
    """Run the simulator with ``costs`` in place of a framework's shipped priors (a fit's trial values).

    The cost-model caches are cleared on entry and exit so no cost model built under other values leaks.
    """
    from scoville.sim.engine import clear_cost_caches

    _OVERRIDES[costs.name] = costs
    clear_cost_caches()
    try:
        yield
    finally:
        _OVERRIDES.pop(costs.name, None)
        clear_cost_caches()
