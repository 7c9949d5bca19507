"""Steady-state estimate of a deployment under a closed-loop load: the fast path of the simulator.

The discrete-event engine (``engine.py``) replays every request; that is what a run directory is made
of, but it costs ~0.5 ms per request, far too much to rank thousands of deployments. Under InferenceX's
closed loop (``C`` users, each sending its next request when the last one ends) a deployment settles
into a steady state that a handful of equations describe, using the same step-cost model:

**Unified instance** (chunked prefill mixed into decode, vLLM v1's scheduler), ``c`` users per instance,
``n`` of them decoding, prompts of ``P`` tokens, ``O`` output tokens, ``AL`` tokens per decode step
(speculative acceptance length, 1 without drafts):

* a step feeds the ``n`` decodes and, when a prompt waits, a chunk of ``q = min(P, budget - n)`` tokens;
  prompt tokens must keep pace with completions, ``a = n·AL·P / ((O-1)·q)`` chunks a step; the prompts that
  arrive between two polls (every step; every N decode steps under SGLang's poll) start together at the next,
  as many whole ones as the budget holds (``k``, a zero-truncated Poisson mean of the ``N·a`` arrivals:
  ``_packed``), each waiting for those ahead of it (``_behind_in_batch``), so a fraction ``f = a / k`` of steps
  carries prompts (``a >= k`` at the most a step holds: this many decoders cannot be fed);
* mean step ``s = (1-f)·t_decode(n) + f·t_mixed(n)``; completions ``λ = n·AL / ((O-1)·s)``;
* a prompt is served in ``ceil(P/q)`` mixed steps after waiting for the prefill slot
  (M/D/1 wait at utilisation ``f``) and, at a busy instance, for the step in progress to end and, under an
  asynchronous scheduler (``async_scheduling``), the one it formed before the prompt came (``_step_wait``);
  Little's law on the ``c - n`` users not decoding gives their time
  to first token, and ``n`` is where the two agree (bisection; ``h(n)`` falls as ``n`` grows).
* with data-parallel attention over ``dp`` ranks, each rank feeds ``n/dp`` decodes and chunks on its own
  (``q = min(P, rank budget - n/dp)``, a share ``p = f/dp`` of its steps): a step carries a chunk when any rank
  has one, ``1 - (1-p)^dp`` of steps, with ``dp·p`` over that of them on distinct ranks, and costs what the
  busiest rank does (``StepCost.breakdown``); at ``dp = 1`` this is the line above.

**Disaggregated**: decode instances run pure decode steps over ``N/replicas`` sequences; prefill instances
start every waiting prompt each step, up to their token budget, so a busy one's step carries the prompts that
arrived during the last (``k = λ t(k)``, ``_prefill_step``), with an M/D/1 wait at utilisation ``λ / capacity``
as the budget fills; time to first token adds the KV copy. The same bisection on ``N`` (users decoding) closes the loop.

Both add the front end's time per request (``request_overhead_ms``, HTTP and tokenisation), served one request at
a time as in the engine: its service time plus an M/D/1 wait at the request rate, inside the loop (a saturated
front end caps throughput); the opening burst's ``C`` prompts leave it one service time apart.

Limits hold as in the engine: ``max_num_seqs`` and the KV capacity bound ``n`` (``kv_bound``: whole lengths under
TensorRT-LLM's admission, mean decoding lengths under vLLM's and SGLang's); beyond them users wait. A unified
scheduler that polls for new requests only every ``scheduler_recv_interval`` decode steps (SGLang) adds half that
interval of decode steps to a request's wait when it finds the instance busy. TensorRT-LLM's batch waiting
(``batch_wait``) holds a prompt for up to ``iters`` decode steps so that the prompts arriving meanwhile start with
it (``_batch_wait``); its attention-DP balance (``attention_dp_balance``) holds prompts until every attention rank
has one or its counter times out (``_adp_hold``). Disaggregated, the first token comes with the KV copy (as in the
engine): a decode instance's poll only delays the tokens after it, and a prefill instance has no decodes to hold
prompts behind.

**What a benchmark measures is not only the steady state.** InferenceX (``vllm bench serve``-style) runs
``10·C`` requests per point after a separate warm-up, so the measured window opens with all ``C`` prompts
arriving at once: the first wave queues for prefill (its time to first token grows with ``C``) and delays
everything behind it, and the window closes while the last requests drain. ``Protocol`` adds both effects
to the steady state; without them TTFT at high concurrency comes out several times too low (checked on the
public validation set). ``Protocol.steady()`` gives the bare steady state.
``tests/sim/test_steady.py`` checks these estimates against the discrete-event engine on pinned configs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from scoville.sim.config import AttentionDpBalanceConfig, BatchWaitConfig, SimConfig
from scoville.sim.engine import step_cost
from scoville.stats import Z90


@dataclass(frozen=True)
class Protocol:
    """How the measured window is taken: ``requests_per_user × C`` requests, opening with a burst of ``C``."""

    requests_per_user: float = 10.0
    burst_start: bool = True

    @classmethod
    def steady(cls) -> Protocol:
        return cls(requests_per_user=math.inf, burst_start=False)


INFERENCEX = Protocol()
N_GRID = 48          # decoder counts tabulated per instance shape
BISECT = 16          # bisection steps (n bracketed to 2^-16 of its range), then one false-position step
# Log-space uncertainty of a time to first token where the users' whole lengths overflow the KV cache of a scheduler
# that admits on demand (``kv_overflows``): the engine preempts there, and how its users' wait splits between the
# first token and the tokens after a preemption is beyond this algebra. The RMS of log(estimator / engine TTFT) at
# such points of ``bench/bench_estimator_vs_engine.py`` (vLLM, Llama-3.1-8B on one H100, 8k/1k and 1k/8k at 64 and
# 128 users; 2026-12-07): 0.97, an 80% band of ×/÷ 3.5.
KV_OVERFLOW_TTFT_SIGMA = 0.97


@dataclass(frozen=True)
class SteadyEstimate:
    """Per-concurrency steady-state figures of one deployment (arrays aligned with ``concurrency``)."""

    concurrency: np.ndarray
    ttft: np.ndarray                 # s: the window's mean (its opening burst included)
    ttft_median: np.ndarray          # s: the window's median, the figure a p50 reads (``_measured``)
    tpot: np.ndarray                 # s per output token after the first
    e2e: np.ndarray                  # s
    request_rate: np.ndarray         # completed requests/s of the whole deployment
    decoding: np.ndarray             # users decoding (whole deployment)
    sigma: np.ndarray                # log-space uncertainty of tpot (and of throughput)
    sigma_ttft: np.ndarray
    kv_overflow: np.ndarray          # users overflow an on-demand KV cache at their whole lengths (``kv_overflows``)
    accelerators: int
    isl: float
    osl: float

    @property
    def interactivity(self) -> np.ndarray:
        return 1.0 / self.tpot

    @property
    def total_tput_per_accelerator(self) -> np.ndarray:
        return self.request_rate * (self.isl + self.osl) / self.accelerators

    @property
    def output_tput_per_accelerator(self) -> np.ndarray:
        return self.request_rate * self.osl / self.accelerators


def _acceptance_length(config: SimConfig) -> float:
    return config.speculative.mean_acceptance_length if config.speculative else 1.0


def _decode_sigma(step_sigma: np.ndarray, config: SimConfig) -> np.ndarray:
    """Log-space uncertainty of a TPOT (step time over acceptance length) and of the throughput it sets: the
    step's kernels and the drafts' acceptance (``SpeculativeConfig.acceptance_sigma``) err independently, so
    their spreads add in quadrature."""
    return np.hypot(step_sigma, config.speculative.acceptance_sigma if config.speculative else 0.0)


def _interp(grid: np.ndarray, values: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Log-log interpolation of a positive tabulated function (linear beyond the ends)."""
    lx = np.log(np.maximum(x, 1e-12))
    lg = np.log(grid)
    out = np.interp(lx, lg, np.log(values))
    hi = lx > lg[-1]
    if hi.any():
        slope = (np.log(values[-1]) - np.log(values[-2])) / (lg[-1] - lg[-2]) if grid.size > 1 else 1.0
        out = np.where(hi, np.log(values[-1]) + slope * (lx - lg[-1]), out)
    return np.exp(out)


def _bisect(h: Any, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Root of a decreasing ``h`` per element in [lo, hi]; clamps to an end where h keeps its sign.

    ``BISECT`` halvings bracket the root, then one false-position step inside the last bracket (from the h
    values the halvings already computed) lands near it: h is smooth between the tabulated step times, so the
    line is as close as a dozen more halvings would get, at no further call; where h jumps (a queue that cannot
    drain) the answer still lies inside the bracket. The estimator is mostly calls of h.
    """
    lo, hi = lo.astype(np.float64).copy(), hi.astype(np.float64).copy()
    h_lo, h_hi = np.full_like(lo, np.nan), np.full_like(hi, np.nan)
    for _ in range(BISECT):
        mid = 0.5 * (lo + hi)
        at_mid = h(mid)
        pos = at_mid > 0
        lo, h_lo = np.where(pos, mid, lo), np.where(pos, at_mid, h_lo)
        hi, h_hi = np.where(pos, hi, mid), np.where(pos, h_hi, at_mid)
    line = np.isfinite(h_lo) & np.isfinite(h_hi)        # both ends met: h_lo > 0 >= h_hi
    share = np.where(line, h_lo, 0.5) / np.where(line, h_lo - h_hi, 1.0)
    return lo + (hi - lo) * share


def _mdl_wait(service: float | np.ndarray, rho: np.ndarray) -> np.ndarray:
    """Mean M/D/1 queueing delay for a server busy ``rho`` of the time with ``service`` per job."""
    r = np.clip(rho, 0.0, 0.999)
    return service * r / (2.0 * (1.0 - r))


def _front_end(request_s: float, arrivals_per_s: np.ndarray, users: np.ndarray) -> np.ndarray:
    """Time a request spends in its instance's front end (HTTP, tokenisation), served one request at a time as
    in the engine: its own service time plus the M/D/1 wait behind the others arriving at ``arrivals_per_s``,
    at most the other ``users - 1`` requests of a closed loop (one user never queues behind itself)."""
    wait = _mdl_wait(np.full_like(arrivals_per_s, request_s), arrivals_per_s * request_s)
    return request_s + np.minimum(wait, np.maximum(users - 1.0, 0.0) * request_s)


def _ttft_sigma(kernel_sigma: Any, front_s: np.ndarray, ttft_s: np.ndarray, host_sigma: float) -> np.ndarray:
    """Log-space uncertainty of a time to first token: the share spent in the front end carries the framework's
    host-cost uncertainty (``FrameworkCosts.sigma``: ``request_overhead_ms`` is a prior or a fit), the rest
    (prefill steps and the queueing they set) the kernels'; summed as fully correlated, as a step's are."""
    share = np.clip(front_s / np.maximum(ttft_s, 1e-12), 0.0, 1.0)
    return (1.0 - share) * kernel_sigma + share * host_sigma


def _burst_front_end(request_s: float, c: np.ndarray) -> np.ndarray:
    """Mean time the ``c`` simultaneous prompts of a burst spend in one front end: the i-th leaves it after i
    service times."""
    return request_s * (c + 1.0) / 2.0


def _measured(c: np.ndarray, ttft_ss: np.ndarray, e2e_ss: np.ndarray, burst_ttft: np.ndarray, protocol: Protocol,
              osl_spread: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean TTFT, median TTFT, window duration ÷ steady duration) over a window opening with a burst of ``c``
    prompts.

    The first ``c`` requests see ``burst_ttft`` instead of the steady one and delay the window by the
    difference; the window ends when the longest of the last ``c`` requests (``osl_spread`` × the mean) ends.
    The burst is one request in ``requests_per_user``: it lifts the mean, while the median stays the steady
    TTFT as long as the burst is the smaller part of the window. The engine's replay of InferenceX's protocol
    reads the same: on seven of InferenceX's DeepSeek-R1 deployments (H200, B200, MI355X; 64-256 users) a mean
    1.1-3.7x its median and the median within 25% of the steady figure (``tests/sim/test_steady.py`` holds one).
    InferenceX's dashboard and scoville's tables show the median.
    """
    if not protocol.burst_start or not math.isfinite(protocol.requests_per_user):
        return ttft_ss, ttft_ss, np.ones_like(ttft_ss)
    k = protocol.requests_per_user
    burst = np.maximum(burst_ttft, ttft_ss)
    ttft = (burst + (k - 1.0) * ttft_ss) / k
    median = ttft_ss if k >= 2.0 else burst
    stretch = ((k - 1.0) * e2e_ss + osl_spread * e2e_ss + (burst - ttft_ss)) / (k * e2e_ss)
    return ttft, median, np.maximum(stretch, 1.0)


def _finds_busy(users: np.ndarray) -> np.ndarray:
    """Whether a request finds its instance busy with others' sequences: not with one user per instance (its own
    request was the only one); linear up to two, as ``users`` per instance is a mean."""
    return np.clip(users - 1.0, 0.0, 1.0)


def _poll_wait_steps(config: SimConfig, users: np.ndarray) -> np.ndarray:
    """Mean decode steps a request waits for the scheduler's next poll beyond the step it arrives in: polls every
    ``scheduler_recv_interval`` decode steps, arrivals spread evenly in between, so (N - 1) / 2; none when the
    request finds the instance idle (``_finds_busy``)."""
    return (config.scheduler_recv_interval - 1) / 2.0 * _finds_busy(users)


def _step_wait(td: np.ndarray, tm: np.ndarray, mixed: np.ndarray, users: np.ndarray, ahead: bool) -> np.ndarray:
    """Mean time a request arriving at a busy instance waits for a step to take it in: the rest of the step in
    progress (an arrival lands in a step as likely as the step is long: ``E[t^2] / (2 E[t])`` over the decode steps,
    ``td``, and the ``mixed`` share of steps with a prompt chunk, ``tm``) and, when the scheduler runs a step ahead,
    the whole next step, formed before the request came. Nothing when the instance is idle (``_finds_busy``)."""
    mean = (1.0 - mixed) * td + mixed * tm
    rest = ((1.0 - mixed) * td**2 + mixed * tm**2) / (2.0 * mean)
    return (rest + (mean if ahead else 0.0)) * _finds_busy(users)


def _batch_wait(wait: BatchWaitConfig, budget: float, users: np.ndarray, decoding: np.ndarray,
                arrivals_per_step: np.ndarray, P: float) -> tuple[np.ndarray, np.ndarray]:
    """TensorRT-LLM's batch waiting in the steady state: (mean steps a prompt is held, mean prompts released with
    it). A hold opens when a prompt finds none held and lasts ``W`` steps: ``wait.iters``, or fewer when the held
    prompts (``arrivals_per_step`` join it each step) and the ``decoding`` sequences reach the token threshold
    first. Its first prompt waits ``W`` steps and the ``a·W`` that join it ``W/2`` on average. No hold with one
    user per instance (nothing else decodes)."""
    a = np.maximum(arrivals_per_step, 1e-12)
    to_threshold = ((wait.max_tokens_ratio * budget - decoding) / P - 1.0) / a
    W = np.clip(to_threshold, 0.0, float(wait.iters)) * _finds_busy(users)
    return W * (1.0 + a * W / 2.0) / (1.0 + a * W), a * W


def _adp_hold(balance: AttentionDpBalanceConfig, dp: int,
              arrivals_per_step: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """TensorRT-LLM's attention-DP balance in the steady state while every rank decodes: (mean steps a prompt is
    held beyond the step it would start in, mean prompts released with it beyond those arriving in one step).

    Its counter restarts at every release, so releases cut time into cycles. Arrivals reach each of the ``dp``
    ranks at ``a / dp`` a step (a request goes to the rank with the fewest, which is where one just finished:
    random over the ranks), so every rank has a prompt by step ``t`` with probability ``(1 - exp(-a t / dp))^dp``;
    a cycle lasts that first covering step plus ``batching_wait_iters``, or ``timeout_iters`` if none comes
    first. A prompt lands in a cycle as likely as its length and waits the rest of it: ``E[L^2] / (2 E[L])``
    steps, with ``a E[L^2] / E[L]`` others; without the balance a cycle is one step. (Nothing is held while
    some rank has no sequence decoding: ``_ranks_decode``.)"""
    T, wait = balance.timeout_iters, balance.batching_wait_iters
    a = np.maximum(np.asarray(arrivals_per_step, dtype=np.float64), 1e-12)[..., None]
    t = np.arange(1.0, T + 1.0)
    covered = (-np.expm1(-a * t / dp)) ** dp
    first = np.diff(covered, axis=-1, prepend=0.0)
    timeout = 1.0 - covered[..., -1]
    mean_l = (first * (t + wait)).sum(axis=-1) + timeout * T
    mean_l2 = (first * (t + wait) ** 2).sum(axis=-1) + timeout * T**2
    return np.maximum(mean_l2 / (2.0 * mean_l) - 0.5, 0.0), a[..., 0] * np.maximum(mean_l2 / mean_l - 1.0, 0.0)


def _ranks_decode(decoding: np.ndarray, dp: int) -> np.ndarray:
    """Whether every one of ``dp`` attention ranks has a sequence decoding, with ``decoding`` sequences spread
    evenly over them (TensorRT-LLM's balance holds nothing otherwise); linear in between, as ``decoding`` is a
    mean."""
    return np.clip(decoding - (dp - 1.0), 0.0, 1.0)


def _wave_steps(c: np.ndarray, per_step: float) -> np.ndarray:
    """Mean number of steps until the i-th of ``c`` simultaneous prompts is done, ``per_step`` prompts a step."""
    waves = np.ceil(c / max(per_step, 1e-9))
    # prompts 1..c finish at steps ceil(i/per_step): the mean of that staircase
    full = np.floor(c / max(per_step, 1e-9))
    rest = c - full * per_step
    return (per_step * full * (full + 1) / 2 + rest * waves) / np.maximum(c, 1.0)


def _prefill_shape(P: float, rank_budget: float, dp: int) -> tuple[float, float, int]:
    """(chunk, prompts a step, steps a prompt) of prefill-only steps: each of ``dp`` ranks takes as many whole
    prompts as its budget holds, or one chunk of one prompt when a prompt is longer."""
    chunk = min(P, rank_budget)
    return chunk, dp * max(1.0, math.floor(rank_budget / P)), math.ceil(P / chunk)


def _prefill_step_time(cost: Any, P: float, chunk: float, k: Any) -> Any:
    """Seconds of one prefill-only step feeding ``k`` prompts a ``chunk`` each (the chunk of a ``P``-token prompt,
    its earlier chunks already cached: on average half of the rest)."""
    prior = (P - chunk) / 2.0
    return cost.step_time(k * chunk, k, k * (chunk * prior + chunk * (chunk + 1) / 2), k * (prior + chunk),
                          0 * k, 0 * k)


def _burst(cost: Any, P: float, rank_budget: float, dp: int, c: np.ndarray) -> np.ndarray:
    """Mean time until each of ``c`` simultaneous fresh prompts is done on one instance, the steps taking the
    first prompts first (``_prefill_shape``)."""
    chunk, per_step, steps = _prefill_shape(P, rank_budget, dp)
    one = np.asarray(_prefill_step_time(cost, P, chunk, np.minimum(c, per_step)))
    return _wave_steps(c, per_step) * steps * one


def kv_bound(config: SimConfig, cap: float, prompt: float, answer: float) -> float:
    """Sequences a KV cache of ``cap`` tokens decodes at once, of requests ``prompt`` + ``answer`` tokens long
    (P and O). A scheduler that reserves each request's whole length before admitting it (TensorRT-LLM) holds
    ``cap / (P + O)`` of them. One that admits while the prompt fits and preempts when decodes outgrow the cache
    (vLLM, SGLang) holds as many as fit at their mean length while decoding, ``cap / (P + O/2)``: its users are
    spread over their answers, and it runs those that overflow again later (the recompute is not priced). Where
    users fit that mean but not their whole length, the two differ most: InferenceX's vLLM runs of MiniMax-M2.5
    on H100 at 1k/8k and 32 users started their prompts in 0.1-0.2 s, where a whole-length reserve queues them
    for tens of seconds."""
    return float(cap // (prompt + answer if config.reserves_whole_length() else prompt + answer / 2.0))


def kv_overflows(config: SimConfig, cap: float, prompt: float, answer: float, users: np.ndarray) -> np.ndarray:
    """Where ``users`` per instance overflow a KV cache of ``cap`` tokens at their whole lengths under a scheduler
    that admits on demand: it preempts there, and the time to first token carries ``KV_OVERFLOW_TTFT_SIGMA``."""
    return np.asarray(users * (prompt + answer) > cap) & (not config.reserves_whole_length())


def unified(config: SimConfig, isl: float, osl: float, concurrency: Any,
            protocol: Protocol = INFERENCEX, osl_spread: float = 1.0) -> SteadyEstimate:
    """Closed-loop steady state of ``config.replicas`` unified instances (see module docstring)."""
    c_all = np.asarray(concurrency, dtype=np.float64)
    cost = step_cost(config, config.parallel)
    P, O = float(isl), max(float(osl), 2.0)  # noqa: E741 - the module docstring's P and O
    AL = _acceptance_length(config)
    k = config.speculative.num_draft_tokens if config.speculative else 0
    q_dec = 1 + k
    dp = config.parallel.dp
    rank_budget = float(cost.rank_budget(config.max_num_batched_tokens))
    cap = config.kv_capacity_tokens or cost.kv_capacity_tokens(config.gpu_memory_utilization,
                                                               config.max_num_batched_tokens)
    ctx = P + O / 2.0
    n_max = float(max(min(config.max_num_seqs - 1, kv_bound(config, cap, P, O), dp * ((rank_budget - 1) // q_dec)), 1))
    grid = np.unique(np.concatenate([np.geomspace(1.0, max(n_max, 1.0), N_GRID), [n_max]]))

    def chunk(n: np.ndarray) -> np.ndarray:
        """The prompt chunk a rank feeds beside its share of ``n`` decodes."""
        return np.clip(np.minimum(P, rank_budget - n * q_dec / dp), 1.0, None)

    whole = rank_budget >= P      # a prompt fits a step whole (else it is chunked over steps)

    def whole_fit(n: np.ndarray) -> np.ndarray:
        """Whole prompts a rank's budget holds beside its share of ``n`` decodes."""
        return np.floor((rank_budget - n * q_dec) / P)

    def rank_chunks(n: np.ndarray) -> np.ndarray:
        """Chunks a rank must run a step for prompts to keep pace with completions (< 1: a fraction of steps)."""
        return n * AL * P / ((O - 1.0) * chunk(n) * dp)

    balance = config.attention_dp_balance if dp > 1 else None
    if balance is not None:     # the hold depends on n alone (arrivals a step): tabulated once per deployment
        adp_held, adp_others = _adp_hold(balance, dp, grid * AL / (O - 1.0))
        released = 1.0 + _ranks_decode(grid, dp) * adp_others           # prompts a release lets go together
        per_mixed = np.minimum(released, dp)                             # ... on distinct ranks, in one step
    elif dp > 1:                # each rank chunks on its own: a step has a chunk where any rank has one
        pr = np.clip(rank_chunks(grid), 0.0, 0.999)
        per_mixed = pr * dp / (1.0 - (1.0 - pr) ** dp)
    else:                       # prompts that arrive between polls start together at the next, as many as fit
        per_mixed = _packed(config.scheduler_recv_interval * rank_chunks(grid), whole_fit(grid), whole)
    q = chunk(grid)
    prior = np.maximum(P - q, 0.0) / 2.0                                  # mean context already in cache
    dec_t = grid * q_dec
    t_d, sig_d = cost.time_and_sigma(dec_t, grid, dec_t * ctx, grid * ctx, grid, grid * ctx)
    t_m, sig_m = cost.time_and_sigma(dec_t + per_mixed * q, grid + per_mixed,
                                     dec_t * ctx + per_mixed * (q * prior + q * (q + 1) / 2),
                                     grid * ctx + per_mixed * (prior + q), grid, grid * ctx)
    # prompts keep pace while a step can start them as fast as they come: one chunk a step, or on one rank as many
    # whole prompts as a step packs
    feasible = grid[rank_chunks(grid) < (per_mixed if dp == 1 else 1.0)]
    n_hi_f = float(feasible.max()) if feasible.size else 1.0

    c = c_all / config.replicas
    request_s = cost.framework.request_overhead_ms * 1e-3
    poll = _poll_wait_steps(config, c)
    ahead = config.schedules_ahead()

    lg, ltd, ltm = np.log(grid), np.log(t_d), np.log(t_m)

    def state(n: np.ndarray) -> tuple[np.ndarray, ...]:
        ln = np.log(n)
        td, tm = np.exp(np.interp(ln, lg, ltd)), np.exp(np.interp(ln, lg, ltm))
        chunks = rank_chunks(n)                                           # chunks a rank runs a step
        busy = np.clip(chunks, 0.0, 0.999)                               # share of a rank's steps with a chunk
        mixed = np.clip(chunks * dp / np.interp(n, grid, per_mixed), 0.0, 0.999)  # share of steps with any
        s = (1.0 - mixed) * td + mixed * tm
        lam = n * AL / ((O - 1.0) * s)
        service = np.ceil(P / chunk(n)) * tm
        wait_steps = poll
        if config.batch_wait is not None:   # a held prompt waits decode steps, then shares its prefill step
            held, others = _batch_wait(config.batch_wait, rank_budget, c, n * q_dec, n * AL / (O - 1.0), P)
            service = service + others * (tm - td)
            wait_steps = poll + held
        if balance is not None:             # held until every attention rank has a prompt, then released together
            every_rank = _ranks_decode(n, dp)
            rounds = np.maximum(np.interp(n, grid, released) / dp, 1.0)  # a rank with two prompts runs them in turn
            service = service * (1.0 + rounds) / 2.0
            wait_steps = wait_steps + every_rank * np.interp(n, grid, adp_held)
        slot = mixed if dp == 1 else busy   # one rank's prefill slot is busy for the steps that carry prompts
        queued = _mdl_wait(service, slot)
        if dp == 1 and whole:               # whole prompts let in together by a poll, as many a step as fit
            queued = queued + _behind_in_batch(config.scheduler_recv_interval * chunks, whole_fit(n)) * tm
        ttft_min = (service + queued + _front_end(request_s, lam, c) + wait_steps * td
                    + _step_wait(td, tm, mixed, c, ahead))
        return s, lam, ttft_min

    def h(n: np.ndarray) -> np.ndarray:
        _, lam, ttft_min = state(n)
        return (c - n) / lam - ttft_min

    hi = np.minimum(np.minimum(c, n_max), n_hi_f)
    lo = np.minimum(np.full_like(c, 1e-6), hi)
    n = _bisect(h, lo, hi)
    s, lam, ttft_min = state(n)
    ttft = np.maximum((c - n) / lam, ttft_min)
    sigma_ttft = _ttft_sigma(np.interp(n, grid, sig_m), _front_end(request_s, lam, c), ttft, cost.framework.sigma)
    overflow = kv_overflows(config, cap, P, O, c)
    sigma_ttft = np.where(overflow, np.maximum(sigma_ttft, KV_OVERFLOW_TTFT_SIGMA), sigma_ttft)
    tpot = s / AL
    e2e_ss = ttft + (O - 1.0) * tpot
    waves = np.minimum(c, n_max + 1)
    burst = _burst(cost, P, rank_budget, dp, waves)
    burst = np.maximum(burst, _burst_front_end(request_s, c)) + request_s
    ttft, ttft_median, stretch = _measured(c, ttft, e2e_ss, burst, protocol, osl_spread)
    rate = c / e2e_ss * config.replicas / stretch
    e2e = ttft + (O - 1.0) * tpot
    sigma = _decode_sigma(np.interp(n, grid, sig_d), config)
    return SteadyEstimate(concurrency=c_all, ttft=ttft, ttft_median=ttft_median, tpot=tpot, e2e=e2e, request_rate=rate,
                          decoding=n * config.replicas, sigma=sigma, sigma_ttft=sigma_ttft, kv_overflow=overflow,
                          accelerators=config.accelerators, isl=P, osl=float(osl))


def _behind_in_batch(arrivals: np.ndarray, fit: np.ndarray) -> np.ndarray:
    """Mixed steps a prompt waits for the others let in with it: a poll lets in together the prompts that arrived
    since the last (``arrivals``, Poisson), and a step runs ``fit`` whole ones (at least one), so a prompt waits
    for those ahead of it in its batch, E[X(X-1)] / (2 E[X]) = a / 2 prompts of a Poisson batch, ``fit`` a step.
    Small where polls come every step; under SGLang's poll every N decode steps, with prompts that fill a step
    (8k at 64 users, 10 steps), the estimator's TTFT is 0.65 of the engine's without it."""
    return arrivals / (2.0 * np.maximum(fit, 1.0))


def _packed(arrivals: np.ndarray, fit: np.ndarray, whole: bool) -> np.ndarray:
    """Prompts a step that carries any carries, on one rank: ``arrivals`` between two polls (Poisson; a poll every
    step, or every ``scheduler_recv_interval`` decode steps for SGLang), those that came in between starting
    together at the next (a scheduler takes every waiting prompt its token budget holds, vLLM's and SGLang's and
    TensorRT-LLM's alike), so the mean of a zero-truncated Poisson, at most the ``fit`` whole prompts the budget
    holds beside the decodes; one when a prompt is chunked over steps (``whole`` False)."""
    if not whole:
        return np.ones_like(arrivals)
    a = np.maximum(arrivals, 1e-9)
    return np.clip(a / -np.expm1(-a), 1.0, np.maximum(fit, 1.0))


def _prefill_step(batch: np.ndarray, t_prompts: np.ndarray, arrivals_per_s: np.ndarray) -> tuple[np.ndarray, ...]:
    """(duration of the prefill step a prompt runs in, its mean wait for the step under way) on a prefill instance
    that starts, each step, every prompt waiting (up to the ``batch[-1]`` its budget holds), ``t_prompts[i]`` for
    ``batch[i]`` prompts. Busy, each step carries the prompts that arrived during the last one, ``k = λ t(k)``:
    ``k`` prompts a step keep up with ``k / t(k)`` arrivals a second, interpolated between whole batches; below
    one prompt per step it carries one, and a prompt finds a step under way as often as the instance is busy and
    waits half of it. (At the budget the queue grows: the caller's M/D/1 wait.)"""
    keeps_up = np.maximum.accumulate(batch / t_prompts)      # a larger batch never keeps up with fewer arrivals
    k = np.interp(arrivals_per_s, keeps_up, batch)
    t = np.interp(k, batch, t_prompts)
    busy = np.clip(arrivals_per_s * t / k, 0.0, 1.0)
    return t, busy * t / 2.0


def disaggregated(config: SimConfig, isl: float, osl: float, concurrency: Any,
                  protocol: Protocol = INFERENCEX, osl_spread: float = 1.0) -> SteadyEstimate:
    """Closed-loop steady state of a prefill pool feeding a decode pool (see module docstring)."""
    d = config.disaggregation
    assert d is not None
    c_all = np.asarray(concurrency, dtype=np.float64)
    pc, dc = step_cost(config, d.prefill.parallel), step_cost(config, d.decode.parallel)
    P, O = float(isl), max(float(osl), 2.0)  # noqa: E741 - the module docstring's P and O
    AL = _acceptance_length(config)
    k = config.speculative.num_draft_tokens if config.speculative else 0
    q_dec = 1 + k
    ctx = P + O / 2.0
    # prefill: whole prompts batched up to each rank's token budget (a prompt longer than it is chunked, one chunk
    # a step on its rank)
    p_rank = float(pc.rank_budget(d.prefill.max_num_batched_tokens or config.max_num_batched_tokens))
    chunk, per, steps = _prefill_shape(P, p_rank, d.prefill.parallel.dp)
    batch = np.arange(1.0, per + 1.0)                                   # prompts a prefill step may carry
    t_prompts = steps * np.asarray(_prefill_step_time(pc, P, chunk, batch))
    t_batch = float(t_prompts[-1])
    handover = pc.handover_time(int(P), d.kv_transfer == "scaleout")   # prefill done to first token at the client
    capacity = d.prefill.replicas * per / t_batch                      # prompts/s the prefill pool sustains
    sig_p = float(pc.sigma(per * chunk, per, per * chunk * chunk / 2, per * chunk, 0, 0))
    # decode: pure decode steps over n sequences per instance
    d_seqs = float(d.decode.max_num_seqs or config.max_num_seqs)
    d_budget = d.decode.max_num_batched_tokens or config.max_num_batched_tokens
    cap = config.kv_capacity_tokens or dc.kv_capacity_tokens(config.gpu_memory_utilization, d_budget)
    ranks_hold = d.decode.parallel.dp * (dc.rank_budget(d_budget) // q_dec)
    n_max = float(max(min(d_seqs, kv_bound(config, cap, P, O), ranks_hold), 1))
    grid = np.unique(np.concatenate([np.geomspace(1.0, max(n_max, 1.0), N_GRID), [n_max]]))
    dec_t = grid * q_dec
    t_d, sig_d = dc.time_and_sigma(dec_t, grid, dec_t * ctx, grid * ctx, grid, grid * ctx)
    reps = float(d.decode.replicas)
    request_s = pc.framework.request_overhead_ms * 1e-3
    fronts = float(d.prefill.replicas)                                  # one front end per prefill instance
    # the balance is solved at once under each pool's 80% band as well (``POOL_BANDS``, ``_pools_ttft_sigma``):
    # scenario k runs the prefill steps at e^(Z sign sigma) for its first sign, the decode steps for its second
    signs = np.array(POOL_BANDS, dtype=np.float64)
    c = np.tile(c_all, len(signs))
    fp = np.repeat(np.exp(Z90 * sig_p * signs[:, 0]), c_all.size)
    decode_sign = np.repeat(signs[:, 1], c_all.size)

    def decode_sigma(N: np.ndarray) -> np.ndarray:
        return _decode_sigma(np.interp(N / reps, grid, sig_d), config)

    def state(N: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        s = _interp(grid, t_d, N / reps) * np.exp(Z90 * decode_sign * decode_sigma(N))
        lam = N * AL / ((O - 1.0) * s)
        # a prefill pool whose steps take fp times as long: its step and wait at fp times the arrivals, x fp
        t_step, wait = _prefill_step(batch, t_prompts, lam * fp / d.prefill.replicas)
        wait = np.maximum(wait, _mdl_wait(t_batch, lam * fp / capacity))
        ttft_min = (t_step + wait) * fp + handover + _front_end(request_s, lam / fronts, c / fronts)
        return s, lam, ttft_min

    def h(N: np.ndarray) -> np.ndarray:
        s, lam, ttft_min = state(N)
        return np.where(lam * fp >= capacity * 0.999, -1.0, (c - N) / lam - ttft_min)

    hi = np.minimum(c, n_max * reps)
    lo = np.minimum(np.full_like(c, 1e-6), hi)
    N_k = _bisect(h, lo, hi)
    s_k, lam_k, ttft_min_k = state(N_k)
    lam_k = np.minimum(lam_k, capacity / fp * 0.999)
    ttft_k = np.maximum((c - N_k) / lam_k, ttft_min_k).reshape(len(signs), c_all.size)
    N, s, lam, ttft = N_k[:c_all.size], s_k[:c_all.size], lam_k[:c_all.size], ttft_k[0]
    sig_dec = decode_sigma(N)
    sigma_ttft = _ttft_sigma(_pools_ttft_sigma(ttft_k), _front_end(request_s, lam / fronts, c_all / fronts), ttft,
                             pc.framework.sigma)
    overflow = kv_overflows(config, cap, P, O, c_all / reps)
    sigma_ttft = np.where(overflow, np.maximum(sigma_ttft, KV_OVERFLOW_TTFT_SIGMA), sigma_ttft)
    tpot = s / AL
    e2e_ss = ttft + (O - 1.0) * tpot
    burst = _wave_steps(c_all, d.prefill.replicas * per) * t_batch + handover
    burst = np.maximum(burst, _burst_front_end(request_s, c_all / fronts)) + request_s
    ttft, ttft_median, stretch = _measured(c_all, ttft, e2e_ss, burst, protocol, osl_spread)
    rate = c_all / e2e_ss / stretch
    e2e = ttft + (O - 1.0) * tpot
    return SteadyEstimate(concurrency=c_all, ttft=ttft, ttft_median=ttft_median, tpot=tpot, e2e=e2e, request_rate=rate,
                          decoding=N, sigma=sig_dec, sigma_ttft=sigma_ttft, kv_overflow=overflow,
                          accelerators=config.accelerators, isl=P, osl=float(osl))


# (prefill, decode) signs of the disaggregated balance's scenarios: nominal, then each pool at either end of its
# 80% band with the other nominal (``_pools_ttft_sigma`` reads them in this order)
POOL_BANDS = ((0, 0), (1, 0), (-1, 0), (0, 1), (0, -1))


def _pools_ttft_sigma(ttft: np.ndarray) -> np.ndarray:
    """Log-space uncertainty of a disaggregated deployment's steady TTFT from its two pools' kernels, from the
    balance solved with each pool's step times at the ends of their own 80% band (``ttft``: one row per
    ``POOL_BANDS`` scenario).

    Near the prefill pool's capacity the wait for it, most of the TTFT, turns on how close the decode pool's
    arrivals come to that capacity, so a few percent on either pool's steps moves the TTFT many times as much:
    a band that scaled the TTFT by the prefill steps' own uncertainty claimed a certainty the balance does not
    have (view 1p's disaggregated runs: 30% inside it, 56% inside this one). The pools run different kernels
    on different instances (context-phase against generation-phase tables), so their errors are taken as
    independent and their effects summed in quadrature; at light load, where nothing waits, this is the prefill
    steps' own uncertainty as before."""
    t = np.log(np.maximum(ttft, 1e-12))
    return np.hypot(t[1] - t[2], t[3] - t[4]) / (2.0 * Z90)


def estimate(config: SimConfig, isl: float, osl: float, concurrency: Any, protocol: Protocol = INFERENCEX,
             osl_spread: float = 1.0) -> SteadyEstimate:
    """What a closed-loop benchmark of ``config`` measures at each concurrency (unified or disaggregated).

    ``isl``/``osl`` are mean lengths; ``osl_spread`` = longest ÷ mean output (1/0.9 for InferenceX's draws).
    """
    if config.disaggregation is not None:
        return disaggregated(config, isl, osl, concurrency, protocol, osl_spread)
    return unified(config, isl, osl, concurrency, protocol, osl_spread)
