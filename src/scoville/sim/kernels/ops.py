"""The operator curves of one instance shape: every kernel a forward step runs, timed on one rank.

``build_ops`` turns (model, hardware, parallel layout, weight formats, KV format, framework) into an
:class:`OpSet`: per-layer time curves for the attention projections, the attention cores (decode and
prefill), MLA's absorbed products, the dense/shared/routed feed-forward, the LM head, the elementwise
kernels and the collectives. Each curve comes from one of two sources, chosen per operator:

* **measured** — the chip's own kernel tables for that framework (``tables.py``), interpolated at the
  model's exact shapes (GEMM n×k, attention heads per rank, MoE experts/top-k/EP degree);
* **transfer** — the datasheet roofline with fitted efficiencies (``transfer.py``), for chips without
  tables or shapes the tables lack, scaled by the hardware family's platform factor.

``OpSet.provenance`` says which, per operator, and ``OpSet.sigma`` carries each operator's
uncertainty (log-space), so every prediction built on it can say how sure it is.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import msgspec
import numpy as np

from scoville.catalog.hardware import Hardware
from scoville.catalog.models import ModelArch
from scoville.errors import UserError
from scoville.sim.kernels import formats, tables, work
from scoville.sim.kernels.curve import Curve, Surface
from scoville.sim.kernels.transfer import TransferModel, load_transfer

TOKENS = np.unique(np.round(np.geomspace(1, 262144, 56))).astype(np.float64)   # token grid of every curve
SEQS = np.array([1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096], dtype=np.float64)
CTX = np.unique(np.round(np.geomspace(1, 262144, 28))).astype(np.float64)
BYTES = np.geomspace(256, 4e9, 40)
MEASURED_SIGMA = 0.08      # table interpolation between grid shapes and the spread of kernel choices
# Where a framework's own collection lacks an expert format, the table of the framework whose kernel it runs:
# on Blackwell vLLM and SGLang serve FP4 experts through FlashInfer's trtllm-gen MoE kernels (InferenceX's
# gpt-oss B200 vLLM recipe sets VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1), which TensorRT-LLM's table measures.
MOE_KERNEL_DONORS = ("trtllm", "sglang", "vllm")
# TensorRT-LLM's TRTLLM MoE backend runs the trtllm-gen kernels that FlashInfer also ships; aiconfigurator-core's
# TensorRT-LLM collections time them only for NVFP4 on B200/GB200 (``moe_torch_flow_min_latency``, within 5% of
# SGLang's ``sglang_flashinfer_trtllm_moe`` at decode sizes), not for FP8 block scales (DeepGEMM only) nor on
# B300/GB300, while SGLang's and vLLM's tables time them on every Blackwell part: the donors, in that order.
TRTLLM_GEN_DONORS = ("sglang", "vllm")
# Priors for a system without quantize tables (with them: KernelTables.elementwise measures both; on the NVIDIA
# systems the floor is 1.3-2.1 us and the rate 0.77-0.90 of HBM bandwidth)
ELEMENTWISE_TAU_US = 2.0   # launch floor of a tiny kernel under CUDA graphs (AIC system YAMLs: ~3 us)
ELEMENTWISE_EFF = 0.7      # streaming efficiency of those kernels (AIC mem_bw_empirical_scaling_factor 0.8)
DISPATCH_BYTES = 1.0       # EP dispatch sends FP8 activations (DeepEP low-latency / TRT-LLM default)
COMBINE_BYTES = 2.0        # combine returns BF16
# SGLang's low-latency DeepEP buffers hold this many tokens a rank (SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK's
# default); decode batches up to it dispatch on those kernels, larger (extend) batches on the normal ones
DEEPEP_LL_MAX_TOKENS = 128
# An all-reduce's tree stage over the NICs is priced from the entry's hop latency, which on Hopper reproduces
# nccl-tests' 2x8 figure under NVLSTree (``_allreduce_beyond_domain``); NCCL's own tuner puts its tree at about half
# that for a few bytes (NVIDIA/nccl#1453), and which algorithm a server's NCCL picks is not known: the spread
SCALEOUT_TREE_SIGMA = 0.25
# DeepSeek-V3's MLA layer, the one aiconfigurator-core's module tables time: hidden size, q and kv latent ranks, and
# the no-RoPE, RoPE and value head sizes. A model with these (DeepSeek-R1, Kimi K2) has the same per-rank shapes at
# the same heads per rank, so the tables' module-over-kernels ratio carries to it
DEEPSEEK_V3_MLA = (7168, 1536, 512, 128, 64, 128)
MODULE_EDGE = 1e12         # a ratio surface is padded flat to here: beyond the measured grid the last ratio holds
MLA_TILE_HEADS = 128       # the widest MLA decode core the tables time (DeepSeek-V3's heads on one rank): query rows
                           # past it split into more tiles, each reading the KV again (``FoldedHeads``)
WIDE_EP_BEYOND = 8         # TensorRT-LLM serves EP above one 8-GPU board with attention DP on its WideEP module
# SGLang's default MLA attention backend per family (its attention-backend docs: FA3 on Hopper; TRTLLM MLA on
# Blackwell, whose prompts fall back to FlashInfer's MLA prefill), the one whose module table prices its prompts
SGLANG_MLA_BACKEND = {"hopper": "fa3", "blackwell": "trtllm_mla"}


def serves_wide_ep(framework: str, dp: int, ep: int) -> bool:
    """Whether TensorRT-LLM would serve a layout on its WideEP path: attention data-parallel, experts spread
    beyond one 8-GPU board (its wide-EP recipes; the WideEP module requires attention DP)."""
    return framework == "trtllm" and dp > 1 and ep > WIDE_EP_BEYOND


@dataclass(frozen=True)
class Layout:
    """The per-rank split of one instance: tensor × data-parallel attention, experts over ``ep``."""

    tp: int
    dp: int
    ep: int
    expert_slots: int = 0        # TensorRT-LLM's expert load balancer's slots; 0: static placement

    @property
    def ranks(self) -> int:
        return self.tp * self.dp

    @property
    def moe_tp(self) -> int:
        return max(self.ranks // self.ep, 1)


@dataclass(frozen=True)
class FoldedHeads:
    """MLA's decode core when each sequence brings ``rows`` query tokens (a speculative step verifying ``rows - 1``
    drafts) over ``(sequences, mean context)`` a rank.

    All of a sequence's heads attend one latent KV, and so do its extra query tokens: the kernels fold them into the
    head dimension (FlashMLA sizes its tiles with ``get_mla_metadata(cache_seqlens, s_q * h_q // h_kv, h_kv)``;
    TensorRT-LLM's and FlashInfer's MLA decode kernels take several query tokens a sequence the same way). So a
    verify step reads each sequence's KV once and multiplies only the query rows, which costs the core at
    ``rows`` times the heads, not at ``rows`` times the sequences: at 16 sequences of 8k context and 16 heads, three
    drafts cost 27 us a layer read that way on B200 and 62 us read as 64 sequences. ``surfaces[i]`` is the core at
    ``heads[i]`` heads (this rank's heads, then doubled up to ``MLA_TILE_HEADS``); between them time is interpolated
    in log heads, and past the last the rows split into more tiles, each reading the KV again."""

    heads: tuple[float, ...]
    surfaces: tuple[Surface, ...]

    def __call__(self, seqs: Any, ctx: Any, rows: float) -> Any:
        want, top = self.heads[0] * rows, self.heads[-1]
        if want >= top:
            return self.surfaces[-1](seqs * (want / top), ctx)
        i = bisect_right(self.heads, want) - 1
        lo = self.surfaces[i](seqs, ctx)
        if want == self.heads[i]:
            return lo
        w = math.log(want / self.heads[i]) / math.log(self.heads[i + 1] / self.heads[i])
        return lo ** (1.0 - w) * self.surfaces[i + 1](seqs, ctx) ** w


@dataclass
class OpSet:
    """Per-layer operator times on one rank (seconds), with their source and uncertainty."""

    attn_proj: Curve                 # every attention projection GEMM of one layer, over tokens per rank
    attn_decode: Surface             # one layer's decode attention core over (sequences, mean context) per rank
    mla_decode_rows: FoldedHeads | None  # MLA only: the same core with several query tokens a sequence
    attn_prefill: Surface            # one layer's prefill attention core over (chunks, new tokens per chunk)
    mla_absorb: Curve | None         # MLA's absorbed BMMs over decode tokens per rank
    mla_kv_up: Curve | None          # MLA prefill's latent -> K/V decompression over prefill context tokens
    dense_ffn: Curve | None          # dense FFN layer over tokens per rank
    shared_ffn: Curve | None         # shared experts of one MoE layer over tokens per rank
    moe: Curve | None                # routed experts of one MoE layer over tokens of the whole instance
    router: Curve | None             # router GEMM of one MoE layer over tokens per rank
    lm_head: Curve                   # over sequences per rank
    elementwise: Curve               # norms, residuals, activations of one layer over tokens per rank
    qk_norm: Curve | None            # the RMSNorm of one layer's queries and keys (``ModelArch.qk_norm``)
    allreduce: Curve | None          # one TP all-reduce over bytes per rank
    ep_exchange: Curve | None        # one MoE layer's EP dispatch + combine over tokens per rank
    moe_gather: Curve | None         # attention DP without EP: one MoE layer's all-gather + reduce-scatter over bytes
    # the whole MLA layer as measured over our sum of its kernels (``_Builder.attention_module_ratio``): decode over
    # (decode queries, mean context) per rank, prefill over (prompt chunks, chunk length) per rank; None where no
    # module table holds the shape
    decode_module_ratio: Surface | None = None
    prefill_module_ratio: Surface | None = None
    provenance: dict[str, str] = field(default_factory=dict)
    sigma: dict[str, float] = field(default_factory=dict)
    formats: dict[str, str] = field(default_factory=dict)


class _Builder:
    """Builds curves from the measured tables when they hold the shape, else from the transfer model."""

    def __init__(self, hw: Hardware, framework: str, backend: str, transfer: TransferModel,
                 elementwise_kernels: int, act_bytes: float, moe_kernel: str = "auto") -> None:
        self.hw, self.framework, self.transfer, self.moe_kernel = hw, framework, transfer, moe_kernel
        self.elementwise_kernels, self.act_bytes = elementwise_kernels, act_bytes
        system = hw.kernel_tables if backend != "transfer" else None
        self.kt = tables.KernelTables(system, framework) if system and tables.root_for(system) else None
        self.platform = hw.platform_factor()
        # a measured table's own error, and how far the machines the entry stands for spread around the one it
        # was timed on (``Hardware.kernel_tables_sigma``: shared cloud slices of one CPU model differ)
        self.measured_sigma = math.hypot(MEASURED_SIGMA, hw.kernel_tables_sigma)
        self.compute_time_factor, self.memory_time_factor = hw.eff("compute_time_factor"), hw.eff("memory_time_factor")
        self.provenance: dict[str, str] = {}
        self.sigma: dict[str, float] = {}
        self._gemm_cubes: dict[str, Any] = {}

    # -- bookkeeping ---------------------------------------------------------------------------------
    def _note(self, op: str, source: str, sigma: float) -> None:
        prev = self.provenance.get(op)
        if prev is None or (prev.startswith("measured") and not source.startswith("measured")):
            self.provenance[op] = source
        self.sigma[op] = max(self.sigma.get(op, 0.0), sigma)

    def _amend(self, op: str, source: str, sigma: float) -> None:
        """Add a second source to an operator already priced from a table (a kernel taken where faster or slower
        than the table's own), widening its uncertainty to ``sigma`` at least."""
        self.provenance[op] += f"; {source}"
        self.sigma[op] = max(self.sigma[op], sigma)

    def _transfer(self, op: str, cls: str, flops: Any, nbytes: Any, rate: float) -> np.ndarray:
        c = self.transfer.op(cls)
        own = self.hw.own_time_factors(cls)
        if own is None:
            self._note(op, f"transfer ({cls}, datasheet roofline x fitted efficiency)",
                       math.hypot(c.sigma, self.hw.platform_sigma()))
            return np.asarray(c.time(flops / rate * self.compute_time_factor,
                                     nbytes / self.hw.hbm_bytes_per_s * self.memory_time_factor)) * self.platform
        # fitted on this platform's own kernels of the class: that fit, not the platform's kernel_factor, says how
        # they compare with NVIDIA's, and its spread is their uncertainty (never less than a measured table's)
        self._note(op, f"transfer ({cls}, datasheet roofline x fitted efficiency, {self.hw.family}'s own {cls} kernels "
                       f"x{own.compute:g} compute, x{own.memory:g} memory)", max(own.sigma, self.measured_sigma))
        return np.asarray(c.time(flops / rate * own.compute, nbytes / self.hw.hbm_bytes_per_s * own.memory))

    def _source(self, table: str) -> str:
        """The measured table that answered ``table``'s last query; asked only after one did, so tables exist."""
        assert self.kt is not None
        return self.kt.source(table)

    def _measured(self, op: str, table: str, grid: tables.Grid, detail: str) -> Surface:
        """A measured attention grid as a surface, noted with the table it came from."""
        self._note(op, f"measured ({self._source(table)}, {detail})", self.measured_sigma)
        return Surface(grid.x, grid.y, grid.t)

    # -- GEMM --------------------------------------------------------------------------------------------
    def gemm(self, op: str, n: float, k: float, dtype: str) -> np.ndarray:
        """Seconds on the TOKENS grid for an m×k·k×n GEMM."""
        cube = self._cube(dtype)
        if cube is not None:
            ms, ns, ks, t = cube
            frameworks = "/".join(tables.FRAMEWORKS)
            self._note(op, f"measured ({self._source('gemm')}, fastest of {frameworks} tables, {dtype})",
                       self.measured_sigma)
            return Curve(ms, _interp_nk(ns, ks, t, n, k))(TOKENS)
        f, b = work.gemm(TOKENS, n, k, dtype)
        return self._transfer(op, f"gemm.{dtype}", f, b, self.hw.peak_flops(work.rate_key(dtype)))

    def _cube(self, dtype: str) -> Any:
        if self.kt is None:
            return None
        if dtype not in self._gemm_cubes:
            self._gemm_cubes[dtype] = self.kt.gemm(dtype)
        return self._gemm_cubes[dtype]

    # -- MoE ---------------------------------------------------------------------------------------------
    def moe(self, m: ModelArch, lay: Layout, dtype: str) -> np.ndarray:
        if lay.expert_slots:
            return self._balanced_wideep_moe(m, lay, dtype)
        measured = self._moe_measured(m, lay, dtype)
        if self.moe_kernel == "marlin":
            return self._marlin_moe(m, lay, dtype, measured)
        if measured is not None:
            return measured
        f, b = work.moe(TOKENS, m.hidden_size, m.expert_intermediate, m.experts_per_token, m.num_experts,
                        lay.moe_tp, lay.ep, dtype)
        return self._transfer("moe", f"moe.{dtype}", f, b, self.hw.peak_flops(work.rate_key(dtype)))

    def _moe_measured(self, m: ModelArch, lay: Layout, dtype: str) -> np.ndarray | None:
        """The measured routed-expert time: TensorRT-LLM's WideEP module where its wide expert-parallel path runs
        (``wide_ep``), else the framework's MoE table; interpolated in log EP between measured degrees."""
        kt = self.kt
        if kt is None:
            return None
        shape = (m.hidden_size, m.expert_intermediate, m.experts_per_token, m.num_experts)
        if self.wide_ep(lay):
            got = self._over_ep(lay, lambda ep: kt.wideep_moe(*shape, ep, dtype, "power_law_1.01"), "wideep_moe",
                                f"TensorRT-LLM WideEP, {dtype}, ep{lay.ep}, power-law routing, no load balancer")
            if got is not None:
                return got
        if self.deepep(lay):
            got = self._over_ep(lay, lambda ep: kt.deepep_moe(*shape, ep, dtype, "power_law_1.01"), "deepep_moe",
                                f"SGLang DeepEPMoE, {dtype}, ep{lay.ep}, power-law routing")
            if got is not None:
                return got
        for fw in dict.fromkeys((self.framework, *MOE_KERNEL_DONORS)):
            borrowed = "" if fw == self.framework else f", from {fw}'s table: {self.framework} measured no {dtype}"
            got = self._over_ep(lay, lambda ep, fw=fw: kt.moe(*shape, lay.moe_tp, ep, dtype, "power_law_1.01", fw),
                                "moe", f"{dtype}, ep{lay.ep}, power-law routing{borrowed}", 1.5 if borrowed else 1.0)
            if got is not None:
                return self._or_trtllm_gen(shape, lay, dtype, got)
        return None

    def _balanced_wideep_moe(self, m: ModelArch, lay: Layout, dtype: str) -> np.ndarray:
        """TensorRT-LLM's WideEP experts under its load balancer (``ParallelConfig.expert_slots``): the tables' runs
        with the balancer's placement of that many slots over power-law routing. Asked for explicitly, so a
        layout off its path, a system without kernel tables or a slot count no table timed is an error, not the
        unbalanced figure."""
        kt = self.kt
        if not self.wide_ep(lay):
            raise UserError(f"expert_slots: TensorRT-LLM's load balancer acts on its wide-EP path only (framework "
                            f"trtllm, attention DP, ep > {WIDE_EP_BEYOND}); drop expert_slots for this layout")
        shape = (m.hidden_size, m.expert_intermediate, m.experts_per_token, m.num_experts)
        got = None if kt is None else self._over_ep(
            lay, lambda ep: kt.wideep_moe(*shape, ep, dtype, "power_law_1.01_eplb", lay.expert_slots), "wideep_moe",
            f"TensorRT-LLM WideEP, {dtype}, ep{lay.ep}, power-law routing, load balancer over {lay.expert_slots} slots")
        if got is None:
            raise UserError(f"expert_slots={lay.expert_slots}: no measured load-balanced WideEP table for {dtype} "
                            f"experts at ep{lay.ep} on {self.hw.name}; the tables time 256 and 288 slots (384 for "
                            "384-expert models), up to ep32 for 288")
        return got

    def _marlin_moe(self, m: ModelArch, lay: Layout, dtype: str, table: np.ndarray | None) -> np.ndarray:
        """vLLM's Marlin MoE kernel (``moe_kernel: marlin``): each rank's share of the routed-expert FLOPs at the rate
        Marlin reached, in vLLM's table on this GPU, at as many tokens per expert (``KernelTables.marlin_moe_rate``,
        any shape it timed), where that is slower than the table's own kernel for this shape. The rate carries to
        another shape where the kernel is compute-bound (a prompt's thousands of tokens: Marlin reaches ~220 TFLOP/s
        on H200 where vLLM's Triton MXFP4 kernel reaches ~450); at a few tokens per expert both read the same
        weights and the shape's own table holds (InferenceX's gpt-oss decode on H200 matched it before Marlin was
        modelled, and this transfer alone put it 20-35% fast). A deployment asks for Marlin explicitly; where no
        table times it, that is an error, not another kernel's figure."""
        kt = self.kt
        got = kt.marlin_moe_rate(dtype, "power_law_1.01") if kt else None
        if kt is None or got is None:
            raise UserError(f"moe_kernel marlin: no measured Marlin MoE rate for {dtype} experts on {self.hw.name}; "
                            "drop moe_kernel or use a GPU whose vLLM kernel tables time it")
        per_expert, rate = got
        flops = (work.moe_flops(TOKENS, m.hidden_size, m.expert_intermediate, m.experts_per_token)
                 / (lay.moe_tp * lay.ep))
        at = np.interp(np.log(TOKENS * m.experts_per_token / m.num_experts), np.log(per_expert), rate)
        marlin = flops / at
        source = (f"measured Marlin rate ({kt.source('marlin_moe')}, {dtype}, over tokens per expert from the shapes "
                  f"it timed, ep{lay.ep})")
        if table is None:
            self._note("moe", source, 2 * self.measured_sigma)
            return marlin
        self._amend("moe", f"{source} where slower", 2 * self.measured_sigma)
        return np.maximum(table, marlin)

    def _or_trtllm_gen(self, shape: tuple[int, int, int, int], lay: Layout, dtype: str,
                       got: np.ndarray) -> np.ndarray:
        """TensorRT-LLM without attention DP: the faster, per token count, of its measured MoE and its TRTLLM
        backend's trtllm-gen kernels (``TRTLLM_GEN_DONORS``), the backend InferenceX's DeepSeek-R1 B200 recipes
        pick there (MOE_BACKEND=TRTLLM). Under attention DP, where they pick CUTLASS or DeepGEMM, the table's own
        measurements stay as they are (on B200/GB200 NVFP4 those include the min-latency kernels; not resolved)."""
        kt = self.kt
        if kt is None or self.framework != "trtllm" or lay.dp > 1:
            return got
        for fw in TRTLLM_GEN_DONORS:
            gen = kt.moe(*shape, lay.moe_tp, lay.ep, dtype, "power_law_1.01", fw, kernel="trtllm")
            if gen is not None:
                faster = np.minimum(got, Curve(*gen)(TOKENS))
                if np.any(faster < got):    # another framework's timing of the kernel: as uncertain as a borrowed table
                    self._amend("moe", f"TRTLLM backend where faster (trtllm-gen kernels, {kt.source('moe:trtllm')})",
                                1.5 * self.measured_sigma)
                return faster
        return got

    def wide_ep(self, lay: Layout) -> bool:
        return serves_wide_ep(self.framework, lay.dp, lay.ep)

    def deepep(self, lay: Layout) -> bool:
        """Whether SGLang serves this layout's experts behind DeepEP: data-parallel attention with the experts
        spread over the ranks (``--enable-dp-attention`` with ``--moe-a2a-backend deepep``, SGLang's
        large-scale expert-parallel setup), where ``DeepEPMoE`` runs them instead of the fused MoE kernels."""
        return self.framework == "sglang" and lay.dp > 1 and lay.ep > 1

    def _over_ep(self, lay: Layout, table: Any, label: str, detail: str,
                 widen: float = 1.0, op: str = "moe") -> np.ndarray | None:
        """``table(ep)`` (tokens, seconds) at this EP degree, or interpolated in log EP between the measured powers
        of two around it (the nearest on each side, at most 4x away: a rank's share of the experts' work goes as
        1/EP at fixed global tokens, and a rank's cross-node traffic with the share of ranks off its node); None
        where neither side holds the shape. ``label`` names the table in ``KernelTables.sources``; ``widen`` scales
        the noted uncertainty (a table borrowed from another framework); ``op`` is the operator it prices."""
        kt = self.kt
        assert kt is not None

        def at(ep: int) -> np.ndarray | None:
            got = table(ep)
            return None if got is None else Curve(*got)(TOKENS)

        exact = at(lay.ep)
        if exact is not None:
            self._note(op, f"measured ({kt.source(label)}, {detail})", widen * self.measured_sigma)
            return exact
        below = 2 ** int(math.floor(math.log2(lay.ep)))
        above = 2 ** int(math.ceil(math.log2(lay.ep)))
        if below == above:                   # a power of two the table lacks: its measured neighbours
            below, above = below // 2, above * 2

        def nearest(degrees: tuple[int, int]) -> tuple[int, np.ndarray] | None:
            for ep in degrees:
                got = at(ep) if ep >= 1 else None
                if got is not None:
                    return ep, got
            return None

        low, high = nearest((below, below // 2)), nearest((above, above * 2))
        if low is None or high is None:
            return None
        (lo, t_lo), (hi, t_hi) = low, high
        w = (math.log(lay.ep) - math.log(lo)) / (math.log(hi) - math.log(lo))
        interpolated = detail.replace(f"ep{lay.ep}", f"ep{lo}..ep{hi} interpolated to ep{lay.ep}")
        self._note(op, f"measured ({kt.source(label)}, {interpolated})", 1.5 * widen * self.measured_sigma)
        return np.exp(np.log(t_lo) * (1 - w) + np.log(t_hi) * w)

    # -- attention cores -----------------------------------------------------------------------------
    def decode(self, m: ModelArch, lay: Layout, kv: str) -> Surface:
        heads = m.num_heads / lay.tp
        if m.attention == "mla":
            grid = self.kt.mla_decode(int(heads), kv) if self.kt and heads.is_integer() else None
            if grid is not None:
                return self._measured("attn_decode", "mla_decode", grid, f"{int(heads)} heads, KV {kv}")
            f, b = work.mla_decode(SEQS[:, None], CTX[None, :], heads, m.kv_lora_rank, m.qk_rope_head_dim, kv)
            return Surface(SEQS, CTX, self._transfer("attn_decode", f"mla_decode.{kv}", f, b,
                                                     self.hw.peak_flops(work.attention_rate_key(kv))))
        kvh = max(m.num_kv_heads / lay.tp, 1.0)
        grid = (self.kt.gqa_decode(int(heads), int(kvh), m.head_dim, kv)
                if self.kt and heads.is_integer() and kvh.is_integer() else None)
        if grid is not None:
            return self._measured("attn_decode", "gqa_decode", grid, f"{int(heads)}/{int(kvh)} heads, KV {kv}")
        f, b = work.gqa_decode(SEQS[:, None], CTX[None, :], heads, kvh, m.head_dim, kv)
        return Surface(SEQS, CTX, self._transfer("attn_decode", f"gqa_decode.{kv}", f, b,
                                                 self.hw.peak_flops(work.attention_rate_key(kv))))

    def folded_heads(self, m: ModelArch, lay: Layout, kv: str, base: Surface) -> FoldedHeads | None:
        """MLA's decode core at this rank's heads (``base``) and at each doubling up to ``MLA_TILE_HEADS``, from the
        same table (or the transfer model where ``base`` came from it); the ladder stops at the first head count
        the table lacks. None for other attention."""
        if m.attention != "mla":
            return None
        heads = m.num_heads / lay.tp
        ladder, surfaces = [heads], [base]
        measured = self.kt is not None and heads.is_integer() and self.kt.mla_decode(int(heads), kv) is not None
        while ladder[-1] * 2 <= MLA_TILE_HEADS:
            wider = ladder[-1] * 2
            if measured:
                grid = self.kt.mla_decode(int(wider), kv) if self.kt and wider.is_integer() else None
                if grid is None:
                    break
                surface = Surface(grid.x, grid.y, grid.t)
            else:
                f, b = work.mla_decode(SEQS[:, None], CTX[None, :], wider, m.kv_lora_rank, m.qk_rope_head_dim, kv)
                surface = Surface(SEQS, CTX, self._transfer("attn_decode", f"mla_decode.{kv}", f, b,
                                                            self.hw.peak_flops(work.attention_rate_key(kv))))
            ladder.append(wider)
            surfaces.append(surface)
        return FoldedHeads(tuple(ladder), tuple(surfaces))

    def prefill(self, m: ModelArch, lay: Layout, kv: str) -> Surface:
        heads = m.num_heads / lay.tp
        bf16 = self.hw.peak_flops("bf16")
        if m.attention == "mla":
            grid = self.kt.mla_prefill(int(heads), kv) if self.kt and heads.is_integer() else None
            if grid is not None:
                return self._measured("attn_prefill", "mla_prefill", grid, f"{int(heads)} heads")
            f, b = work.mla_prefill(SEQS[:, None], CTX[None, :], heads, m.qk_nope_head_dim + m.qk_rope_head_dim,
                                    m.v_head_dim)
            return Surface(SEQS, CTX, self._transfer("attn_prefill", "mla_prefill.bfloat16", f, b, bf16))
        kvh = max(m.num_kv_heads / lay.tp, 1.0)
        math_format = "float32" if kv == "float32" else "bfloat16"       # an FP32 cache is an FP32 model's
        grid = (self.kt.gqa_prefill(int(heads), int(kvh), m.head_dim, math_format)
                if self.kt and heads.is_integer() and kvh.is_integer() else None)
        if grid is not None:
            return self._measured("attn_prefill", "gqa_prefill", grid, f"{int(heads)}/{int(kvh)} heads")
        f, b = work.gqa_prefill(SEQS[:, None], CTX[None, :], heads, kvh, m.head_dim)
        return Surface(SEQS, CTX, self._transfer("attn_prefill", f"gqa_prefill.{math_format}", f, b,
                                                 self.hw.peak_flops(work.rate_key(math_format))))

    def absorb(self, m: ModelArch, lay: Layout) -> np.ndarray:
        heads = m.num_heads / lay.tp
        total = np.zeros_like(TOKENS)
        for op, a, b in (("mla_gen_pre", m.qk_nope_head_dim, m.kv_lora_rank),
                         ("mla_gen_post", m.kv_lora_rank, m.v_head_dim)):
            got = self.kt.mla_bmm(op, int(heads)) if self.kt and heads.is_integer() else None
            if got is not None:
                self._note("mla_absorb", f"measured ({self._source('mla_bmm')})", self.measured_sigma)
                total = total + Curve(*got)(TOKENS)
            else:
                f, nb = work.bmm(TOKENS, heads, a, b)
                total = total + self._transfer("mla_absorb", "bmm.bfloat16", f, nb, self.hw.peak_flops("bf16"))
        return total

    def attention_module_ratio(self, phase: str, m: ModelArch, lay: Layout, kv: str, gemm: str,
                               ops: OpSet) -> Surface | None:
        """The whole MLA layer as the framework runs it (``tables.KernelTables.mla_module``) over our sum of the same
        layer's isolated kernels at the same shape, over its grid at this rank's heads: ``phase`` "decode" (batch
        × context: projections, absorbed products, core) or "prefill" (prompts × prompt length: projections, K/V
        decompression, core). The ratio is not one number: decode runs at 0.78-0.85 of the sum at 1-16 sequences
        over 16 heads or fewer on Blackwell under TensorRT-LLM (launch tails the isolated timings each pay and the
        module overlaps) and at about 1.0 from 128 on; prefill at 1.00-1.07 on B200, 1.04-1.15 on GB200 and
        1.06-1.26 on H200. The step prices attention at its cell where ``kernel_scale`` and
        ``prefill_kernel_ratio`` (the same tables' medians) stand in elsewhere. SGLang's prompts run eagerly, and its
        table (prefill only) shows it: 0.53-0.67 ms a layer however short the prompt on B200/H100/H200 (0.87-0.92 on
        Grace), several times its kernels below ~1k tokens. None for other attention shapes, frameworks without a
        module table, and collections that did not time the serving path."""
        heads = m.num_heads / lay.tp
        shape = (m.hidden_size, m.q_lora_rank, m.kv_lora_rank, m.qk_nope_head_dim, m.qk_rope_head_dim, m.v_head_dim)
        if (m.attention != "mla" or self.kt is None or not heads.is_integer() or shape != DEEPSEEK_V3_MLA
                or ops.mla_absorb is None or ops.mla_kv_up is None):
            return None
        backend = ""
        if self.framework == "sglang":     # its collection timed FP8 caches only, which a prompt's layer only writes
            backend, kv = SGLANG_MLA_BACKEND.get(self.hw.family, ""), "fp8"
        grid = self.kt.mla_module(phase, int(heads), gemm, kv, backend)
        if grid is None:
            return None
        batch, size = grid.x[:, None], grid.y[None, :]
        module = grid.t
        if phase == "decode":
            kernels = ops.attn_proj(batch) + ops.mla_absorb(batch) + ops.attn_decode(batch, size)
        else:
            kernels = ops.attn_proj(batch * size) + ops.mla_kv_up(batch * size) + ops.attn_prefill(batch, size)
        if self.framework == "sglang":      # (prompts only) its layer leaves the q/kv down-projection outside
            down = sum(self.gemm("attn_proj", n, m.hidden_size, gemm)
                       for n in (m.q_lora_rank or 0, m.kv_lora_rank + m.qk_rope_head_dim) if n > 0)
            module = module + Curve(TOKENS, down)(batch * size)
        ratio = np.pad(module / kernels, ((0, 1), (0, 1)), mode="edge")
        self._note(f"attn_module_{phase}", f"measured ({self._source(f'mla_module_{phase}')}, whole layer over its "
                                           f"kernels, {int(heads)} heads)", self.measured_sigma)
        return Surface(np.append(grid.x, MODULE_EDGE), np.append(grid.y, MODULE_EDGE), ratio)

    # -- collectives ------------------------------------------------------------------------------------
    def allreduce(self, ranks: int) -> np.ndarray:
        if ranks > self.hw.scaleup_domain:
            measured = self._allreduce_beyond_domain(ranks)
        else:
            got = (self.kt.allreduce(ranks) or self.kt.nccl("all_reduce", ranks)) if self.kt else None
            if got is not None:
                self._note("allreduce", f"measured ({self._source('allreduce')}, {ranks} GPUs)", self.measured_sigma)
            measured = None if got is None else Curve(*got)(BYTES)
        if measured is not None:
            return measured
        return self._comm("allreduce", BYTES * 2.0 * (ranks - 1) / ranks, ranks)

    def _allreduce_beyond_domain(self, ranks: int) -> np.ndarray | None:
        """An all-reduce over several scale-up domains (tensor parallelism over two H100 boards), as NCCL runs it:
        no framework's custom kernel crosses a node, so the node-local reduce and broadcast are NCCL's measured
        all-reduce over one domain, and the nodes exchange up and down a tree, two scale-out hops
        (``scaleout_latency_us`` each), while each GPU's ring share crosses its own NIC at the NIC's rate (nccl-tests
        reach 46-48 GB/s bus bandwidth on 400 Gbit/s NDR, NVIDIA/nccl-tests#290). None without an NCCL table.

        On H100 and H200 the hop latency comes from nccl-tests on 2x8 H20 (the same NVLink 4 boards and CX-7 NDR
        NICs; NVLSTree, NCCL 2.21.5, NVIDIA/nccl#1244): 46-48 us for a few bytes, which this reproduces."""
        domain = self.hw.scaleup_domain
        got = self.kt.nccl("all_reduce", domain) if self.kt else None
        if got is None:
            return None
        hw = self.hw
        nic = BYTES * 2.0 * (ranks - 1) / ranks / (hw.scaleout_bandwidth_gbps * 1e9)
        self._note("allreduce", f"measured ({self._source('nccl_all_reduce')}, {domain} GPUs) within a node + "
                                f"{ranks // domain} nodes' tree over the NICs (2 x scaleout_latency_us)",
                   math.hypot(self.measured_sigma, SCALEOUT_TREE_SIGMA))
        return Curve(*got)(BYTES) + 2.0 * hw.scaleout_latency_us * 1e-6 + nic

    def ep_exchange(self, m: ModelArch, lay: Layout, experts_format: str) -> np.ndarray:
        """One MoE layer's dispatch + combine on the TOKENS grid (tokens per rank): the framework's own wide-EP
        kernel where measured (TensorRT-LLM's NVLink all-to-all on NVL72), else an NCCL or transfer all-to-all
        of the bytes each rank sends (FP8 out, BF16 back)."""
        measured = self._nvlink_alltoall(m, lay, experts_format)
        if measured is None:
            measured = self._deepep_exchange(m, lay, experts_format)
        if measured is not None:
            return measured
        per_rank = self.alltoall(lay.ep)
        sent = TOKENS * min(m.experts_per_token, lay.ep) * m.hidden_size
        return Curve(BYTES, per_rank)(sent * DISPATCH_BYTES) + Curve(BYTES, per_rank)(sent * COMBINE_BYTES)

    def _nvlink_alltoall(self, m: ModelArch, lay: Layout, experts_format: str) -> np.ndarray | None:
        """The measured NVLink all-to-all at this EP degree, interpolated in log EP between measured degrees, or
        the largest one below it (a rank's traffic does not grow with EP beyond top-k ranks)."""
        kt = self.kt
        if kt is None or lay.ep > self.hw.scaleup_domain:
            return None
        dtype = {"nvfp4": "nvfp4", "fp8_block": "fp8", "fp8": "fp8", "w4a8_mxfp4_mxfp8": "fp8"}.get(experts_format,
                                                                                                 "bfloat16")

        def at(ep: int) -> tuple[np.ndarray, np.ndarray] | None:
            return kt.nvlink_alltoall(m.hidden_size, m.experts_per_token, ep, dtype)

        got = self._over_ep(lay, at, "nvlink_alltoall", f"ep{lay.ep}, {dtype} dispatch", op="alltoall")
        if got is not None:
            return got
        below = 2 ** int(math.floor(math.log2(lay.ep)))        # past the largest degree measured: read at it
        largest = at(below) if below != lay.ep else None
        if largest is None:
            return None
        self._note("alltoall", f"measured ({kt.source('nvlink_alltoall')}, ep{below} for ep{lay.ep})",
                   2 * self.measured_sigma)
        return Curve(*largest)(TOKENS)

    def _deepep_exchange(self, m: ModelArch, lay: Layout, experts_format: str) -> np.ndarray | None:
        """Experts spread over several nodes: DeepEP's measured cross-node dispatch and combine (an exchange is priced
        only under attention DP, where SGLang runs DeepEP: ``deepep``): SGLang's low-latency kernels up to
        ``DEEPEP_LL_MAX_TOKENS`` a rank and its normal ones beyond (``--deepep-mode auto``); TensorRT-LLM's
        multi-node recipes force DeepEP's normal kernels (NVIDIA/srt-slurm ``recipes/trtllm/h100-fp8``:
        ``TRTLLM_FORCE_ALLTOALL_METHOD: DeepEP``). A node is the scale-up domain; within one, the NVLink or NCCL
        all-to-all stays."""
        kt, domain = self.kt, self.hw.scaleup_domain
        if kt is None or lay.ep <= domain or self.framework not in ("sglang", "trtllm"):
            return None
        shape = (m.hidden_size, m.experts_per_token, m.num_experts)
        nodes = f"ep{lay.ep} over {lay.ep / domain:g} nodes"

        def curve(mode: str) -> np.ndarray | None:
            def at(ep: int) -> tuple[np.ndarray, np.ndarray] | None:
                return kt.deepep_exchange(*shape, ep // domain, mode) if ep % domain == 0 else None
            return self._over_ep(lay, at, f"deepep_{mode}", f"DeepEP {mode} kernels, {nodes}", op="alltoall")

        normal = curve("normal")
        if normal is None or self.framework == "trtllm":
            return None if normal is None else self._trtllm_fork(shape, normal, experts_format)
        low_latency = curve("ll")
        if low_latency is None:
            return normal
        self.provenance["alltoall"] = (f"measured ({kt.source('deepep_ll')} to {DEEPEP_LL_MAX_TOKENS} tokens a rank, "
                                       f"{kt.source('deepep_normal')} beyond; {nodes})")
        return np.where(TOKENS <= DEEPEP_LL_MAX_TOKENS, low_latency, normal)

    def _trtllm_fork(self, shape: tuple[int, int, int], over_nodes: np.ndarray, experts_format: str) -> np.ndarray:
        """TensorRT-LLM runs its own fork of DeepEP, which dispatches BF16 activations to FP8 experts (its
        post-quantisation all-to-all takes NVFP4 only: ``WideEPMoE.is_post_quant_all2all_supported``); its collection
        timed that fork on one node only. So the cross-node exchange (SGLang's DeepEP tables over the nodes) is
        scaled, per token count, by TensorRT-LLM's one-node time over SGLang's: on H100 1.25-1.45x at 16-256
        tokens a rank, DeepSeek-R1's shape (``shape``: hidden size, top-k, experts). Unchanged where either one-node
        table lacks the shape."""
        kt = self.kt
        assert kt is not None
        own = kt.trtllm_deepep(*shape, "nvfp4" if experts_format == "nvfp4" else "bfloat16")
        sglang_one_node = kt.deepep_exchange(*shape, 1, "normal")
        if own is None or sglang_one_node is None:
            return over_nodes
        self._amend("alltoall", f"x its own fork over SGLang's on one node ({kt.source('trtllm_deepep')})",
                    2 * self.measured_sigma)
        return over_nodes * Curve(*own)(TOKENS) / Curve(*sglang_one_node)(TOKENS)

    def alltoall(self, ranks: int) -> np.ndarray:
        """One all-to-all over the BYTES grid (bytes each rank sends): NCCL's table within a node, else transfer."""
        got = self.kt.nccl("alltoall", ranks) if self.kt and ranks <= 8 else None
        if got is not None:
            self._note("alltoall", f"measured ({self._source('nccl_alltoall')}, {ranks} GPUs)",
                       self.measured_sigma)
            # the table's size is the whole buffer each rank exchanges; a dispatch sends BYTES per rank
            return Curve(*got)(BYTES)
        return self._comm("alltoall", BYTES * (ranks - 1) / ranks, ranks)

    def _comm(self, op: str, wire: np.ndarray, ranks: int) -> np.ndarray:
        """Transfer collective: within the scale-up domain at link speed, beyond it over the NICs."""
        c = self.transfer.comm[op]
        hw = self.hw
        near = hw.scaleup_bytes_per_s(ranks)
        far_share = max(0.0, (ranks - hw.scaleup_domain) / ranks)
        t = c.time(wire * (1 - far_share), min(ranks, hw.scaleup_domain), near)
        if far_share:
            t = t + c.beta * wire * far_share / (hw.scaleout_bandwidth_gbps * 1e9) + hw.scaleout_latency_us * 1e-6
        links = (f", mesh: {min(ranks, hw.scaleup_domain) - 1} of {hw.scaleup_domain - 1} links"
                 if hw.scaleup_topology == "mesh" and hw.scaleup_domain > 1 else "")
        self._note(op, f"transfer ({op}: latency + bytes / link bandwidth{links}{' + scale-out' if far_share else ''})",
                   math.hypot(c.sigma, hw.platform_sigma()))
        return np.asarray(t)

    def elementwise(self, m: ModelArch, lay: Layout) -> np.ndarray:
        """Norms, residual adds, RoPE and activations of one layer: the framework's ``elementwise_kernels`` small
        kernels, each a launch floor plus its bytes at a streaming rate, both measured on this system where its
        quantize tables exist (``KernelTables.elementwise``), else the priors."""
        count = self.elementwise_kernels
        inter = m.dense_intermediate if not m.num_moe_layers else m.expert_intermediate * max(m.num_shared_experts, 1)
        # six unfused kernels move ~10 hidden-sized and 3 intermediate-sized activation tensors a token (BF16, or
        # FP32 for a model served in FP32); fewer kernels (fusion) move a like share of them
        nbytes = TOKENS * (10.0 * m.hidden_size + 3.0 * inter / lay.tp) * self.act_bytes * count / 6.0
        return self._small_kernels("elementwise", count, nbytes, f"{count} kernels a layer ({self.framework})")

    def qk_norm(self, m: ModelArch, lay: Layout) -> np.ndarray:
        """RMSNorm of one layer's queries and keys (models with ``use_qk_norm``): per head, one kernel each;
        over the whole layer (MiniMax M2's ``per_layer``: vLLM, SGLang and TensorRT-LLM all run it as
        ``MiniMaxText01RMSNormTP``), a sum-of-squares and a scaling kernel each, with the sums all-reduced across
        the tensor-parallel ranks between them (that all-reduce is priced with the other collectives)."""
        count = 4 if m.qk_norm == "per_layer" else 2
        width = (m.num_heads + m.num_kv_heads) * m.head_dim / lay.tp
        nbytes = TOKENS * width * self.act_bytes * 3.0          # q and k: read twice, written once
        return self._small_kernels("qk_norm", count, nbytes, f"{count} kernels a layer ({m.qk_norm} q/k RMSNorm)")

    def _small_kernels(self, op: str, count: int, nbytes: np.ndarray, what: str) -> np.ndarray:
        """``count`` small kernels moving ``nbytes`` on the TOKENS grid: each a launch floor, the bytes at a
        streaming rate, both measured on this system where its quantize tables exist, else the priors."""
        measured = self.kt.elementwise() if self.kt else None
        if measured is not None:
            floor, rate = measured
            self._note(op, f"measured floor {floor * 1e6:.1f} us and {rate / 1e12:.2f} TB/s of an elementwise "
                       f"kernel ({self._source('elementwise')}); {what}", 0.3)
            return count * floor + nbytes / rate
        self._note(op, f"modelled (no tables: {what}, their bytes at 0.7 of HBM + 2 us a kernel)", 0.3)
        return (count * ELEMENTWISE_TAU_US * 1e-6
                + nbytes * self.memory_time_factor / (self.hw.hbm_bytes_per_s * ELEMENTWISE_EFF)) * self.platform


def _interp_nk(ns: np.ndarray, ks: np.ndarray, t: np.ndarray, n: float, k: float) -> np.ndarray:
    """Times over m at shape (n, k): bilinear in log n, log k; beyond the grid, time scales with n·k."""
    ln, lk = np.log(ns), np.log(ks)

    def axis(grid: np.ndarray, x: float) -> tuple[int, int, float, float]:
        lx = math.log(x)
        if lx <= grid[0]:
            return 0, 0, 0.0, lx - grid[0]
        if lx >= grid[-1]:
            return len(grid) - 1, len(grid) - 1, 0.0, lx - grid[-1]
        i = int(np.searchsorted(grid, lx, side="right"))
        return i - 1, i, (lx - grid[i - 1]) / (grid[i] - grid[i - 1]), 0.0

    i0, i1, wn, en = axis(ln, n)
    j0, j1, wk, ek = axis(lk, k)
    lt = np.log(t)
    row0 = lt[:, i0, j0] * (1 - wk) + lt[:, i0, j1] * wk
    row1 = lt[:, i1, j0] * (1 - wk) + lt[:, i1, j1] * wk
    return np.exp(row0 * (1 - wn) + row1 * wn + en + ek)


def build_ops(model: ModelArch, hw: Hardware, lay: Layout, precision: dict[str, str], kv_dtype: str, *,
              framework: str, backend: str, elementwise_kernels: int, moe_kernel: str = "auto") -> OpSet:
    """Every operator curve of one instance shape (see module docstring); cached per process, since a
    search asks for the same shape once per draft count and token budget. ``framework`` and
    ``elementwise_kernels`` come from the step's ``FrameworkCosts`` (one place states each stack's count)."""
    key = (msgspec.json.encode(model), msgspec.json.encode(hw), lay, tuple(sorted(precision.items())), kv_dtype,
           framework, backend, elementwise_kernels, moe_kernel)
    return _build_ops(*key)


@lru_cache(maxsize=512)
def _build_ops(model_json: bytes, hw_json: bytes, lay: Layout, precision_items: tuple[tuple[str, str], ...],
               kv_dtype: str, framework: str, backend: str, elementwise_kernels: int, moe_kernel: str) -> OpSet:
    m = msgspec.json.decode(model_json, type=ModelArch)
    hw = msgspec.json.decode(hw_json, type=Hardware)
    precision = dict(precision_items)
    act = formats.activation_format(precision)
    b = _Builder(hw, framework, backend, load_transfer(), elementwise_kernels, formats.activation_bytes(precision),
                 moe_kernel)
    kv = formats.kv_format(kv_dtype, hw)
    fmt = {g: (formats.moe_format if g == "experts" else formats.gemm_format)(precision.get(g, "bf16"), hw)
           for g in ("attn", "dense_ffn", "experts", "shared_experts", "lm_head")}
    tp, h = lay.tp, m.hidden_size
    heads = m.num_heads / tp
    if m.attention == "mla":
        proj = [(m.q_lora_rank or 0, h), (heads * (m.qk_nope_head_dim + m.qk_rope_head_dim), m.q_lora_rank or h),
                (m.kv_lora_rank + m.qk_rope_head_dim, h), (h, heads * m.v_head_dim)]
        if not m.q_lora_rank:
            proj = proj[1:]
    else:
        kvh = max(m.num_kv_heads / tp, 1.0)
        proj = [((heads + 2 * kvh) * m.head_dim, h), (h, heads * m.head_dim)]
    attn_proj = sum(b.gemm("attn_proj", n, k, fmt["attn"]) for n, k in proj if n > 0)
    attn_decode = b.decode(m, lay, kv)
    ops = OpSet(
        attn_proj=Curve(TOKENS, attn_proj),
        attn_decode=attn_decode,
        mla_decode_rows=b.folded_heads(m, lay, kv, attn_decode),
        attn_prefill=b.prefill(m, lay, kv),
        mla_absorb=Curve(TOKENS, b.absorb(m, lay)) if m.attention == "mla" else None,
        mla_kv_up=(Curve(TOKENS, b.gemm("mla_kv_up", heads * (m.qk_nope_head_dim + m.v_head_dim), m.kv_lora_rank,
                                        act)) if m.attention == "mla" else None),
        dense_ffn=(Curve(TOKENS, b.gemm("dense_ffn", 2 * m.dense_intermediate / tp, h, fmt["dense_ffn"])
                         + b.gemm("dense_ffn", h, m.dense_intermediate / tp, fmt["dense_ffn"]))
                   if m.num_dense_layers else None),
        shared_ffn=(Curve(TOKENS, b.gemm("shared_ffn", 2 * m.expert_intermediate * m.num_shared_experts / tp, h,
                                         fmt["shared_experts"])
                          + b.gemm("shared_ffn", h, m.expert_intermediate * m.num_shared_experts / tp,
                                   fmt["shared_experts"]))
                    if m.num_moe_layers and m.num_shared_experts else None),
        moe=Curve(TOKENS, b.moe(m, lay, fmt["experts"])) if m.num_moe_layers else None,
        router=Curve(TOKENS, b.gemm("router", m.num_experts, h, act)) if m.num_moe_layers else None,
        lm_head=Curve(TOKENS, b.gemm("lm_head", m.vocab_size / tp, h, fmt["lm_head"])),
        elementwise=Curve(TOKENS, b.elementwise(m, lay)),
        qk_norm=Curve(TOKENS, b.qk_norm(m, lay)) if m.qk_norm else None,
        allreduce=Curve(BYTES, b.allreduce(tp)) if tp > 1 else None,
        ep_exchange=(Curve(TOKENS, b.ep_exchange(m, lay, fmt["experts"]))
                     if m.num_moe_layers and lay.ep > 1 and lay.dp > 1 else None),
        # attention DP with tensor-parallel experts: each MoE layer gathers every rank's tokens and reduce-scatters
        # the outputs (TensorRT-LLM's path without all-to-all, vLLM's and SGLang's alike), the wire bytes of one
        # all-reduce of the instance's tokens
        moe_gather=(Curve(BYTES, b.allreduce(lay.ranks))
                    if m.num_moe_layers and lay.ep == 1 and lay.dp > 1 else None),
    )
    ops.decode_module_ratio = b.attention_module_ratio("decode", m, lay, kv, fmt["attn"], ops)
    ops.prefill_module_ratio = b.attention_module_ratio("prefill", m, lay, kv, fmt["attn"], ops)
    ops.provenance, ops.sigma = b.provenance, b.sigma
    ops.formats = {g: formats.describe(precision.get(g, "bf16"), f, hw) for g, f in fmt.items()}
    ops.formats["kv_cache"] = f"KV cache {kv_dtype} stored as {kv}"
    return ops
