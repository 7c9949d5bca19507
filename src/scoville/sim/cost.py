"""Step cost: the time of one forward step of one serving instance, operator by operator.

A step is the sum over layers of its operators' times on one rank (accelerator) — attention
projections, attention cores (decode sequences and prefill chunks priced separately), MLA's absorbed
products and prefill decompression, dense / shared / routed feed-forward, elementwise kernels — plus
the LM head, the collectives its layout needs (TP all-reduce, EP dispatch/combine), speculative-draft
passes, and the serving framework's host time per step and per sequence.

Operator times come from :mod:`scoville.sim.kernels`: the chip's measured kernel tables where they
exist, the datasheet transfer model elsewhere; the ``provenance`` and ``sigma`` of each operator travel
with the cost model, and :meth:`StepCost.sigma` turns them into the uncertainty of a step.

Modelling choices that matter (each one is a way other simulators go wrong):

* **MLA decode is not memory-bound.** Absorbed MLA does ``2·heads·(2·kv_lora + rope)`` FLOPs per cached
  token per layer against ``kv_lora + rope`` elements read; its measured cores say so, and the transfer
  model prices it as a roofline. Prefill takes the non-absorbed path (decompress K/V, then attend).
* **Sliding-window layers are capped at their window** for both FLOPs and KV bytes.
* **MoE is timed for the tokens of the whole EP group** on the busiest rank's share: the measured tables
  were taken under power-law routing, and weights are read only for experts some token reaches.
* **MLA KV is replicated across tensor-parallel ranks** (the latent has no heads to split), which is why
  DeepSeek-style serving uses data-parallel attention; GQA KV is split by KV head up to ``num_kv_heads``.

Every input of :meth:`StepCost.step_time` may be a numpy array (the engine evaluates thousands of decode
steps in one call); scalar calls stay on plain floats (the curves have a pure-Python path).
"""

from __future__ import annotations

import math
from typing import Any

import msgspec
import numpy as np

from scoville.catalog.hardware import Hardware, load_hardware
from scoville.catalog.models import COMPUTE_PRECISION, KV_BYTES, WEIGHT_BYTES, ModelArch, load_model
from scoville.errors import UserError
from scoville.sim.frameworks import FrameworkCosts, load_framework, rank_token_budget
from scoville.sim.kernels.formats import activation_bytes
from scoville.sim.kernels.ops import Layout, OpSet, build_ops
from scoville.sim.kernels.work import touched_share

ACTIVATION_TENSORS = 18    # live hidden-sized tensors per token in the peak-activation estimate
COMPONENTS = ("attn_proj", "attn_core", "ffn", "lm_head", "comm", "draft", "overhead")


class MissingKernelTables(UserError):
    """``--cost-backend measured`` on a chip or shape without tables: a fact of the install, not of one layout."""


class Parallel(msgspec.Struct, frozen=True, kw_only=True):
    """How one instance is split: ``tp`` x ``dp`` accelerators; MoE experts over ``ep`` of them.

    ``dp`` > 1 is data-parallel attention (each DP rank runs its own slice of the batch with ``tp``-way
    attention); ``ep`` must divide ``tp * dp``. MoE layers always span the whole instance: experts spread over
    ``ep`` ranks and each split over the ``tp * dp / ep`` that share it (with ``ep == 1``, tensor-split over every
    rank, data-parallel ones included, as vLLM, SGLang and TensorRT-LLM run them).
    """

    tp: int = 1
    ep: int = 1
    dp: int = 1
    expert_slots: int = 0        # TensorRT-LLM's expert load balancer's slots; 0: none (``ParallelConfig``)

    @property
    def accelerators(self) -> int:
        return self.tp * self.dp


def _is_scalar(*xs: Any) -> bool:
    return all(x is None or isinstance(x, (float, int)) or np.ndim(x) == 0 for x in xs)


class StepCost:
    """Step-time model of one instance of ``model`` on ``hardware`` under ``parallel``.

    ``precision`` relabels the weight groups (see ``ModelArch.with_precision``; default = checkpoint);
    ``kv_dtype`` is the KV-cache format (``bf16`` default, ``fp8``); ``framework`` picks both the
    measured tables and the host-overhead priors; ``backend`` forces ``transfer`` (datasheet only) or
    ``measured``/``auto`` (tables where they hold the shape). ``drafts`` > 0 adds the draft passes of
    speculative decoding (MTP / EAGLE: one decoder layer and the LM head per draft token).
    ``serial_host`` says no overlap scheduler hides the host work between steps (``SimConfig.schedules_ahead``
    false): each step then adds the framework's ``serial_host_us``.
    ``framework_costs`` and ``kernel_factor`` are what a calibration profile replaces; ``calibrated_sigma``
    (the profile's residual spread on measured runs) then stands for the step's uncertainty in place of the
    operators' priors.
    """

    def __init__(
        self,
        model: ModelArch | str,
        hardware: Hardware | str,
        parallel: Parallel | None = None,
        precision: str | None = None,
        kv_dtype: str | None = None,
        *,
        framework: str = "vllm",
        backend: str = "auto",
        drafts: int = 0,
        framework_costs: FrameworkCosts | None = None,
        kernel_factor: float = 1.0,
        calibrated_sigma: float | None = None,
        moe_kernel: str = "auto",
        serial_host: bool = False,
    ) -> None:
        self.model = load_model(model) if isinstance(model, str) else model
        self.hw = load_hardware(hardware) if isinstance(hardware, str) else hardware
        self.par = parallel or Parallel()
        m, p = self.model, self.par
        if min(p.tp, p.ep, p.dp) < 1:
            raise UserError(f"parallelism must be >= 1, got tp={p.tp} ep={p.ep} dp={p.dp}")
        if p.accelerators % p.ep:
            raise UserError(f"ep={p.ep} must divide tp*dp={p.accelerators}")
        if m.num_experts and p.ep > m.num_experts:
            raise UserError(f"ep={p.ep} exceeds {m.name}'s {m.num_experts} experts")
        if m.num_heads % p.tp:
            # every framework shards attention by whole heads (the search only proposes such tp; a pinned config
            # must be a deployment that could run, or its prediction is of a layout nobody can serve)
            ways = ", ".join(str(t) for t in range(1, min(m.num_heads, 64) + 1) if m.num_heads % t == 0)
            raise UserError(f"tp={p.tp} does not divide {m.name}'s {m.num_heads} attention heads; use tp in {ways}")
        if backend not in ("auto", "measured", "transfer"):
            raise UserError(f"unknown cost backend {backend!r}; use auto, measured or transfer")
        if drafts < 0:
            raise UserError(f"draft tokens must be >= 0, got {drafts}")
        self.precision = m.with_precision(precision)
        self.act_bytes = activation_bytes(self.precision)   # between operators: BF16, or FP32
        self.kv_dtype = (kv_dtype or "bf16").lower()
        if self.kv_dtype not in KV_BYTES:
            raise UserError(f"unknown kv_dtype {kv_dtype!r}; use one of {', '.join(KV_BYTES)}")
        self.framework = framework_costs or load_framework(framework)
        self.drafts = drafts
        self.serial_host = serial_host
        self.kernel_factor = kernel_factor
        self.calibrated_sigma = calibrated_sigma
        self.accelerators = p.accelerators
        if p.expert_slots and p.expert_slots < m.num_experts:
            raise UserError(f"expert_slots={p.expert_slots} is fewer than {m.name}'s {m.num_experts} experts; the load "
                            "balancer places every expert at least once")
        lay = Layout(tp=p.tp, dp=p.dp, ep=p.ep, expert_slots=p.expert_slots)
        self.ops: OpSet = build_ops(m, self.hw, lay, self.precision, self.kv_dtype,
                                    framework=self.framework.name, backend=backend,
                                    elementwise_kernels=self.framework.elementwise_kernels, moe_kernel=moe_kernel)
        missing = sorted(k for k, s in self.ops.provenance.items() if s.startswith("transfer"))
        if backend == "measured" and missing:
            raise MissingKernelTables(f"no measured kernel tables for {', '.join(missing)} of {m.name} on "
                                      f"{self.hw.name} ({self.framework.name}); pip install 'scoville[silicon]' or "
                                      "use --cost-backend auto")
        self._precompute()

    # -- static quantities ------------------------------------------------------------------------
    def _precompute(self) -> None:
        m, p = self.model, self.par
        wb = {g: WEIGHT_BYTES[self.precision.get(g, "bf16")]
              for g in ("attn", "dense_ffn", "experts", "shared_experts", "embed", "lm_head")}
        g = m.group_params()
        tp = p.tp
        attn_layer = (m.attn_params_per_layer + (m.router_params if m.num_moe_layers else 0)) * wb["attn"]
        self._attn_w = attn_layer / tp
        self._dense_w = 3 * m.hidden_size * m.dense_intermediate * wb["dense_ffn"] / tp
        self._shared_w = m.shared_params_per_layer * wb["shared_experts"] / tp
        self._expert_w = m.expert_params * wb["experts"] / (p.accelerators // p.ep) if m.num_experts else 0.0
        self._experts_per_rank = m.num_experts / p.ep if m.num_experts else 0
        # the load balancer's slots hold every expert once and replicas of the busiest: their weights stay resident
        resident = (p.expert_slots or m.num_experts) / p.ep if m.num_experts else 0
        self._head_w = m.vocab_size * m.hidden_size * wb["lm_head"] / tp
        layer_w = (self._attn_w + (self._dense_w if not m.num_moe_layers else
                                   self._shared_w + self._experts_per_rank * self._expert_w))
        mtp = m.mtp_layers if (self.drafts and m.mtp_layers) else 0
        self.weight_bytes_per_accelerator = float(
            m.num_layers * self._attn_w
            + m.num_dense_layers * self._dense_w
            + m.num_moe_layers * (self._shared_w + resident * self._expert_w)
            + mtp * layer_w
            + g["embed"] * wb["embed"] / tp
            + (0 if m.tie_embeddings else self._head_w)
        )
        kvb = KV_BYTES[self.kv_dtype]
        el = m.kv_elements_per_token_per_layer()
        if m.attention == "mla":
            self._kv_layer_rank = el * kvb                    # latent replicated on every TP rank
        else:
            self._kv_layer_rank = 2 * max(m.num_kv_heads / tp, 1.0) * m.head_dim * kvb
        inst_layer = self._kv_layer_rank * tp
        self.kv_bytes_per_token = float(inst_layer * m.num_full_layers)
        self.kv_bytes_per_seq = float(inst_layer * m.num_sliding_layers * (m.sliding_window or 0))
        self._unique_kv_per_token = float(el * kvb * m.num_full_layers)
        heads_r = m.num_heads / tp
        if m.attention == "mla":
            self._decode_flop_per_ctx = 2 * heads_r * (2 * m.kv_lora_rank + m.qk_rope_head_dim)
        else:
            self._decode_flop_per_ctx = 4 * heads_r * m.head_dim

    # -- the step ---------------------------------------------------------------------------------
    def breakdown(self, num_tokens: Any, num_seqs: Any, attn_ctx_tokens: Any, kv_tokens: Any,
                  decode_seqs: Any = None, decode_kv: Any = None) -> dict[str, Any]:
        """Seconds per component (``COMPONENTS``) for a step; arguments as :meth:`step_time`."""
        m, p, ops = self.model, self.par, self.ops
        scalar = _is_scalar(num_tokens, num_seqs, attn_ctx_tokens, kv_tokens, decode_seqs, decode_kv)
        xp: Any = math if scalar else np
        T, S, A, K = (float(v) if scalar else np.asarray(v, dtype=np.float64)
                      for v in (num_tokens, num_seqs, attn_ctx_tokens, kv_tokens))
        S = max(S, 1.0) if scalar else np.maximum(S, 1.0)
        q_dec = 1.0 + self.drafts                                  # tokens each decoding sequence feeds
        if decode_seqs is None:
            D = S - (1.0 if scalar and S * q_dec < T else 0.0) if scalar else S - (S * q_dec < T)
        else:
            D = float(decode_seqs) if scalar else np.asarray(decode_seqs, dtype=np.float64)
        Kd = (K * D / S) if decode_kv is None else (
            float(decode_kv) if scalar else np.asarray(decode_kv, dtype=np.float64))
        Td = D * q_dec
        Tp = T - Td                                                # prefill tokens (chunks)
        Sp = S - D
        Kp = K - Kd                                                # context the chunks attend (incl. themselves)
        Ap = A - Kd * q_dec
        dp = p.dp
        # Data-parallel attention: decodes spread evenly over the ranks, but a prompt chunk lives on one rank (the
        # step's chunks on distinct ranks first), and every rank waits for the busiest at each layer's expert
        # exchange: the attention side, the router, shared experts and the collectives run at the busiest rank's
        # tokens, the routed experts over all of them.
        Dr = D / dp
        Spr = Sp if dp == 1 else xp.ceil(Sp / dp - 1e-9)             # chunks on the busiest rank
        chunk = Tp / _pos(xp, Sp, scalar)
        Tr = Dr * q_dec + Spr * chunk
        L, Lf, Lsw = m.num_layers, m.num_full_layers, m.num_sliding_layers
        out: dict[str, Any] = {}
        out["attn_proj"] = L * ops.attn_proj(Tr)
        small = L * self._small_kernels(Tr)
        # attention cores: decode sequences at their mean context; prefill chunks as a fresh prompt with as many
        # causal pairs as they really attend (prior context included)
        ctx = Kd / _pos(xp, D, scalar)
        dec_batch = Dr * q_dec if m.attention == "mla" else Dr
        core = _where(scalar, Dr > 0, Lf * self._decode_core(_pos(xp, Dr, scalar), _pos(xp, ctx, scalar), q_dec), 0.0)
        if Lsw:
            w = float(m.sliding_window or 0)
            cap = min(ctx, w) if scalar else np.minimum(ctx, w)
            sliding = Lsw * ops.attn_decode(_pos(xp, dec_batch, scalar), _pos(xp, cap, scalar))
            core = core + _where(scalar, Dr > 0, sliding, 0.0)
        pairs = _pos(xp, Ap / _pos(xp, Sp, scalar), scalar)
        span = _causal_span(xp, pairs)
        pre_all = Lf * ops.attn_prefill(_pos(xp, Spr, scalar), _pos(xp, span, scalar))
        if Lsw:     # a window caps each token's pairs: the chunk's own kernel scaled to the pairs it attends
            fresh_pairs = _pos(xp, chunk * (chunk + 1.0) / 2.0, scalar)
            w_pairs = float(m.sliding_window or 0) * chunk
            window = (min(pairs, w_pairs) if scalar else np.minimum(pairs, w_pairs)) / fresh_pairs
            pre_all = pre_all + Lsw * ops.attn_prefill(_pos(xp, Spr, scalar), _pos(xp, chunk, scalar)) * window
        core = core + _where(scalar, Tp > 0.5, pre_all, 0.0)
        if ops.mla_absorb is not None and ops.mla_kv_up is not None:   # built together (``build_ops``: MLA only)
            core = core + _where(scalar, Td > 0, L * ops.mla_absorb(_pos(xp, Td / dp, scalar)), 0.0)
            busiest_kv = Kp * Spr / _pos(xp, Sp, scalar)             # the busiest rank's chunks' context
            core = core + _where(scalar, Tp > 0.5, L * ops.mla_kv_up(_pos(xp, busiest_kv, scalar)), 0.0)
        out["attn_core"] = core
        ffn = 0.0
        if ops.dense_ffn is not None:
            ffn = ffn + m.num_dense_layers * ops.dense_ffn(Tr)
        experts, exchange = self._moe_layer(Tr, T, scalar, xp)
        ffn = ffn + m.num_moe_layers * experts
        out["ffn"] = ffn
        out["lm_head"] = ops.lm_head(_pos(xp, Td / dp + Spr, scalar))
        out["comm"] = L * self._tp_allreduces(Tr, scalar, xp) + m.num_moe_layers * exchange
        out["draft"] = self._draft_time(Dr, ctx, scalar, xp) if self.drafts else 0.0
        fw = self.framework
        # host time: with data-parallel attention every rank runs its own scheduler over its own sequences (vLLM's
        # engine core per DP rank, SGLang's scheduler per DP rank, TensorRT-LLM's executor per attention-DP rank),
        # side by side, so the step waits for the busiest rank's, not for all of them in turn (at dp = 1, all: S)
        host_us = fw.step_overhead_us + (fw.serial_host_us if self.serial_host else 0.0)
        out["overhead"] = (host_us + fw.seq_overhead_us * (Dr + Spr)) * 1e-6
        # kernels run at kernel_scale of their isolated sum, prefill tokens at their own measured scale, a mixed
        # step at the token-weighted mix; where a module table measures the whole MLA layer, its attention kernels
        # run at its cell's measured ratio instead, a decode's and a prefill's each (the layer's small kernels, norms
        # and residuals around it, keep the medians)
        decode_share = Td / _pos(xp, T, scalar)

        def mixed(decode: Any, prefill: Any) -> Any:
            return self.kernel_factor * (decode * decode_share + prefill * (1.0 - decode_share))

        kernels, prefill_kernels = fw.kernel_scale, fw.kernel_scale * fw.prefill_kernel_ratio
        scale = mixed(kernels, prefill_kernels)
        attn_scale = mixed(
            kernels if ops.decode_module_ratio is None
            else ops.decode_module_ratio(_pos(xp, dec_batch, scalar), _pos(xp, ctx, scalar)),
            prefill_kernels if ops.prefill_module_ratio is None
            else ops.prefill_module_ratio(_pos(xp, Spr, scalar), _pos(xp, span, scalar)))
        out["attn_proj"] = out["attn_proj"] * attn_scale + small * scale
        out["attn_core"] = out["attn_core"] * attn_scale
        for key in ("ffn", "lm_head", "comm", "draft"):
            out[key] = out[key] * scale
        return out

    def _draft_time(self, Dr: Any, ctx: Any, scalar: bool, xp: Any) -> Any:
        """``drafts`` sequential passes of one decoder layer (MTP module / EAGLE head) plus the LM head over
        the decoding sequences. The MTP module is a whole decoder block on the same ranks: each pass pays the
        layer's projections, its attention over the sequence's context, its experts, and the collectives the main
        layers pay (TP all-reduces, the EP dispatch and combine or the experts' gather). The first pass takes
        every token the step verified (``drafts + 1`` a sequence: TensorRT-LLM's MTPEagleWorker feeds the
        accepted tokens to its first MTP pass, SGLang's EAGLE worker runs its draft extend over them), which
        fills the draft layer's KV cache and touches more experts; the later passes take one token a sequence.
        Each pass's LM head reads one position a sequence (the last accepted token, then each new draft)."""
        x = _pos(xp, Dr, scalar)
        first = self._draft_layer(x, 1.0 + self.drafts, ctx, scalar, xp)
        later = self._draft_layer(x, 1.0, ctx, scalar, xp)
        passes = first + (self.drafts - 1) * later + self.drafts * self.ops.lm_head(x)
        return _where(scalar, Dr > 0, passes, 0.0)

    def _draft_layer(self, seqs: Any, queries: float, ctx: Any, scalar: bool, xp: Any) -> Any:
        """One pass of the draft decoder block over ``seqs`` sequences a rank at context ``ctx``, each feeding
        ``queries`` tokens (attention as a main layer's decode)."""
        ops = self.ops
        tokens = seqs * queries
        layer = self._projections(tokens) + self._decode_core(seqs, ctx, queries)
        if ops.moe is not None:
            experts, exchange = self._moe_layer(tokens, tokens * self.par.dp, scalar, xp)
            layer = layer + experts + exchange
        elif ops.dense_ffn is not None:
            layer = layer + ops.dense_ffn(tokens)
        return layer + self._tp_allreduces(tokens, scalar, xp)

    def _decode_core(self, seqs: Any, ctx: Any, queries: float) -> Any:
        """One layer's decode attention core over ``seqs`` sequences a rank at mean context ``ctx``, each bringing
        ``queries`` query tokens (1, or 1 + drafts in a verify step): MLA reads each sequence's latent KV once for
        all of them (``ops.FoldedHeads``); other attention is priced at one query a sequence, its KV read being
        what a decode step pays."""
        if self.ops.mla_decode_rows is not None:
            return self.ops.mla_decode_rows(seqs, ctx, queries)
        return self.ops.attn_decode(seqs, ctx)

    def _moe_layer(self, rank_tokens: Any, instance_tokens: Any, scalar: bool, xp: Any) -> tuple[Any, Any]:
        """One MoE layer over ``rank_tokens`` a rank (``instance_tokens`` over the EP group): (its experts: router,
        routed experts and what the step waits for of the shared ones; its token exchange). No experts for a model
        without MoE layers (``build_ops`` builds ``moe`` and ``router`` together)."""
        ops = self.ops
        exchange = self._moe_exchange(rank_tokens, instance_tokens, scalar, xp)
        if ops.moe is None or ops.router is None:
            return 0.0, exchange
        routed = ops.moe(instance_tokens) + ops.router(rank_tokens)
        return routed + self._shared_experts(rank_tokens, routed + exchange, scalar), exchange

    def _shared_experts(self, rank_tokens: Any, routed: Any, scalar: bool) -> Any:
        """One MoE layer's shared experts over ``rank_tokens`` a rank, as much of them as the step waits for: all
        of it, or, where the framework runs them on a second stream beside the ``routed`` path (router, routed
        experts, expert exchange) up to a batch size (``FrameworkCosts.shared_experts_overlap_tokens``: vLLM's
        ``FusedMoE``) on an NVIDIA GPU, only what outlasts that path."""
        ops, fw = self.ops, self.framework
        if ops.shared_ffn is None:
            return 0.0
        shared = ops.shared_ffn(rank_tokens)
        # CUDA streams: vLLM takes the second stream on NVIDIA GPUs only (PR #30085; none on CPUs, PR #28157)
        if not fw.shared_experts_overlap_tokens or self.hw.vendor != "nvidia":
            return shared
        beside = rank_tokens <= fw.shared_experts_overlap_tokens
        outlasts = max(shared - routed, 0.0) if scalar else np.maximum(shared - routed, 0.0)
        return _where(scalar, beside, outlasts, shared)

    def _projections(self, x: Any) -> Any:
        """One layer's attention projections and the small kernels around them, over ``x`` tokens per rank: the
        same for a main layer and a draft pass."""
        return self.ops.attn_proj(x) + self._small_kernels(x)

    def _small_kernels(self, x: Any) -> Any:
        """One layer's norms, residual adds, activations and q/k norm over ``x`` tokens per rank."""
        ops = self.ops
        return ops.elementwise(x) + (ops.qk_norm(x) if ops.qk_norm is not None else 0.0)

    def _moe_exchange(self, rank_tokens: Any, instance_tokens: Any, scalar: bool, xp: Any) -> Any:
        """One MoE layer's token exchange (none without one): EP's dispatch and combine over the busiest rank's
        tokens, or, under attention DP without EP, the gather and reduce-scatter of the whole instance's tokens;
        the same for a main layer and a draft pass."""
        ops, out = self.ops, 0.0
        if ops.ep_exchange is not None:
            out = out + ops.ep_exchange(_pos(xp, rank_tokens, scalar))
        if ops.moe_gather is not None:
            out = out + ops.moe_gather(_pos(xp, instance_tokens * self.model.hidden_size * self.act_bytes, scalar))
        return out

    def _tp_allreduces(self, x: Any, scalar: bool, xp: Any) -> Any:
        """One layer's tensor-parallel all-reduces over ``x`` tokens per rank (none on one rank): after attention
        and after the feed-forward, and for a layer-wide q/k norm the tokens' sums of squares (FP32 q and k)."""
        ops, m = self.ops, self.model
        if ops.allreduce is None:
            return 0.0
        out = 2 * ops.allreduce(_pos(xp, x * m.hidden_size * self.act_bytes, scalar))
        if m.qk_norm == "per_layer":
            out = out + ops.allreduce(_pos(xp, x * 2.0 * 4.0, scalar))
        return out

    def step_time(self, num_tokens: Any, num_seqs: Any, attn_ctx_tokens: Any, kv_tokens: Any,
                  decode_seqs: Any = None, decode_kv: Any = None) -> float | np.ndarray:
        """Seconds for one forward step of this instance.

        ``num_tokens`` tokens fed, ``num_seqs`` sequences, ``attn_ctx_tokens`` = Σ over fed tokens of the
        context each attends (itself included), ``kv_tokens`` = Σ over sequences of their KV length after
        the step. ``decode_seqs`` / ``decode_kv`` (sequences decoding and their KV) make the decode/prefill
        split exact; without them a step with more tokens than sequences is taken to carry one chunk.
        """
        b = self.breakdown(num_tokens, num_seqs, attn_ctx_tokens, kv_tokens, decode_seqs, decode_kv)
        total = b["attn_proj"] + b["attn_core"] + b["ffn"] + b["lm_head"] + b["comm"] + b["draft"] + b["overhead"]
        return float(total) if np.ndim(total) == 0 else total

    def sigma(self, num_tokens: Any, num_seqs: Any, attn_ctx_tokens: Any, kv_tokens: Any,
              decode_seqs: Any = None, decode_kv: Any = None) -> Any:
        """Log-space uncertainty of :meth:`step_time`: each component's share times its operators' sigma,
        summed as if fully correlated (one systematic error per operator class, the conservative choice)."""
        return self.time_and_sigma(num_tokens, num_seqs, attn_ctx_tokens, kv_tokens, decode_seqs, decode_kv)[1]

    def time_and_sigma(self, num_tokens: Any, num_seqs: Any, attn_ctx_tokens: Any, kv_tokens: Any,
                       decode_seqs: Any = None, decode_kv: Any = None) -> tuple[Any, Any]:
        """:meth:`step_time` and :meth:`sigma` from one breakdown (the steady-state estimator needs both)."""
        b = self.breakdown(num_tokens, num_seqs, attn_ctx_tokens, kv_tokens, decode_seqs, decode_kv)
        total = sum(b[k] for k in COMPONENTS)
        if self.calibrated_sigma is not None:
            return total, self.calibrated_sigma + 0.0 * total
        comp_sigma = self.component_sigma()
        return total, sum(b[k] * comp_sigma[k] for k in COMPONENTS) / total

    def component_sigma(self) -> dict[str, float]:
        """Log-space uncertainty of each step component (``COMPONENTS``): the largest sigma of the operators it
        is priced from (measured table or datasheet transfer, ``OpSet.sigma``), the framework's for the host
        overhead. Before any calibration: what the kernel data and the priors alone can claim."""
        s = self.ops.sigma
        return {
            "attn_proj": max(s.get("attn_proj", 0.0), s.get("elementwise", 0.0)),
            "attn_core": max(s.get("attn_decode", 0.0), s.get("attn_prefill", 0.0), s.get("mla_absorb", 0.0),
                             s.get("attn_module_decode", 0.0), s.get("attn_module_prefill", 0.0)),
            "ffn": max(s.get("moe", 0.0), s.get("dense_ffn", 0.0), s.get("shared_ffn", 0.0)),
            "lm_head": s.get("lm_head", 0.0),
            "comm": max(s.get("allreduce", 0.0), s.get("alltoall", 0.0)),
            "draft": max(s.get("attn_proj", 0.0), s.get("moe", 0.0), s.get("dense_ffn", 0.0)),
            "overhead": self.framework.sigma,
        }

    def utilization(self, num_tokens: Any, num_seqs: Any, attn_ctx_tokens: Any, kv_tokens: Any) -> tuple[Any, Any]:
        """(compute, memory) utilisation of peak over a step, for :class:`scoville.sim.power_model.PowerModel`."""
        m, hw = self.model, self.hw
        t = np.asarray(self.step_time(num_tokens, num_seqs, attn_ctx_tokens, kv_tokens), dtype=np.float64)
        T, S, A, K = (np.asarray(v, dtype=np.float64) for v in (num_tokens, num_seqs, attn_ctx_tokens, kv_tokens))
        S = np.maximum(S, 1.0)
        n = self.accelerators
        w = float(m.sliding_window or 0)
        attn_lt = A * m.num_full_layers + np.minimum(A, T * w) * m.num_sliding_layers
        kv_lt = K * m.num_full_layers + np.minimum(K, S * w) * m.num_sliding_layers
        flops = (2.0 * T * (m.active_params - m.group_params()["embed"])
                 + attn_lt * self._decode_flop_per_ctx * self.par.tp)
        bytes_ = self.weight_bytes_per_accelerator * n + kv_lt * self._kv_layer_rank * self.par.tp
        cu = np.clip(flops / n / t / hw.peak_flops(COMPUTE_PRECISION[self.precision.get("experts", "bf16")]), 0, 1)
        mu = np.clip(bytes_ / n / t / hw.hbm_bytes_per_s, 0, 1)
        return cu, mu

    # -- memory ------------------------------------------------------------------------------------
    def rank_budget(self, max_num_batched_tokens: int) -> int:
        """Tokens one attention rank schedules a step under this framework's budget flag (``rank_token_budget``);
        the instance's ranks together schedule ``dp`` times that."""
        return rank_token_budget(self.framework.name, max_num_batched_tokens, self.par.dp)

    def activation_bytes_per_accelerator(self, max_num_batched_tokens: int = 8192) -> float:
        """Peak activation workspace: hidden-sized tensors for a rank's full token budget plus the logits."""
        m = self.model
        toks = self.rank_budget(max_num_batched_tokens)
        return (toks * m.hidden_size * self.act_bytes * ACTIVATION_TENSORS / self.par.tp
                + 1024 * m.vocab_size * 4 / self.par.tp)

    def kv_capacity_tokens(self, gpu_memory_utilization: float = 0.9, max_num_batched_tokens: int = 8192) -> int:
        """KV tokens that fit in this instance, summed over ranks, in full-attention tokens (``kv_bytes_per_token``):
        what the framework's memory share leaves after weights, activations and the runtime reserve (NCCL buffers,
        CUDA context, allocator slack). vLLM's --gpu-memory-utilization and SGLang's --mem-fraction-static are
        shares of the whole memory, weights included; TensorRT-LLM's ``free_gpu_memory_fraction`` is a share of
        what is free once the model is loaded ("90% of free GPU memory", TensorRT-LLM docs, How to Change KV Cache
        Behavior), so the same 0.9 leaves it far more room on a chip the weights nearly fill. Sliding-window
        layers' ``kv_bytes_per_seq`` comes out of the same memory per running sequence; the engine reserves it at
        admission. 0 when the model does not fit."""
        hw = self.hw
        left = (hw.hbm_bytes - self.weight_bytes_per_accelerator
                - self.activation_bytes_per_accelerator(max_num_batched_tokens) - hw.runtime_reserve_gb * 1e9)
        if self.framework.name == "trtllm":
            free = left * gpu_memory_utilization
        else:
            free = left - hw.hbm_bytes * (1.0 - gpu_memory_utilization)
        if free <= 0:
            return 0
        return int(free * self.accelerators // self.kv_bytes_per_token)

    @property
    def fits(self) -> bool:
        return self.kv_capacity_tokens() > 0

    def kv_transfer_time(self, tokens: int, scaleout: bool) -> float:
        """Prefill-to-decode KV copy for disaggregation: the unique KV bytes, sent in parallel by the
        instance's ranks over the scale-up links (same NVL domain) or their NICs; each rank to its peer in the
        decode instance, which on a mesh is one link (``Hardware.scaleup_bytes_per_s``)."""
        hw = self.hw
        if scaleout:
            bw = hw.scaleout_bandwidth_gbps * hw.eff("scaleout") * 1e9
        else:
            bw = hw.scaleup_bytes_per_s(2) * hw.eff("scaleup")
        lat = (hw.scaleout_latency_us if scaleout else hw.scaleup_latency_us) * 1e-6
        nbytes = tokens * self._unique_kv_per_token
        return lat * self.model.num_layers + nbytes / (bw * self.accelerators)

    def decode_floor_bytes(self, seqs: float, ctx: float) -> float:
        """The fewest bytes one rank reads in a plain decode step of ``seqs`` sequences at ``ctx`` tokens of context
        (what no kernel can skip): every non-expert weight of its shard, the experts some of its tokens route to
        (``touched_share``), and its sequences' full-attention KV."""
        m = self.model
        ffn = m.num_dense_layers * self._dense_w
        if m.num_experts:
            touched = touched_share(seqs, m.experts_per_token, m.num_experts)
            ffn += m.num_moe_layers * (self._shared_w + self._experts_per_rank * touched * self._expert_w)
        kv = seqs / self.par.dp * ctx * self._kv_layer_rank * m.num_full_layers
        return m.num_layers * self._attn_w + ffn + self._head_w + kv

    def handover_time(self, tokens: int, scaleout: bool) -> float:
        """Disaggregated serving: from a prompt's prefill done to its first token at the client, the KV copy
        (``kv_transfer_time``) and then the framework's handover (``FrameworkCosts.disagg_handover_ms``)."""
        return self.kv_transfer_time(tokens, scaleout) + self.framework.disagg_handover_ms * 1e-3

    def describe(self) -> dict[str, Any]:
        """What this cost model believes and where each operator's time comes from, for manifests."""
        return {
            "hardware": self.hw.name, "model": self.model.name, "parallel": msgspec.to_builtins(self.par),
            "precision": self.precision, "kv_dtype": self.kv_dtype, "drafts": self.drafts,
            "serial_host": self.serial_host,
            "weight_gb_per_accelerator": self.weight_bytes_per_accelerator / 1e9,
            "kv_bytes_per_token": self.kv_bytes_per_token, "kv_bytes_per_seq": self.kv_bytes_per_seq,
            "framework": msgspec.to_builtins(self.framework), "kernel_factor": self.kernel_factor,
            "operators": dict(self.ops.provenance), "operator_sigma": dict(self.ops.sigma),
            "formats": dict(self.ops.formats),
        }


def _causal_span(xp: Any, pairs: Any) -> Any:
    """The fresh prompt length with ``pairs`` causal query-key pairs: a prompt chunk attending a cached prefix does
    the attention work of a longer fresh prompt (the tables time fresh, full-attention ones). Read that way, not as
    the chunk's own time times its pairs over a fresh chunk's, a few tokens continuing a long prompt cost a short
    prompt's attention, where the product multiplied a launch-bound kernel's floor by hundreds."""
    return (xp.sqrt(8.0 * pairs + 1.0) - 1.0) / 2.0


def _pos(xp: Any, x: Any, scalar: bool) -> Any:
    """``x`` floored at a tiny positive value (curves take logs)."""
    return max(x, 1e-9) if scalar else np.maximum(x, 1e-9)


def _where(scalar: bool, cond: Any, a: Any, b: Any) -> Any:
    if scalar:
        return a if cond else b
    return np.where(cond, a, b)
