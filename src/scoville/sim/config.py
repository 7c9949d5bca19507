"""SimConfig: one serving configuration of the simulator, as a user writes it in YAML/JSON.

Everything the engine needs to know about *how* a model is served (not what the
hardware or model is — those come from the catalogs by name) lives here, so a
`--config` file pins a configuration exactly and the manifest records it whole
(``config.model_dump()``). Field names follow vLLM's engine arguments where
one exists (max_num_seqs, max_num_batched_tokens, block_size,
gpu_memory_utilization, enable_prefix_caching) so a reader can map a
simulated configuration onto a real deployment.

Limits (max_num_seqs, KV capacity) are per *instance*: one model replica of
``parallel.accelerators`` accelerators. The token budget is the framework's flag:
with data-parallel attention (``parallel.dp > 1``) each rank schedules its own,
which is the flag itself in vLLM and TensorRT-LLM and the flag ÷ dp in SGLang
(``sim.frameworks.rank_token_budget``).

A ``--config`` file (YAML or JSON; hardware/model may come from the command line)::

    hardware: gb300
    model: deepseek-r1
    parallel: {tp: 1, dp: 8, ep: 8}     # one instance = 8 GPUs, DP attention, wide EP
    max_num_seqs: 512
    max_num_batched_tokens: 8192
    enable_prefix_caching: true
    speculative: {num_draft_tokens: 1, acceptance_rate: 0.8}    # MTP
    host_offload: {capacity_gb: 500, bandwidth_gbps: 50}
    attention_dp_balance: {timeout_iters: 60, batching_wait_iters: 0}   # TensorRT-LLM's, with dp > 1
    disaggregation:                    # omit for unified (chunked prefill mixed with decode)
      prefill: {parallel: {tp: 4}, replicas: 2}
      decode: {parallel: {tp: 1, dp: 16, ep: 16}, replicas: 1}
      kv_transfer: scaleup
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from scoville.errors import UserError

RouterPolicy = Literal["round_robin", "least_loaded", "prefix_affinity"]
Framework = Literal["vllm", "sglang", "trtllm"]
CostBackend = Literal["auto", "measured", "transfer"]


class SimConfigError(UserError, ValueError):
    """A simulator configuration that cannot be used; message is user-facing."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ParallelConfig(_Strict):
    """Tensor / expert / data parallel sizes of one instance (accelerators = tp × dp; EP spans them)."""

    tp: int = Field(1, ge=1)
    ep: int = Field(1, ge=1)
    dp: int = Field(1, ge=1)
    # TensorRT-LLM's expert load balancer (moe_config.load_balancer.num_slots): expert slots the balancer places over
    # the EP ranks by observed load (the model's expert count, or more for replicas); None: static placement. Acts on
    # TensorRT-LLM's wide-EP path (attention DP, EP beyond one 8-GPU board), priced from its measured WideEP tables.
    expert_slots: int | None = Field(None, ge=1)

    @property
    def accelerators(self) -> int:
        return self.tp * self.dp

    @model_validator(mode="after")
    def _ep_fits(self) -> ParallelConfig:
        if (self.tp * self.dp) % self.ep:
            raise ValueError(f"ep={self.ep} must divide the instance's tp×dp={self.tp * self.dp} accelerators")
        return self


class PoolConfig(_Strict):
    """One pool of a disaggregated deployment: its instances' parallelism, count and batch limits."""

    parallel: ParallelConfig = ParallelConfig()
    replicas: int = Field(1, ge=1)
    max_num_seqs: int | None = Field(None, ge=1, description="default: the top-level max_num_seqs")
    max_num_batched_tokens: int | None = Field(None, ge=1, description="default: the top-level budget")

    @property
    def accelerators(self) -> int:
        return self.parallel.accelerators * self.replicas


class DisaggregationConfig(_Strict):
    """Prefill and decode on separate pools; the prompt's KV is copied prefill → decode."""

    prefill: PoolConfig
    decode: PoolConfig
    # Whether the KV copy crosses the scale-up domain (NVLink) or the scale-out network.
    kv_transfer: Literal["scaleup", "scaleout"] = "scaleup"


class SpeculativeConfig(_Strict):
    """Draft-and-verify decoding (MTP / EAGLE): each step verifies ``num_draft_tokens`` drafts.

    Each draft is accepted with probability ``acceptance_rate`` given all earlier
    ones were, so a step yields 1 + Geometric-truncated tokens; the mean
    acceptance length is (1 - a^(k+1)) / (1 - a).
    """

    num_draft_tokens: int = Field(1, ge=1, le=16)
    acceptance_rate: float = Field(0.7, ge=0.0, le=1.0)
    # How sure that rate is, as the log-space spread of the mean acceptance length: the workload decides it (a
    # reasoning trace accepts fewer drafts than plain text), so a prior carries the spread of published
    # measurements (``acceptance.mtp_draft``); 0 for a rate the user measured and pins.
    acceptance_sigma: float = Field(0.0, ge=0.0, le=2.0)

    @property
    def mean_acceptance_length(self) -> float:
        a, k = self.acceptance_rate, self.num_draft_tokens
        return float(k + 1) if a >= 1.0 else (1.0 - a ** (k + 1)) / (1.0 - a)


class HostOffloadConfig(_Strict):
    """A host-memory KV tier per instance: evicted prefix blocks and preempted requests' KV go here."""

    capacity_gb: float = Field(..., gt=0)
    bandwidth_gbps: float = Field(..., gt=0, description="host<->HBM GB/s (10^9 B/s), e.g. PCIe 5 x16 ≈ 50")


class BatchWaitConfig(_Strict):
    """TensorRT-LLM's batch waiting (``batch_wait_timeout_iters``, ``batch_wait_max_tokens_ratio``): while
    sequences decode, new prompts are held until ``iters`` steps have passed since the first of them waited or
    the held prompt tokens plus the decoding sequences reach ``max_tokens_ratio`` × the step's token budget;
    then they start together. An idle instance never holds a prompt, and TensorRT-LLM skips it under attention
    data parallelism. InferenceX's TensorRT-LLM recipes set it for 1k/1k: Llama-70B (2025-10, B200 and H200) 20
    and 0.9 below TP8; DeepSeek-R1 FP8 B200 (from 2026-01-27) 40 and 0.8 from 64 users."""

    iters: int = Field(..., ge=1, le=1000)
    max_tokens_ratio: float = Field(..., gt=0.0, le=1.0)


class AttentionDpBalanceConfig(_Strict):
    """TensorRT-LLM's attention-DP balance (``attention_dp_config: enable_balance``): new prompts are held until
    every attention rank has one, so that the ranks prefill in the same step instead of each stalling the others
    at the MoE exchange. A step counter runs while some rank has none; when it reaches ``timeout_iters`` the held
    prompts start anyway (the counter restarts). Once every rank has a prompt they are held
    ``batching_wait_iters`` steps more, then start together. Nothing is held while a rank has no sequence
    decoding. It acts only under attention data parallelism (``parallel.dp > 1``) on a unified instance: a
    disaggregated prefill instance has no decodes to hold prompts behind. TensorRT-LLM's defaults are 50 and 10;
    InferenceX's TensorRT-LLM DEP recipes (2025-11 to 2026-06) enable it with 60 and 0 for DeepSeek-R1 and the
    defaults for gpt-oss. Source: PyExecutor ``_balance_adp_requests``; NVIDIA TensorRT-LLM tech blog 10, "ADP
    Balance Strategy"."""

    timeout_iters: int = Field(50, ge=1, le=10000)
    batching_wait_iters: int = Field(10, ge=0, le=10000)


class SimConfig(_Strict):
    """A complete serving configuration for the simulator."""

    hardware: str
    model: str
    precision: str | None = None
    kv_dtype: str | None = None
    # Serving framework: picks its measured kernel tables and its host-overhead priors (frameworks.yaml).
    framework: Framework = "vllm"
    # Where operator times come from: measured tables where they hold the shape (auto), only tables
    # (measured: an error when one is missing) or only the datasheet transfer model (transfer).
    cost_backend: CostBackend = "auto"
    # A calibration profile written by `scoville calibrate` (its fitted host costs and kernel factor).
    profile: str | None = None
    parallel: ParallelConfig = ParallelConfig()
    replicas: int = Field(1, ge=1)
    max_num_seqs: int = Field(256, ge=1)
    # The framework's token-budget flag (vLLM --max-num-batched-tokens, SGLang --chunked-prefill-size,
    # TensorRT-LLM max_num_tokens): per attention rank in vLLM and TensorRT-LLM, per instance in SGLang.
    max_num_batched_tokens: int = Field(8192, ge=1)
    chunked_prefill: bool = True
    block_size: int = Field(16, ge=1)
    # The framework's memory share for the KV cache: vLLM's --gpu-memory-utilization and SGLang's --mem-fraction-static
    # of the whole memory (weights come out of it), TensorRT-LLM's free_gpu_memory_fraction of what the loaded model
    # leaves free (StepCost.kv_capacity_tokens).
    gpu_memory_utilization: float = Field(0.9, gt=0.0, le=1.0)
    enable_prefix_caching: bool = False
    # A session's reply blocks stay cached for its next turn. True models an agent that resends the
    # model's own reply (vLLM caches generated blocks too); False matches scoville's client, which
    # resends the workload's synthesised history, so a measured emulator or server cannot hit them.
    reuse_reply_blocks: bool = False
    disaggregation: DisaggregationConfig | None = None
    speculative: SpeculativeConfig | None = None
    host_offload: HostOffloadConfig | None = None
    router: RouterPolicy = "least_loaded"
    # What-if override of the KV capacity per instance (full-attention tokens); None = derived from memory.
    # Sliding-window layers' fixed per-sequence KV (gpt-oss) is reserved out of it for each running sequence.
    kv_capacity_tokens: int | None = Field(None, ge=1)
    # Decode steps between the scheduler's polls for new requests: SGLang's --scheduler-recv-interval (InferenceX's
    # SGLang DeepSeek-R1 B200 recipes: 10 below 16 users, 30 from 16); 1 = every step, as vLLM and TensorRT-LLM
    # schedule. A step that ran prompt tokens is followed by a poll (SGLang weighs it past any interval).
    scheduler_recv_interval: int = Field(1, ge=1, le=1000)
    # A unified instance's scheduler forms each step while the one before runs, one step ahead of the GPU (vLLM's
    # --async-scheduling, "the scheduler operate[s] one step ahead of the current execution", PR #19970, on by
    # default since PR #27614 of late 2025; SGLang's and TensorRT-LLM's overlap schedulers, on by default): a
    # request that arrives while a step runs starts in the step after the next. False: each step is formed when
    # the last one ends, and such a request starts in the next, and every step pays the host work the overlap
    # would hide (``FrameworkCosts.serial_host_us``). (Disaggregated pools admit as before but pay that cost too.)
    # None: as the framework runs on that hardware and with those drafts (``schedules_ahead``).
    async_scheduling: bool | None = None
    # TensorRT-LLM's batch waiting (BatchWaitConfig); None = prompts start at the first step with room, as every
    # framework does by default.
    batch_wait: BatchWaitConfig | None = None
    # TensorRT-LLM's attention-DP balance (AttentionDpBalanceConfig); None = each rank starts its prompts at once,
    # as vLLM and SGLang do and TensorRT-LLM does by default. Acts only where parallel.dp > 1.
    attention_dp_balance: AttentionDpBalanceConfig | None = None
    # How the scheduler admits a request against the KV cache. "guaranteed": only when the blocks of its whole
    # length (prompt plus max_tokens) are free, so no running request is ever preempted (TensorRT-LLM's default
    # capacity scheduler policy, GUARANTEED_NO_EVICT). "on_demand": while its prompt's blocks fit, preempting a
    # running request when decodes outgrow the cache (vLLM's scheduler; SGLang's, whose reserve for the running
    # requests' future tokens decays to a small fraction of them while none is retracted). None: the framework's
    # default (``reserves_whole_length``).
    kv_admission: Literal["guaranteed", "on_demand"] | None = None
    # The routed experts' kernel: "auto", the framework's own (its measured MoE table); "marlin", vLLM's Marlin
    # weight-only MoE, which VLLM_MXFP4_USE_MARLIN=1 selects for MXFP4 experts on Hopper (InferenceX's gpt-oss
    # H100/H200 vLLM recipes from 2026-01-02: "Fix H100/H200 perf regression"), priced from the rate Marlin reaches
    # in vLLM's table at as many tokens per expert (``_Builder._marlin_moe``).
    moe_kernel: Literal["auto", "marlin"] = "auto"

    @model_validator(mode="after")
    def _marlin_is_vllms(self) -> SimConfig:
        if self.moe_kernel == "marlin" and self.framework != "vllm":
            raise ValueError(f"moe_kernel marlin is vLLM's MoE kernel; {self.framework} does not run it: use "
                             "moe_kernel auto or framework vllm")
        return self

    @model_validator(mode="after")
    def _batch_wait_without_attention_dp(self) -> SimConfig:
        if self.batch_wait is not None and self.parallel.dp > 1:
            raise ValueError("batch_wait: TensorRT-LLM does not batch-wait under attention data parallelism "
                             "(parallel.dp > 1); drop batch_wait or use dp: 1")
        return self

    @model_validator(mode="after")
    def _budget_holds_a_verify_step(self) -> SimConfig:
        if self.speculative and self.max_num_batched_tokens <= self.speculative.num_draft_tokens:
            raise ValueError("max_num_batched_tokens must exceed num_draft_tokens (one verify step per sequence)")
        return self

    @property
    def accelerators(self) -> int:
        """Every accelerator the deployment holds (prefill + decode pools when disaggregated)."""
        if self.disaggregation is not None:
            return self.disaggregation.prefill.accelerators + self.disaggregation.decode.accelerators
        return self.parallel.accelerators * self.replicas

    def schedules_ahead(self) -> bool:
        """Whether a unified instance forms each step while the last one runs: ``async_scheduling`` where set,
        else on, except for vLLM on a CPU entry (family ``cpu``), whose platform turns async scheduling off
        (vLLM 0.32 ``platforms/cpu.py``: "async scheduling is not required on CPU"). SGLang runs EAGLE/MTP drafts
        under its overlap scheduler too, as it has by default since spring 2026 ("spec v2 by default, which is the
        current standard behavior", sgl-project/sglang PR #24642, 2026-05; PR #27964, merged 2026-06-11, retired the
        synchronous spec v1 worker: ``--disable-overlap-schedule`` is now the only way off). Releases up to 0.5.9
        turned it off under drafts unless ``SGLANG_ENABLE_SPEC_V2`` was set: ``async_scheduling: false`` says so.
        Why it matters: on the real vLLM CPU server, a calibration that assumed it put one decode step too many
        before every prompt at high load (TTFT +16 % at 16 users on the fit point itself, +18 % held out at
        1024/64 with 8 users); and a step formed after the last one ends pays the host work the overlap would hide
        (``FrameworkCosts.serial_host_us``)."""
        if self.async_scheduling is not None:
            return self.async_scheduling
        from scoville.catalog.hardware import load_hardware

        return not (self.framework == "vllm" and load_hardware(self.hardware).family == "cpu")

    def reserves_whole_length(self) -> bool:
        """Whether a request is admitted only when its whole length fits the KV cache (``kv_admission``; by
        default TensorRT-LLM's, not vLLM's or SGLang's). It sets how many users a cache holds at once: a whole
        length each, or their mean length while decoding (``steady.kv_bound``)."""
        if self.kv_admission is not None:
            return self.kv_admission == "guaranteed"
        return self.framework == "trtllm"

    def label(self) -> str:
        """A short human name, e.g. ``tp8 x2 seqs256 tok8192`` or ``P tp4x2 : D tp8x1`` (``adp-balance`` where
        TensorRT-LLM's attention-DP balance acts)."""
        def par(p: ParallelConfig) -> str:
            s = f"tp{p.tp}"
            if p.ep > 1:
                s += f"ep{p.ep}"
            if p.dp > 1:
                s += f"dp{p.dp}"
            if p.expert_slots:
                s += f"eplb{p.expert_slots}"
            return s

        if self.disaggregation is not None:
            d = self.disaggregation
            return f"P {par(d.prefill.parallel)}x{d.prefill.replicas} : D {par(d.decode.parallel)}x{d.decode.replicas}"
        label = f"{par(self.parallel)} x{self.replicas} seqs{self.max_num_seqs} tok{self.max_num_batched_tokens}"
        return label + (" adp-balance" if self.attention_dp_balance is not None and self.parallel.dp > 1 else "")

    @classmethod
    def from_file(cls, path: Path, **overrides: Any) -> SimConfig:
        """Load a YAML or JSON file; ``overrides`` (e.g. hardware from the command line) fill missing keys."""
        try:
            text = path.read_text()
        except OSError as e:
            raise SimConfigError(f"cannot read simulator config {path}: {e.strerror}") from e
        try:
            data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
        except (json.JSONDecodeError, yaml.YAMLError) as e:
            raise SimConfigError(f"{path}: not valid {'JSON' if path.suffix == '.json' else 'YAML'} ({e})") from e
        if not isinstance(data, dict):
            raise SimConfigError(f"{path}: expected a mapping of SimConfig fields (hardware, model, parallel, ...)")
        for key, value in overrides.items():
            if value is not None:
                data.setdefault(key, value)
        return cls.parse(data, where=str(path))

    @classmethod
    def parse(cls, data: dict[str, Any], where: str = "config") -> SimConfig:
        """Validate a mapping, turning pydantic's report into one user-facing line."""
        try:
            return cls.model_validate(data)
        except ValidationError as e:
            err = e.errors()[0]
            loc = ".".join(str(x) for x in err["loc"]) or "(top level)"
            raise SimConfigError(f"{where}: {loc}: {err['msg']} ({len(e.errors())} problem(s) in all)") from None


# What the emulator serves when given no hardware or model (``scoville serve``, ``sweep`` without --url).
DEFAULT_HARDWARE = "h200"
DEFAULT_MODEL = "llama-3.1-8b"


def pinned_config(hardware: str | None = None, model: str | None = None,
                  config: dict[str, Any] | str | Path | None = None, *, framework: str | None = None,
                  profile: str | Path | None = None, where: str = "emulator config") -> SimConfig:
    """The configuration the emulator serves: a file or mapping, with hardware/model (and the serving
    framework whose costs to use, a calibration profile) filled in where the file leaves them out. Prefix
    caching is on unless the config says otherwise, as in the vLLM it stands in for (v1's default). The
    emulator serves it, and an SLO search's ``--predict`` predicts it (``sim.knee``)."""
    overrides = {"hardware": hardware.lower() if hardware else None, "model": model, "framework": framework,
                 "profile": str(profile) if profile is not None else None, "enable_prefix_caching": True}
    if isinstance(config, (str, Path)):
        return SimConfig.from_file(Path(config), **overrides)
    data = dict(config or {})
    for key, value in overrides.items():
        if value is not None:
            data.setdefault(key, value)
    data.setdefault("hardware", DEFAULT_HARDWARE)
    data.setdefault("model", DEFAULT_MODEL)
    return SimConfig.parse(data, where=where)
