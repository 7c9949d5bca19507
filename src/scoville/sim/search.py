"""Configuration search: which deployment puts each point on the frontier.

InferenceX's curves are not one configuration swept over concurrency: each point of a published frontier
is the best of many deployments. The search builds the same envelope from the steady-state estimator
(``steady.py``), so thousands of candidate points cost milliseconds each:

1. **instance layouts** that fit the model: tensor parallel (``tpN``), TP attention with expert-parallel
   MoE (``tpN epN``) and data-parallel attention with wide expert parallelism (``dpN epN``) up to
   ``max_accelerators`` — across the whole NVL72 domain, or over several HGX nodes (the scale-out network
   then carries the collectives and the KV copies); TensorRT-LLM's wide-EP layouts also under its expert load
   balancer (``eplbN``, ``BALANCER_REPLICA_SLOTS``) where its measured tables time one;
2. **speculative decoding**: for models with native multi-token-prediction heads (DeepSeek-R1's MTP) 1-3
   draft tokens at the acceptance DeepSeek published; or the drafts and acceptance the user pins;
3. **unified** deployments per layout × drafts × token budget, evaluated over a dense per-instance
   concurrency grid;
4. **disaggregated** deployments: the best prefill layouts feeding each decode layout, with the prefill pool
   sized to the decode pool's completion rate (integer instances, utilisation kept below each of
   ``PREFILL_UTILISATION``), KV copied over NVLink when both pools fit one scale-up domain and over the
   NICs otherwise;
5. the **frontier** is the upper-right envelope in (interactivity, total tokens/s per accelerator) of every
   (candidate, concurrency); each frontier point keeps the configuration that produced it and the
   uncertainty of its estimate.

A layout whose decode curve is dominated everywhere by another's is dropped before the disaggregated
combinations are built; that bound is what keeps a full search of DeepSeek-R1 on GB300 under two seconds.
"""

from __future__ import annotations

import itertools
import math
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from scoville.catalog.hardware import Hardware, MissingRate, load_hardware
from scoville.catalog.models import ModelArch, load_model
from scoville.errors import UserError
from scoville.sim.acceptance import MTP_ACCEPTANCE, mtp_draft
from scoville.sim.config import (
    DisaggregationConfig,
    ParallelConfig,
    PoolConfig,
    SimConfig,
    SimConfigError,
    SpeculativeConfig,
)
from scoville.sim.cost import MissingKernelTables
from scoville.sim.engine import step_cost
from scoville.sim.frameworks import token_budget_flag
from scoville.sim.kernels.ops import serves_wide_ep
from scoville.sim.steady import INFERENCEX, Protocol, SteadyEstimate, estimate

# how busy a disaggregated deployment's prefill pool may run: with queueing headroom, or nearly full, as
# InferenceX's NVL72 recipes run theirs (DeepSeek-R1 FP4 8k/1k: 7 DEP4 prefill instances for 1229 users on one DEP16
# decode instance, ~100% busy by this model). The estimator's queueing then sets TTFT, and the frontier keeps a
# point only while the wait for a first token stays within its bound (``_Curve.valid``). At 80% alone the search
# fell short of that recipe priced by the same estimator
# (``test_the_search_is_never_far_below_a_deployment_inferencex_ran``); at 95% alone, of gpt-oss's GB200 1k/1k
# recipe, whose busier pools broke that bound (``bench/bench_search_coverage.py``).
PREFILL_UTILISATION = (0.8, 0.95)
# The loads, as shares of the users it was sized for, a confirmed disaggregated deployment is estimated at, as a
# benchmark sweeps a fixed deployment: its pools are sized for a whole number of users per decode instance, and at
# one to three users an instance the step to the next doubles throughput per accelerator while interactivity falls
# 5-15% (H200 DeepSeek-R1: 8 instances of one user 214 tok/s/user, of two 187), the stretch where InferenceX's
# recipes run 16 users over 9 instances (bench_search_coverage.py: 74% of recipe groups covered with the design
# load alone, 82% with these; an estimate of three loads costs about what one of one does)
CONFIRM_LOADS = (0.6, 0.8, 1.0)
# A kind's screened point below the confirmed envelope by less than this share is still confirmed: its deployment
# is also estimated at lighter loads (``CONFIRM_LOADS``), which reach interactivities its screened point does not
SCREEN_MARGIN = 0.9
CONC_GRID = np.unique(np.round(np.geomspace(1, 8192, 36)))
MAX_TP = 16                        # no framework's recipes split attention heads wider
MIN_KV_REQUESTS = 4                # an instance must hold at least this many full requests' KV to count as fitting
# TensorRT-LLM's wide-EP deployments run its expert load balancer (moe_config.load_balancer.num_slots): one slot per
# expert placed by observed load, or this many more holding replicas of the busiest experts. InferenceX's NVL72
# DeepSeek-R1 recipes run 256 slots at EP16 and 288 at EP32, as TensorRT-LLM's wide-EP examples do.
BALANCER_REPLICA_SLOTS = 32


@dataclass(frozen=True)
class SearchSpace:
    """What the search may vary."""

    max_accelerators: int | None = None          # None: the scale-up domain, or enough nodes to fit the model twice
    mtp: str = "auto"                            # auto: search 0-3 MTP drafts where the model has MTP heads; off
    # token budgets per attention rank, written into a config as the framework's flag (token_budget_flag)
    budgets: tuple[int, ...] = (4096, 8192, 16384)
    prefill_budget: int = 16384
    disaggregation: bool = True
    unified: bool = True                         # search unified instances (off: disaggregated pools only,
                                                 # as InferenceX's Dynamo results on NVL72 ran)
    max_pool_replicas: int = 16
    min_concurrency: int = 1
    max_concurrency: int = 8192

    def to_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class FrontierPoint:
    """One point of the predicted frontier and the deployment that produced it."""

    config: SimConfig
    concurrency: int                  # closed-loop users of the whole deployment
    interactivity: float              # tok/s/user = 1 / TPOT
    total_tput_per_accelerator: float
    output_tput_per_accelerator: float
    ttft: float                       # the measured window's mean (its opening burst included)
    ttft_median: float                # ... and its median, the TTFT p50 tables show
    tpot: float
    e2e: float
    request_rate: float               # completed requests/s of the deployment
    sigma: float                      # log-space uncertainty of TPOT and throughput
    sigma_ttft: float
    kv_overflow: bool                 # its users overflow an on-demand KV cache: the engine replays it better


@dataclass
class SearchResult:
    """The frontier (with configurations) and what the search looked at."""

    frontier: list[FrontierPoint]
    evaluated: int
    elapsed_s: float = 0.0
    layouts: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {
            "candidates": self.evaluated, "elapsed_s": round(self.elapsed_s, 3), "layouts": self.layouts,
            "frontier": [{"config": p.config.label(), "accelerators": p.config.accelerators,
                          "concurrency": p.concurrency, "interactivity": round(p.interactivity, 2),
                          "total_throughput_per_accelerator": round(p.total_tput_per_accelerator, 1)}
                         for p in self.frontier],
        }


# -- candidate generation ------------------------------------------------------------------------------
def _powers_of_two(limit: int) -> list[int]:
    return [2 ** i for i in range(int(math.log2(max(limit, 1))) + 1)]


def default_max_accelerators(hw: Hardware, model: ModelArch, base: SimConfig) -> int:
    """The scale-up domain; when the model needs more than one domain, twice the smallest count it fits on."""
    return _default_max(base.model_copy(update={"speculative": None, "disaggregation": None}), hw.scaleup_domain)


@lru_cache(maxsize=64)
def _default_max(base: SimConfig, domain: int) -> int:
    model, hw = load_model(base.model), load_hardware(base.hardware)
    for n in _powers_of_two(512):
        if any(_fits(base, p, 1) for p in _layouts_of(n, model, max(n, hw.scaleup_domain))):
            return domain if n <= domain else 2 * n
    raise SimConfigError(f"{model.name} does not fit on up to 512 × {hw.name}; check the model and --precision")


def _layouts_of(n: int, model: ModelArch, domain: int) -> list[ParallelConfig]:
    """Instance layouts on ``n`` accelerators. TP at most 16 ways: inside one scale-up domain, or over two 8-GPU
    nodes, as InferenceX's H100 DeepSeek-R1 recipes run it (SGLang tp16; TensorRT-LLM's tep16 decode, for its
    fastest per-user curve ends)."""
    out = []
    tp_ok = model.num_heads % n == 0 and (n <= min(domain, MAX_TP) or n == 2 * domain <= MAX_TP)
    if tp_ok:
        out.append(ParallelConfig(tp=n))
    if model.num_experts and 1 < n <= model.num_experts and model.num_experts % n == 0:
        if tp_ok:
            out.append(ParallelConfig(tp=n, ep=n))
        out.append(ParallelConfig(tp=1, dp=n, ep=n))
    return out


def _load_balanced(framework: str, par: ParallelConfig, model: ModelArch) -> list[ParallelConfig]:
    """A wide-EP layout under TensorRT-LLM's expert load balancer: one slot per expert, and with
    ``BALANCER_REPLICA_SLOTS`` replicas where they divide over the ranks. Priced from its measured WideEP tables
    only, so a slot count no table times does not fit and drops out."""
    if not serves_wide_ep(framework, par.dp, par.ep):
        return []
    slots = (model.num_experts, model.num_experts + BALANCER_REPLICA_SLOTS)
    return [par.model_copy(update={"expert_slots": s}) for s in slots if s % par.ep == 0]


def _fits(base: SimConfig, par: ParallelConfig, min_requests: int, tokens_per_request: float = 0.0) -> bool:
    try:
        cost = step_cost(base, par)
    except (MissingKernelTables, MissingRate):
        raise                      # no layout would have them: say so, not "does not fit"
    except UserError:
        return False
    cap = cost.kv_capacity_tokens(base.gpu_memory_utilization, base.max_num_batched_tokens)
    return cap > 0 and cap >= min_requests * tokens_per_request


def instance_layouts(base: SimConfig, space: SearchSpace, tokens_per_request: float) -> list[ParallelConfig]:
    """Every layout of one instance that fits the model with room for a few requests' KV, smallest first."""
    hw, model = load_hardware(base.hardware), load_model(base.model)
    limit = space.max_accelerators or default_max_accelerators(hw, model, base)
    out = [q for n in _powers_of_two(limit) for p in _layouts_of(n, model, hw.scaleup_domain)
           for q in (p, *_load_balanced(base.framework, p, model))
           if _fits(base, q, MIN_KV_REQUESTS, tokens_per_request)]
    if not out:
        raise SimConfigError(f"{model.name} does not fit on up to {limit} × {hw.name} in any layout "
                             f"(tp, tp+ep, dp+ep); raise --max-accelerators or use a smaller --precision")
    return out


def draft_options(base: SimConfig, model: ModelArch, space: SearchSpace) -> list[SpeculativeConfig | None]:
    """No drafts, plus what the search may try: MTP 1-3 on models with MTP heads, or the user's pinned drafts."""
    if base.speculative is not None:
        return [base.speculative]
    if space.mtp == "off" or not model.mtp_layers:
        return [None]
    return [None] + [mtp_draft(k) for k in MTP_ACCEPTANCE]


# -- the envelope ----------------------------------------------------------------------------------------
@dataclass
class _Curve:
    """One candidate's estimates over the concurrency grid."""

    config: SimConfig
    est: SteadyEstimate

    def valid(self) -> np.ndarray:
        """Points a benchmark would report: finite, and not queue-bound (waiting for a first token takes at
        most 30% of a request's life; past that, more users only lengthen the queue)."""
        e = self.est
        return (np.isfinite(e.tpot) & (e.tpot > 0) & np.isfinite(e.request_rate) & (e.request_rate > 0)
                & (e.ttft <= 0.3 * e.e2e))


def pareto(xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """Indices of points not dominated in (x, y), both maximised, sorted by x descending."""
    order = np.lexsort((-ys, -xs))
    keep, best = [], -np.inf
    for i in order:
        if ys[i] > best:
            keep.append(i)
            best = ys[i]
    return np.asarray(keep, dtype=int)


def _concurrency(space: SearchSpace) -> np.ndarray:
    g = CONC_GRID[(space.min_concurrency <= CONC_GRID) & (space.max_concurrency >= CONC_GRID)]
    return g if g.size else np.array([float(space.min_concurrency)])


def search(base: SimConfig, isl: float, osl: float, *, space: SearchSpace = SearchSpace(),
           protocol: Protocol = INFERENCEX, osl_spread: float = 1.0, points: int = 16,
           progress: Callable[[int, int], None] | None = None) -> SearchResult:
    """Search deployments of ``base``'s model on ``base``'s hardware for mean lengths ``isl``/``osl``."""
    t0 = time.perf_counter()
    if not (space.unified or space.disaggregation):
        raise SimConfigError("nothing to search: unified instances and disaggregated pools are both off; "
                             "drop --no-unified or --no-disagg")
    model = load_model(base.model)
    layouts = instance_layouts(base, space, isl + osl)
    drafts = draft_options(base, model, space)
    conc = _concurrency(space)
    decode = _decode_curves(base, layouts, drafts, isl, osl, conc)
    promising = _near_envelope(decode, isl, osl)
    unified = [SimConfig.model_validate({**base.model_dump(), "parallel": p.model_dump(), "replicas": 1,
                                         "disaggregation": None,
                                         "speculative": d.model_dump() if d else None,
                                         "max_num_batched_tokens": token_budget_flag(base.framework, b, p.dp),
                                         "max_num_seqs": int(conc[-1])})
               for (p, d) in promising for b in space.budgets] if space.unified else []
    curves: list[_Curve] = []
    for i, cfg in enumerate(unified):
        curves.append(_Curve(cfg, estimate(cfg, isl, osl, conc, protocol, osl_spread)))
        if progress:
            progress(i + 1, len(unified))
    if space.disaggregation:
        curves += _disaggregated(base, layouts, promising, decode, isl, osl, conc, space, protocol, osl_spread)
    frontier = _envelope(curves, points)
    return SearchResult(frontier=frontier, evaluated=len(curves) + len(decode), elapsed_s=time.perf_counter() - t0,
                        layouts=[SimConfig.model_validate({**base.model_dump(), "parallel": p.model_dump()}).label()
                                 .split(" x")[0] for p in layouts])


def frontier_of(candidates: list[tuple[SimConfig, np.ndarray]], isl: float, osl: float, *,
                protocol: Protocol = INFERENCEX, osl_spread: float = 1.0, points: int = 16,
                progress: Callable[[int, int], None] | None = None, layouts: list[str] | None = None) -> SearchResult:
    """The frontier of given deployments, each at its own concurrencies, instead of a search's (InferenceX's
    recipes: ``recipes.recipe_frontier``). A deployment that does not fit drops out, as a recipe that could
    not start has no runs."""
    t0 = time.perf_counter()
    curves: list[_Curve] = []
    for i, (cfg, conc) in enumerate(candidates):
        try:
            curves.append(_Curve(cfg, estimate(cfg, isl, osl, conc, protocol, osl_spread)))
        except (MissingKernelTables, MissingRate):
            raise                      # no deployment of this system would have them: say so
        except UserError:
            pass
        if progress:
            progress(i + 1, len(candidates))
    return SearchResult(frontier=_envelope(curves, points), evaluated=len(curves),
                        elapsed_s=time.perf_counter() - t0, layouts=layouts or [])


_Layout = tuple[ParallelConfig, "SpeculativeConfig | None"]


def _decode_curves(base: SimConfig, layouts: list[ParallelConfig], drafts: list[SpeculativeConfig | None],
                   isl: float, osl: float, conc: np.ndarray) -> dict[_Layout, tuple[np.ndarray, np.ndarray]]:
    """(TPOT, sequences) of pure decode for every layout × drafts over the batch grid."""
    out = {}
    for p in layouts:
        for d in drafts:
            probe = SimConfig.model_validate({**base.model_dump(), "parallel": p.model_dump(),
                                              "speculative": d.model_dump() if d else None})
            out[(p, d)] = _decode_curve(probe, isl, osl, conc)
    return out


def _near_envelope(decode: dict[_Layout, tuple[np.ndarray, np.ndarray]], isl: float, osl: float,
                   slack: float = 0.8) -> list[_Layout]:
    """Layouts whose decode-only curve reaches within ``slack`` of the best decode throughput per accelerator
    at some interactivity: a layout dominated everywhere in pure decode never wins once prefill is added."""
    pts = []
    for key, (tpot, n) in decode.items():
        tput = n * (isl + osl) / ((osl - 1.0) * tpot) / key[0].accelerators
        pts += [(1.0 / t, y, key) for t, y in zip(tpot, tput, strict=True)]
    xs = np.array([x for x, _, _ in pts])
    ys = np.array([y for _, y, _ in pts])
    front = pareto(xs, ys)
    fx, fy = xs[front][::-1], ys[front][::-1]                   # ascending interactivity
    best = np.interp(xs, fx, fy, right=0.0)                     # envelope throughput at each point's interactivity
    keep = {pts[i][2] for i in np.flatnonzero(ys >= slack * best)}
    return [k for k in decode if k in keep]


def _disaggregated(base: SimConfig, layouts: list[ParallelConfig], promising: list[_Layout],
                   decode: dict[_Layout, tuple[np.ndarray, np.ndarray]], isl: float, osl: float, conc: np.ndarray,
                   space: SearchSpace, protocol: Protocol, osl_spread: float) -> list[_Curve]:
    """Disaggregated candidates, screened in closed form and confirmed with the estimator.

    For each promising decode layout × drafts × decode pool size, the decode pool's completion rate at
    every per-instance batch fixes the prefill pool (integer instances at most as busy as each of
    ``PREFILL_UTILISATION``, for each of the two most efficient prefill layouts); throughput per accelerator and
    interactivity follow directly. Only screened points on an envelope are re-estimated exactly (queueing, KV
    copy, the opening burst), each at its design load and lighter ones (``CONFIRM_LOADS``): each prefill sizing's
    envelope, then each kind of decode pool's (plain or drafted) where it comes near what the first confirmed.
    """
    hw = load_hardware(base.hardware)
    limit = space.max_accelerators or default_max_accelerators(hw, load_model(base.model), base)
    prefill = _best_prefill_layouts(base, layouts, isl, space.prefill_budget)
    out_len = max(osl, 2.0)
    screened: dict[tuple[float, bool], list[tuple[float, float, tuple]]] = defaultdict(list)
    for dec, d in promising:
        tpot, n = decode[(dec, d)]
        rate = n / ((out_len - 1.0) * tpot)                       # completions/s per decode instance
        for pre, t_prompt in prefill:
            for n_d, utilisation in itertools.product((1, 2, 4, 8, 16), PREFILL_UTILISATION):
                n_p = np.maximum(1, np.ceil(n_d * rate * t_prompt / utilisation))
                gpus = n_p * pre.accelerators + n_d * dec.accelerators
                ok = ((gpus <= limit) & (n_p <= space.max_pool_replicas) & (n_d <= space.max_pool_replicas)
                      & (n * n_d * 1.05 <= space.max_concurrency))
                tput = n_d * rate * (isl + osl) / gpus
                screened[(utilisation, d is None)] += [
                    (1.0 / tpot[j], tput[j], (pre, int(n_p[j]), dec, n_d, d, n[j], int(gpus[j])))
                    for j in np.flatnonzero(ok)]
    confirmed: dict[tuple, _Curve] = {}

    def confirm(key: tuple) -> None:
        if key in confirmed:                    # both sizings, or both passes, reach the same pools
            return
        pre, n_p, dec, n_d, d, users, gpus = key
        cfg = _disagg_config(base, pre, n_p, dec, n_d, d, max(int(math.ceil(users)), 1), space, hw, gpus)
        # decoding users plus those in prefill, and fewer (``CONFIRM_LOADS``)
        c_total = np.unique(np.maximum(1.0, np.round(users * n_d * 1.05 * np.array(CONFIRM_LOADS))))
        confirmed[key] = _Curve(cfg, estimate(cfg, isl, osl, c_total, protocol, osl_spread))

    # each sizing's own envelope is confirmed: the busier pool always screens richer, but where its queueing
    # breaks the bound on the wait for a first token the roomier one must still be there
    for utilisation in PREFILL_UTILISATION:
        points = screened[(utilisation, True)] + screened[(utilisation, False)]
        for k in _screened_front(points):
            confirm(points[k][2])
    # then each kind of decode pool's, plain and drafted, where its screen comes within SCREEN_MARGIN of what the
    # first pass confirmed: a drafted pool's screened lead can vanish once its prefill queue is priced (GB200 FP8
    # SGLang 1k/1k: MTP1 pools screened above the plain DEP16/DEP32 ones from 35 to 60 tok/s/user and came out over
    # the wait bound, leaving 40 tok/s/user to a point 12% poorer than the plain pool's); a screen is about the most its
    # pools reach at their design load, so one well below the confirmed envelope is not worth an estimate
    reach = _confirmed_reach(list(confirmed.values()))
    for points in screened.values():
        for k in _screened_front(points):
            x, y, key = points[k]
            if y > SCREEN_MARGIN * reach(x):
                confirm(key)
    return list(confirmed.values())


def _screened_front(points: list[tuple[float, float, tuple]]) -> np.ndarray:
    """Indices of the screened points (interactivity, throughput per accelerator, pools) on their envelope."""
    if not points:
        return np.array([], dtype=int)
    return pareto(np.array([x for x, _, _ in points]), np.array([y for _, y, _ in points]))


def _confirmed_reach(curves: list[_Curve]) -> Callable[[float], float]:
    """The most throughput per accelerator any of ``curves``' reportable points reaches at least this fast."""
    reportable = [(c.est, c.valid()) for c in curves]
    xs = np.concatenate([e.interactivity[ok] for e, ok in reportable]) if curves else np.array([])
    ys = np.concatenate([e.total_tput_per_accelerator[ok] for e, ok in reportable]) if curves else np.array([])
    return lambda x: float(ys[xs >= x].max(initial=0.0))


def _decode_curve(config: SimConfig, isl: float, osl: float, conc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(TPOT, sequences) of pure decode steps of one instance at each batch size of the grid (KV-bounded)."""
    cost = step_cost(config, config.parallel)
    AL = config.speculative.mean_acceptance_length if config.speculative else 1.0
    q = 1 + (config.speculative.num_draft_tokens if config.speculative else 0)
    cap = cost.kv_capacity_tokens(config.gpu_memory_utilization, config.max_num_batched_tokens)
    n = np.minimum(conc, max(cap // (isl + osl), 1.0))
    ctx = isl + osl / 2.0
    t = np.asarray(cost.step_time(n * q, n, n * q * ctx, n * ctx, n, n * ctx))
    return t / AL, n


def _best_prefill_layouts(base: SimConfig, layouts: list[ParallelConfig], isl: float,
                          rank_budget: int) -> list[tuple[ParallelConfig, float]]:
    """The two prefill layouts with the most prompts per accelerator-second: (layout, seconds per prompt
    per instance). Not under the expert load balancer: InferenceX's recipes set it on their decode workers only,
    and its variants of one layout, a hair apart, would crowd every other layout out of the two."""
    scored = []
    for p in (p for p in layouts if not p.expert_slots):
        cost = step_cost(base, p)
        per = p.dp * max(1, int(rank_budget // isl))     # whole prompts (or one chunk) on each attention rank
        chunk = min(isl, rank_budget)
        steps = math.ceil(isl / chunk)
        t = steps * float(cost.step_time(per * chunk, per, per * chunk * (chunk + 1) / 2, per * chunk, 0, 0)) / per
        scored.append((t * p.accelerators, p, t))
    scored.sort(key=lambda x: x[0])
    return [(p, t) for _, p, t in scored[:2]]


def _disagg_config(base: SimConfig, pre: ParallelConfig, n_p: int, dec: ParallelConfig, n_d: int,
                   draft: SpeculativeConfig | None, seqs: int, space: SearchSpace, hw: Hardware,
                   gpus: int) -> SimConfig:
    return SimConfig.model_validate({
        **base.model_dump(), "parallel": dec.model_dump(), "replicas": 1,
        "speculative": draft.model_dump() if draft else None,
        "disaggregation": DisaggregationConfig(
            prefill=PoolConfig(parallel=pre, replicas=n_p, max_num_batched_tokens=token_budget_flag(
                base.framework, space.prefill_budget, pre.dp)),
            decode=PoolConfig(parallel=dec, replicas=n_d, max_num_seqs=max(seqs, 1)),
            kv_transfer="scaleup" if gpus <= hw.scaleup_domain else "scaleout").model_dump(),
    })


def _envelope(curves: list[_Curve], points: int) -> list[FrontierPoint]:
    """The upper-right envelope of every candidate point, thinned to ``points`` spread over interactivity."""
    rows: list[tuple[_Curve, int]] = []
    xs, ys = [], []
    for cv in curves:
        ok = cv.valid()
        for j in np.flatnonzero(ok):
            rows.append((cv, int(j)))
            xs.append(cv.est.interactivity[j])
            ys.append(cv.est.total_tput_per_accelerator[j])
    if not rows:
        return []
    keep = pareto(np.asarray(xs), np.asarray(ys))
    chosen = _thin(np.log(np.asarray(xs)[keep]), points)
    out = []
    for k in keep[chosen]:
        cv, j = rows[k]
        e = cv.est
        out.append(FrontierPoint(config=cv.config, concurrency=int(round(e.concurrency[j])),
                                 interactivity=float(e.interactivity[j]),
                                 total_tput_per_accelerator=float(e.total_tput_per_accelerator[j]),
                                 output_tput_per_accelerator=float(e.output_tput_per_accelerator[j]),
                                 ttft=float(e.ttft[j]), ttft_median=float(e.ttft_median[j]),
                                 tpot=float(e.tpot[j]), e2e=float(e.e2e[j]),
                                 request_rate=float(e.request_rate[j]),
                                 sigma=float(e.sigma[j]), sigma_ttft=float(e.sigma_ttft[j]),
                                 kv_overflow=bool(e.kv_overflow[j])))
    out.sort(key=lambda p: -p.interactivity)
    return out


def _thin(logx: np.ndarray, points: int) -> np.ndarray:
    """Indices of at most ``points`` entries spread evenly over log interactivity (both ends kept)."""
    n = logx.size
    if n <= points:
        return np.arange(n)
    targets = np.linspace(logx.max(), logx.min(), points)
    picked = sorted({int(np.argmin(np.abs(logx - t))) for t in targets})
    return np.asarray(picked, dtype=int)
