"""Operator cost model: the time of one forward step of one serving instance, from first principles.

Every operator is a roofline term ``max(FLOPs / (peak x compute_eff), bytes / (HBM x memory_eff))`` on
one rank (accelerator); a step is the sum of its operators over the layers, plus collectives (TP
all-reduce, EP dispatch/combine, latency + bandwidth over the scale-up domain or the scale-out network)
and fixed per-step and per-layer overheads. The efficiency factors are few and per hardware *family*
(``scoville.sim.hardware.EFFICIENCY_KEYS``), so the same physics extrapolates to chips nobody profiled.

Modelling choices that matter (each one is a way other simulators go wrong):

* **MLA decode is not memory-bound.** Absorbed MLA does ``2·heads·(kv_lora + rope + kv_lora)`` FLOPs per
  cached token per layer against ``kv_lora + rope`` elements read (~484 FLOP/B for DeepSeek-R1 with FP8
  KV), so it is costed as a roofline, and prefill tokens take the non-absorbed path (decompress K/V, then
  192/128-dim attention), which is cheaper for long queries.
* **Sliding-window layers are capped at their window** for both FLOPs and KV bytes.
* **MoE under expert parallelism costs the busiest rank**, not the mean: the expected maximum over ``ep``
  ranks of the routed load (Poisson max plus a systematic skew), and weight traffic counts only the experts
  that tokens actually touch (all of them at large batch, few at batch 1).
* **MLA KV is replicated across tensor-parallel ranks** (the latent has no heads to split), which is why
  DeepSeek-style serving uses data-parallel attention; GQA KV is split by KV head up to ``num_kv_heads``.

Every input of :meth:`StepCost.step_time` may be a numpy array (the engine evaluates thousands of decode
steps in one call), so nothing here branches per element.
"""

from __future__ import annotations

import math
from typing import Any

import msgspec
import numpy as np

from scoville.errors import UserError
from scoville.sim.hardware import Hardware, load_hardware
from scoville.sim.models import COMPUTE_PRECISION, KV_BYTES, WEIGHT_BYTES, ModelArch, load_model

ACT_BYTES = 2.0            # BF16 activations between operators
DISPATCH_BYTES = 1.0       # EP dispatch sends FP8 activations (DeepEP low-latency / TRT-LLM default)
COMBINE_BYTES = 2.0        # combine returns BF16
ACTIVATION_TENSORS = 18    # live hidden-sized tensors per token in the peak-activation estimate


class Parallel(msgspec.Struct, frozen=True, kw_only=True):
    """How one instance is split: ``tp`` x ``dp`` accelerators; MoE experts over ``ep`` of them.

    ``dp`` > 1 is data-parallel attention (each DP rank runs its own slice of the batch with ``tp``-way
    attention); ``ep`` must divide ``tp * dp``. With ``ep == 1`` experts are tensor-split ``tp`` ways.
    """

    tp: int = 1
    ep: int = 1
    dp: int = 1

    @property
    def accelerators(self) -> int:
        return self.tp * self.dp


def _as(x: Any) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


class _Scalar:
    """The numpy functions the step formulas use, on plain floats: the engine calls ``step_time`` with
    scalars once per scheduled batch, where numpy's per-call cost would dominate. One set of formulas,
    two backends."""

    maximum = staticmethod(max)
    minimum = staticmethod(min)
    exp = staticmethod(math.exp)
    sqrt = staticmethod(math.sqrt)

    @staticmethod
    def clip(x: float, lo: float, hi: float) -> float:
        return lo if x < lo else hi if x > hi else x


def _backend(*xs: Any) -> tuple[Any, list[Any]]:
    """(namespace, values): ``_Scalar`` with floats when every input is a Python/numpy scalar, else numpy."""
    if all(np.ndim(x) == 0 for x in xs):
        return _Scalar, [float(x) for x in xs]
    return np, [_as(x) for x in xs]


class StepCost:
    """Step-time model of one instance of ``model`` on ``hardware`` under ``parallel``.

    ``precision`` relabels the weight groups (see ``ModelArch.with_precision``; default = checkpoint);
    ``kv_dtype`` is the KV-cache format (``bf16`` default, ``fp8``).
    """

    def __init__(
        self,
        model: ModelArch | str,
        hardware: Hardware | str,
        parallel: Parallel | None = None,
        precision: str | None = None,
        kv_dtype: str | None = None,
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
        self.precision = m.with_precision(precision)
        self.kv_dtype = (kv_dtype or "bf16").lower()
        if self.kv_dtype not in KV_BYTES:
            raise UserError(f"unknown kv_dtype {kv_dtype!r}; use one of {', '.join(KV_BYTES)}")
        self.accelerators = p.accelerators
        self._precompute()

    # -- static quantities ------------------------------------------------------------------------
    def _precompute(self) -> None:
        m, hw, p = self.model, self.hw, self.par
        prec, n = self.precision, self.accelerators
        wb = {g: WEIGHT_BYTES[prec.get(g, "bf16")] for g in ("attn", "dense_ffn", "experts", "shared_experts", "embed", "lm_head")}
        self._rate = {g: hw.peak_flops(COMPUTE_PRECISION[prec.get(g, "bf16")]) * hw.eff("compute") for g in wb}
        self._bw = hw.hbm_bytes_per_s * hw.eff("memory")
        kvb = KV_BYTES[self.kv_dtype]
        attn_prec = "fp8" if self.kv_dtype in ("fp8", "fp4") and "fp8" in hw.flops_tflops else "bf16"
        self._attn_rate = hw.peak_flops(attn_prec) * hw.eff("attention_compute")
        self._prefill_attn_rate = hw.peak_flops("bf16") * hw.eff("attention_compute")
        g = m.group_params()
        tp = p.tp
        # weights per rank
        attn_layer = (m.attn_params_per_layer + (m.router_params if m.num_moe_layers else 0)) * wb["attn"]
        self._attn_w = attn_layer / tp                      # bytes per rank per layer (attention + router)
        self._attn_p = self._attn_w / wb["attn"]            # params per rank per layer
        self._dense_w = 3 * m.hidden_size * m.dense_intermediate * wb["dense_ffn"] / tp
        self._shared_w = m.shared_params_per_layer * wb["shared_experts"] / tp
        self._expert_split = (n // p.ep) if p.ep > 1 else tp     # ways one expert's weights are split
        self._experts_per_rank = m.num_experts / p.ep if m.num_experts else 0
        self._expert_w = m.expert_params * wb["experts"] / self._expert_split if m.num_experts else 0.0
        self._head_w = m.vocab_size * m.hidden_size * wb["lm_head"] / tp
        self.weight_bytes_per_accelerator = float(
            m.num_layers * self._attn_w
            + m.num_dense_layers * self._dense_w
            + m.num_moe_layers * (self._shared_w + self._experts_per_rank * self._expert_w)
            + g["embed"] * wb["embed"] / tp
            + (0 if m.tie_embeddings else self._head_w)
        )
        # KV cache
        el = m.kv_elements_per_token_per_layer()
        if m.attention == "mla":
            per_rank_layer = el * kvb                         # latent replicated on every TP rank
            self._kv_layer_rank = per_rank_layer
            inst_layer = per_rank_layer * tp
        else:
            kv_heads_rank = max(m.num_kv_heads / tp, 1.0)     # KV heads replicate once tp > num_kv_heads
            self._kv_layer_rank = 2 * kv_heads_rank * m.head_dim * kvb
            inst_layer = self._kv_layer_rank * tp
        self.kv_bytes_per_token = float(inst_layer * m.num_full_layers)
        # sliding-window layers hold at most `window` tokens per sequence: a per-sequence cost
        self.kv_bytes_per_seq = float(inst_layer * m.num_sliding_layers * (m.sliding_window or 0))
        self._unique_kv_per_token = float(el * kvb * m.num_full_layers)
        # per-layer attention-core constants per rank
        heads_r = m.num_heads / tp
        if m.attention == "mla":
            self._decode_flop_per_ctx = 2 * heads_r * (2 * m.kv_lora_rank + m.qk_rope_head_dim)
            self._prefill_flop_per_ctx = 2 * heads_r * (m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim)
            # decompress K_nope and V for every cached token a prefill attends to
            self._prefill_flop_per_kv = 2 * m.kv_lora_rank * heads_r * (m.qk_nope_head_dim + m.v_head_dim)
            # absorbed projections (q -> latent, latent -> v) per decode token
            self._absorb_flop_per_tok = 2 * heads_r * m.kv_lora_rank * (m.qk_nope_head_dim + m.v_head_dim)
        else:
            self._decode_flop_per_ctx = self._prefill_flop_per_ctx = 4 * heads_r * m.head_dim
            self._prefill_flop_per_kv = 0.0
            self._absorb_flop_per_tok = 0.0
        self._step_oh = hw.eff("step_overhead_us") * 1e-6
        self._layer_oh = hw.eff("kernel_overhead_us") * 1e-6 * self.kernels_per_step

    @property
    def kernels_per_step(self) -> int:
        """Kernels one forward step launches (what the per-kernel overhead multiplies): per layer a norm and the
        attention block (QKV, attention, O: 3 for GQA; q_a, q_b, kv_a, kv norm, rope, absorb, attention, v-absorb,
        O: 9 for MLA), then a norm and the FFN (gate-up, down: 2 dense; router, top-k, permute, two grouped GEMMs,
        un-permute: 6 MoE, +2 shared experts), plus a collective kernel each where the parallelism needs one."""
        m, p = self.model, self.par
        attn = 1 + (9 if m.attention == "mla" else 3)
        dense = 1 + 2
        moe = 1 + 6 + (2 if m.num_shared_experts else 0)
        coll = (2 if p.tp > 1 else 0) + (2 if p.ep > 1 and p.dp > 1 else 0)
        return m.num_layers * (attn + coll) + m.num_dense_layers * dense + m.num_moe_layers * moe + 2

    # -- roofline helpers ---------------------------------------------------------------------------
    def _gemm(self, xp: Any, tokens: Any, params: float, weight_bytes: float, rate: float, n_out: float) -> Any:
        """tokens x params GEMM: 2·tokens·params FLOPs; weights once + activations in and out."""
        flops = 2.0 * tokens * params
        bytes_ = weight_bytes + tokens * n_out * ACT_BYTES
        return xp.maximum(flops / rate, bytes_ / self._bw)

    def _allreduce(self, nbytes: np.ndarray, ranks: int) -> np.ndarray | float:
        if ranks <= 1:
            return 0.0
        hw = self.hw
        lat = (hw.eff("collective_us") + hw.scaleup_latency_us * math.log2(ranks)) * 1e-6
        return lat + 2 * (ranks - 1) / ranks * nbytes / (hw.scaleup_bandwidth_gbps * 1e9 * hw.eff("scaleup"))

    def _alltoall(self, nbytes: np.ndarray, ranks: int) -> np.ndarray | float:
        """One dispatch or combine: each rank exchanges ``nbytes`` with the others; ranks beyond the scale-up
        domain reach each other over the scale-out network."""
        if ranks <= 1:
            return 0.0
        hw = self.hw
        off = (ranks - 1) / ranks
        far = max(0.0, (ranks - hw.scaleup_domain) / ranks)
        near_bw = hw.scaleup_bandwidth_gbps * 1e9 * hw.eff("scaleup")
        far_bw = hw.scaleout_bandwidth_gbps * 1e9 * hw.eff("scaleout")
        lat = hw.eff("collective_us") + (hw.scaleout_latency_us if far else hw.scaleup_latency_us)
        return lat * 1e-6 + nbytes * ((off - far) / near_bw + far / far_bw)

    def _max_rank_load(self, xp: Any, assignments: Any) -> Any:
        """Expected routed (token, expert) pairs on the busiest EP rank.

        Fair share ``mu = assignments/ep``; the busiest of ``ep`` ranks exceeds it by the Poisson maximum
        ``sqrt(2·mu·ln ep)`` plus a systematic skew ``moe_imbalance·mu`` (real routers are not uniform; AIC's
        power-law alpha 1.01-1.2 and GenZ's best/worst bounds bracket it). Never above all assignments.
        """
        ep = self.par.ep
        if ep <= 1:
            return assignments
        mu = assignments / ep
        skew = self.hw.eff("moe_imbalance")
        return xp.minimum(assignments, mu * (1 + skew) + xp.sqrt(2.0 * mu * math.log(ep)))

    # -- the step ---------------------------------------------------------------------------------
    def breakdown(self, num_tokens: Any, num_seqs: Any, attn_ctx_tokens: Any, kv_tokens: Any) -> dict[str, Any]:
        """Seconds per component for a step (same arguments as :meth:`step_time`), plus FLOPs and bytes
        moved per rank for the power model."""
        m, p = self.model, self.par
        xp, (T, S, A, K) = _backend(num_tokens, num_seqs, attn_ctx_tokens, kv_tokens)
        S = xp.maximum(S, 1.0)
        dp = p.dp
        Tr, Sr, Ar, Kr = T / dp, S / dp, A / dp, K / dp       # the batch splits over DP attention ranks
        h = m.hidden_size
        out: dict[str, Any] = {}
        # attention projections (+ router): all layers
        out["attn_proj"] = m.num_layers * self._gemm(xp, Tr, self._attn_p, self._attn_w, self._rate["attn"], 2 * h)
        # attention core
        # Split the aggregates into decode and prefill parts (only MLA costs them differently): a step with
        # more tokens than sequences carries one prefill chunk (chunked prefill's usual shape); the decode
        # sequences each attend over about the mean KV length. Exact for pure decode and pure prefill steps.
        dec_seqs = S - (T > S)
        dec_frac = xp.clip(dec_seqs / S, 0.0, 1.0)
        full_L, sw_L = m.num_full_layers, m.num_sliding_layers
        core = self._attn_core(xp, Tr, Ar, Kr, dec_frac, Sr * dec_frac) * full_L
        if sw_L:
            w = float(m.sliding_window or 0)
            core = core + sw_L * self._attn_core(xp, Tr, xp.minimum(Ar, Tr * w), xp.minimum(Kr, Sr * w), dec_frac,
                                                 Sr * dec_frac)
        out["attn_core"] = core
        # feed-forward
        ffn = 0.0 * T
        if m.num_dense_layers:
            ffn = ffn + m.num_dense_layers * self._gemm(xp, Tr, self._dense_w / WEIGHT_BYTES[self.precision.get("dense_ffn", "bf16")],
                                                         self._dense_w, self._rate["dense_ffn"], h)
        if m.num_moe_layers:
            if m.num_shared_experts:
                sp = self._shared_w / WEIGHT_BYTES[self.precision.get("shared_experts", "bf16")]
                ffn = ffn + m.num_moe_layers * self._gemm(xp, Tr, sp, self._shared_w, self._rate["shared_experts"], h)
            ffn = ffn + m.num_moe_layers * self._moe(xp, T)
        out["ffn"] = ffn
        # LM head: logits for one position per sequence (the last of a prefill chunk, or the decode token)
        hp = self._head_w / WEIGHT_BYTES[self.precision.get("lm_head", "bf16")]
        out["lm_head"] = self._gemm(xp, Sr, hp, self._head_w, self._rate["lm_head"], m.vocab_size / p.tp)
        # collectives
        comm = 0.0 * T
        if p.tp > 1:
            comm = comm + 2 * m.num_layers * self._allreduce(Tr * h * ACT_BYTES, p.tp)
        if p.ep > 1 and p.dp > 1 and m.num_moe_layers:
            # DP attention + EP: each rank's tokens travel to their experts and back (dispatch + combine).
            # With dp == 1 every TP rank already holds every token; the expert outputs are combined by the
            # second all-reduce above, so there is no all-to-all.
            sent = Tr * m.experts_per_token * h
            comm = comm + m.num_moe_layers * (self._alltoall(sent * DISPATCH_BYTES, p.ep) + self._alltoall(sent * COMBINE_BYTES, p.ep))
        out["comm"] = comm
        out["overhead"] = 0.0 * T + (self._step_oh + self._layer_oh)
        return out

    def _attn_core(self, xp: Any, Tr: Any, Ar: Any, Kr: Any, dec_frac: Any, dec_tokens: Any) -> Any:
        """One layer's attention kernel on one rank: decode sequences on the absorbed path, the prefill chunk
        on the decompress-then-attend path. ``dec_frac`` = share of the KV read by decode sequences."""
        kv_bytes = Kr * self._kv_layer_rank
        if self.model.attention == "mla":
            a_dec = xp.minimum(Ar, Kr * dec_frac)              # a decode token attends over its own KV
            a_pre = Ar - a_dec
            k_pre = Kr - Kr * dec_frac
            dec_flops = a_dec * self._decode_flop_per_ctx + dec_tokens * self._absorb_flop_per_tok
            pre_flops = a_pre * self._prefill_flop_per_ctx + k_pre * self._prefill_flop_per_kv
            compute = dec_flops / self._attn_rate + pre_flops / self._prefill_attn_rate
        else:
            compute = Ar * self._decode_flop_per_ctx / self._attn_rate
        return xp.maximum(compute, kv_bytes / self._bw)

    def _moe(self, xp: Any, T: Any) -> Any:
        """One MoE layer's routed experts on the busiest rank."""
        m = self.model
        assignments = T * m.experts_per_token
        load = self._max_rank_load(xp, assignments)
        e_r = self._experts_per_rank
        touched = e_r * (1.0 - xp.exp(-load / e_r))           # distinct local experts that receive tokens
        params = m.expert_params / self._expert_split
        flops = 2.0 * load * params
        bytes_ = touched * self._expert_w + load * 2 * m.hidden_size * ACT_BYTES
        return xp.maximum(flops / self._rate["experts"], bytes_ / self._bw)

    def step_time(self, num_tokens: Any, num_seqs: Any, attn_ctx_tokens: Any, kv_tokens: Any) -> float | np.ndarray:
        """Seconds for one forward step of this instance (see module docstring for the argument meanings)."""
        b = self.breakdown(num_tokens, num_seqs, attn_ctx_tokens, kv_tokens)
        total = b["attn_proj"] + b["attn_core"] + b["ffn"] + b["lm_head"] + b["comm"] + b["overhead"]
        return float(total) if np.ndim(total) == 0 else total

    def utilization(self, num_tokens: Any, num_seqs: Any, attn_ctx_tokens: Any, kv_tokens: Any) -> tuple[Any, Any]:
        """(compute, memory) utilisation of peak over a step, for :class:`scoville.sim.power_model.PowerModel`."""
        m, hw = self.model, self.hw
        t = _as(self.step_time(num_tokens, num_seqs, attn_ctx_tokens, kv_tokens))
        T, S, A, K = _as(num_tokens), np.maximum(_as(num_seqs), 1.0), _as(attn_ctx_tokens), _as(kv_tokens)
        n = self.accelerators
        # layer-tokens of attention and of KV read: sliding-window layers stop at their window (as in breakdown)
        w = float(m.sliding_window or 0)
        attn_lt = A * m.num_full_layers + np.minimum(A, T * w) * m.num_sliding_layers
        kv_lt = K * m.num_full_layers + np.minimum(K, S * w) * m.num_sliding_layers
        flops = 2.0 * T * (m.active_params - m.group_params()["embed"]) + attn_lt * self._decode_flop_per_ctx * self.par.tp
        bytes_ = self.weight_bytes_per_accelerator * n + kv_lt * self._kv_layer_rank * self.par.tp
        cu = np.clip(flops / n / t / hw.peak_flops(COMPUTE_PRECISION[self.precision.get("experts", "bf16")]), 0, 1)
        mu = np.clip(bytes_ / n / t / hw.hbm_bytes_per_s, 0, 1)
        return cu, mu

    # -- memory ------------------------------------------------------------------------------------
    def activation_bytes_per_accelerator(self, max_num_batched_tokens: int = 8192) -> float:
        """Peak activation workspace: hidden-sized tensors for a full token budget plus the logits."""
        m = self.model
        toks = max_num_batched_tokens / self.par.dp
        return toks * m.hidden_size * ACT_BYTES * ACTIVATION_TENSORS / self.par.tp + 1024 * m.vocab_size * 4 / self.par.tp

    def kv_capacity_tokens(self, gpu_memory_utilization: float = 0.9, max_num_batched_tokens: int = 8192) -> int:
        """KV tokens that fit in this instance: capacity x utilisation - weights - activations - runtime
        reserve (NCCL buffers, CUDA context, allocator slack), summed over ranks, in full-attention tokens
        (``kv_bytes_per_token``). Sliding-window layers' ``kv_bytes_per_seq`` comes out of the same memory per
        running sequence; the engine reserves it at admission. 0 when the model does not fit."""
        hw = self.hw
        free = (hw.hbm_bytes * gpu_memory_utilization - self.weight_bytes_per_accelerator
                - self.activation_bytes_per_accelerator(max_num_batched_tokens) - hw.runtime_reserve_gb * 1e9)
        if free <= 0:
            return 0
        return int(free * self.accelerators // self.kv_bytes_per_token)

    @property
    def fits(self) -> bool:
        return self.kv_capacity_tokens() > 0

    def kv_transfer_time(self, tokens: int, scaleout: bool) -> float:
        """Prefill-to-decode KV copy for disaggregation: the unique KV bytes, sent in parallel by the
        instance's ranks over the scale-up links (same NVL domain) or their NICs."""
        hw = self.hw
        bw = (hw.scaleout_bandwidth_gbps * hw.eff("scaleout") if scaleout else hw.scaleup_bandwidth_gbps * hw.eff("scaleup")) * 1e9
        lat = (hw.scaleout_latency_us if scaleout else hw.scaleup_latency_us) * 1e-6
        nbytes = tokens * self._unique_kv_per_token
        return lat * self.model.num_layers + nbytes / (bw * self.accelerators)

    def describe(self) -> dict[str, Any]:
        """What this cost model believes, for manifests."""
        return {
            "hardware": self.hw.name, "model": self.model.name, "parallel": msgspec.to_builtins(self.par),
            "precision": self.precision, "kv_dtype": self.kv_dtype,
            "weight_gb_per_accelerator": self.weight_bytes_per_accelerator / 1e9,
            "kv_bytes_per_token": self.kv_bytes_per_token, "kv_bytes_per_seq": self.kv_bytes_per_seq,
            "efficiency": {k: self.hw.eff(k) for k in ("compute", "memory", "attention_compute", "scaleup", "scaleout",
                                                       "step_overhead_us", "kernel_overhead_us", "collective_us", "moe_imbalance")},
        }
