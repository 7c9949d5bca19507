"""Calibration: fit the serving stack's free parameters on measured runs and write a versioned profile.

The simulator's kernel times come from measured tables or the datasheet transfer model; what neither can
know is how a particular deployment (this framework version, this host, this chip's software stack) runs
around and between those kernels. Those are five numbers, and only five, because each has a distinct
signature in what a benchmark measures:

* ``kernel_factor`` multiplies the kernels' time of decoding tokens: the kernel part of every decode step (TPOT);
* ``prefill_kernel_factor`` multiplies the kernels' time of prompt tokens: compute-bound prefill (TTFT). A server
  runs the two through different paths (on a GPU a decode step replays a CUDA graph and a prompt runs eagerly; on
  vLLM's CPU backend the two attention kernels differ), and one factor for both cannot serve them: a real vLLM on
  a Xeon slice (2026-12-07) ran its decode steps at 1.33x the kernel tables and its prompts at ~1.5x, so a fit with
  one factor missed TTFT at every load by 8-16 % while matching TPOT within 6 %. A mixed step weighs the two by
  its tokens, as the cost model does (``FrameworkCosts.prefill_kernel_ratio`` is their ratio);
* ``step_overhead_us`` is host time per forward step: it sets TPOT at concurrency 1 and is diluted by
  nothing;
* ``seq_overhead_us`` is host time per sequence in a step (sampling, output processing): it sets how TPOT
  grows with the batch;
* ``request_overhead_ms`` is the front end's time per request (HTTP, tokenisation), served one request at a
  time before the scheduler sees it: it moves TTFT alone, most in bursts.

They are fitted by minimising the squared log errors of mean TTFT, mean TPOT and total throughput on the
chosen load points (log errors: a 10 % miss counts the same at 5 ms and at 5 s), and of two things only a
concurrency-1 fit point tells, each weighed by how sure it was measured: its TTFT-vs-prompt slope
(``measured.ttft_slope``: what the prefill kernels add per prompt token) and, where the server publishes its own
histograms, its front-end time (``measured.frontend_s``: the part of TTFT outside the engine), both of which a
point's mean TTFT cannot tell from the other. Each parameter is kept positive and inside physical bounds by
fitting its logarithm, clipped. Every point is predicted by the
discrete-event engine replaying the run's own workload and load point (same lengths, warm-up and window as
the client used), so burst-synchronised prefills and drain are reproduced rather than approximated.

Log-normal priors around the uncalibrated values complete the fit. The host costs' is a decade wide and
weighs next to nothing: it only keeps a parameter the points cannot see (``seq_overhead_us`` from
concurrency-1 points only) where it was. The decode kernel factor's is as wide as the kernel data are unsure
(:func:`kernel_prior_sd`): a few percent where the kernels were timed on the machine itself, tens of percent
where they come from a datasheet; the prefill factor's is on its ratio to the decode one, ±15 % (RATIO_PRIOR_SD)
around the framework's ``prefill_kernel_ratio`` (the whole-module tables' prefill over decode): both phases run
kernels of one table, so a miss the data cannot place moves them together. Two load points of one
workload cannot tell a slower kernel from a longer request delay (both only lengthen TTFT at one prompt length),
and a fit free to choose traded one for the other on a real vLLM (kernel_factor 0.58, 122 ms a request), which
then missed another prompt length by 38 %; the kernel tables already know which it is.

The search (no SciPy: it is only in the ``silicon`` extra) uses the cost model's structure: every predicted
time is close to a sum of the five parameters' contributions, so simulating each parameter alone and solving a
non-negative least-squares problem gives a start near the answer even when a prior is off by 100×; Gauss–Newton
refines it from the best few starts, and a short bounded Nelder–Mead in log space polishes across the small
steps the engine's batch schedule makes. Each evaluation replays only the fit points. The report carries each
parameter's spread (from the Jacobian at the answer): two load points of one workload can often be matched by
several combinations, and the spread says which parameters the points did not pin.

The measured points come from ``scoville.sim.measured`` (``read_run``); the result is a ``Profile``
(``scoville.sim.profile``, YAML): the fitted values, the residual spread of the fit (``sigma``, the profile's
uncertainty), which points it was fitted on, and the error of every point before and after, fit points and
held-out points marked. ``scoville.sim.engine`` reads it through ``profile.load_profile`` wherever a
``SimConfig.profile`` is set: ``Profile.framework_costs`` replaces the framework's priors (its
``prefill_kernel_ratio`` the fitted ``prefill_kernel_factor / kernel_factor``) and ``Profile.kernel_factor``
multiplies kernel times.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import numpy as np

import scoville
from scoville.errors import UserError
from scoville.sim.config import SimConfig
from scoville.sim.frameworks import KERNEL_SCALE_RANGE, FrameworkCosts, load_framework, overridden
from scoville.sim.measured import (
    METRICS,
    CalibrationError,
    Figures,
    Role,
    RunData,
    Target,
    figures_of_row,
    read_run,
    select_fit_points,
)
from scoville.sim.profile import SCHEMA_VERSION, FitInfo, FitPoint, PointError, Profile

PARAMS = ("kernel_factor", "prefill_kernel_factor", "step_overhead_us", "seq_overhead_us", "request_overhead_ms")
KERNEL_PARAMS = ("kernel_factor", "prefill_kernel_factor")   # the two kernel factors (their priors: prior_rows)
# Physical bounds of each parameter. The kernel factors' match FrameworkCosts.kernel_scale's (the fit passes its
# trial values through it); host costs run from negligible to one second per step / ten seconds per request.
BOUNDS: dict[str, tuple[float, float]] = {
    "kernel_factor": KERNEL_SCALE_RANGE,
    "prefill_kernel_factor": KERNEL_SCALE_RANGE,
    "step_overhead_us": (0.1, 1e6),
    "seq_overhead_us": (0.01, 1e5),
    "request_overhead_ms": (0.01, 1e4),
}
# How far a server's prompt kernels may run from its decode kernels relative to the tables' ratio, in log space:
# aiconfigurator-core's whole-MLA-module tables put TensorRT-LLM's prefill cells at 0.95-1.25 and its decode
# cells at 0.78-1.05 of the kernel sum (10th-90th percentiles, docs/simulator.md), about 0.1 each in log
RATIO_PRIOR_SD = 0.15
PRIOR_SD = math.log(10.0)     # the host costs' prior is a decade wide ...
PRIOR_WEIGHT = 1e-5           # ... and weighs like a 0.3 % error on one metric at a decade away: it only
                              # decides what the points cannot see, never what they can
POINT_SD = 0.05               # how far a measured point's mean moves between measurements (a 3-pass mean on a
                              # shared machine: passes minutes apart differ by ~10 %): weighs the kernel factors'
                              # priors against the points (one sd off a prior costs as much as a 5 % miss)
PRIOR_PULL_NOTE = 2.0         # a fitted kernel factor this many prior sds out gets a note: tables of another machine?
PRIOR_CONTEXT = 1024          # context tokens a sequence when kernel_prior_sd weighs a decode step's kernels
MISSING_LOG_ERROR = 5.0       # a point the simulator could not complete counts as a factor-e^5 miss
SIGMA_FLOOR = 0.02            # a profile never claims better than 2 %: repeated measurements vary that much


# ---- prediction ------------------------------------------------------------------------------------

def predicted_slope(config: SimConfig, prompt_tokens: tuple[float, float]) -> float:
    """Seconds of TTFT per prompt token at concurrency 1 (what :func:`ttft_slope` measures): the slope of a
    prefill step's time over the prompts' mean ± one sd. An idle server's TTFT is its request's front end, one
    step's host cost and that step; only the step's kernels grow with the prompt."""
    from scoville.sim.engine import step_cost

    cost = step_cost(config, config.parallel)
    mean, sd = prompt_tokens
    lo, hi = max(mean - sd, 1.0), mean + sd

    def prefill(n: float) -> float:
        return float(cost.step_time(n, 1, n * (n + 1) / 2, n, 0, 0))

    return (prefill(hi) - prefill(lo)) / (hi - lo)


def predicted_frontend(config: SimConfig) -> float:
    """Seconds of an idle server's TTFT outside its engine (what :func:`~scoville.sim.measured.frontend_s`
    measures at concurrency 1): the request's front-end time, which the engine pays before the scheduler sees
    the request; with nothing else in flight it waits for no other request's."""
    from scoville.sim.engine import step_cost

    return step_cost(config, config.parallel).framework.request_overhead_ms * 1e-3


def predict(config: SimConfig, targets: list[Target]) -> list[Figures]:
    """The discrete-event engine's figures for each target (its run's workload and load point replayed), and
    the TTFT-vs-prompt slope and front-end time where they were measured."""
    from scoville.sim.driver import point_rows

    by_run: dict[tuple[str, str], list[int]] = {}
    for i, t in enumerate(targets):
        by_run.setdefault((t.run_id, t.compat), []).append(i)
    out: list[Figures | None] = [None] * len(targets)
    for (_, compat), idx in by_run.items():
        rows = point_rows(config, targets[idx[0]].workload, [targets[i].point for i in idx], compat=compat)
        by_point = {r["point"]: r for r in rows}
        for i in idx:
            row = by_point.get(targets[i].point.index)
            fig = figures_of_row(row) if row is not None else Figures(ttft_s=None, tpot_s=None, total_tok_s=None)
            prompts, measured = targets[i].prompt_tokens, targets[i].measured
            out[i] = msgspec.structs.replace(
                fig, ttft_slope_s=None if prompts is None else predicted_slope(config, prompts),
                frontend_s=None if measured.frontend_s is None else predicted_frontend(config))
    return [f for f in out if f is not None]


def trial_costs(prior: FrameworkCosts, values: dict[str, float]) -> FrameworkCosts:
    """The framework costs of one trial; kernel_factor travels as ``kernel_scale`` (the cost model multiplies
    kernel times by it, and the hardware's own kernel_factor stays as it is), prefill_kernel_factor as the
    ``prefill_kernel_ratio`` to it."""
    return msgspec.structs.replace(prior, kernel_scale=values["kernel_factor"],
                                   prefill_kernel_ratio=values["prefill_kernel_factor"] / values["kernel_factor"],
                                   step_overhead_us=values["step_overhead_us"],
                                   seq_overhead_us=values["seq_overhead_us"],
                                   request_overhead_ms=values["request_overhead_ms"])


def predict_with(config: SimConfig, prior: FrameworkCosts, values: dict[str, float],
                 targets: list[Target]) -> list[Figures]:
    with overridden(trial_costs(prior, values)):
        return predict(config, targets)


def log_errors(measured: list[Figures], predicted: list[Figures]) -> np.ndarray:
    """log(predicted ÷ measured) per point and metric (rows = points, columns = METRICS)."""
    out = np.zeros((len(measured), len(METRICS)))
    for i, (m, p) in enumerate(zip(measured, predicted, strict=True)):
        for j, (name, _) in enumerate(METRICS):
            mv, pv = m.get(name), p.get(name)
            if mv is None:
                out[i, j] = 0.0       # not measured: no information
            elif pv is None:
                out[i, j] = MISSING_LOG_ERROR
            else:
                out[i, j] = math.log(pv / mv)
    return out


def precision_weight(rse: float) -> float:
    """How much a measured quantity of relative standard error ``rse`` counts against a metric, which weighs 1 at
    POINT_SD's noise: POINT_SD ÷ ``rse``, at most 1 (nothing measured here is surer than a point's mean; an
    ``rse`` of 0, one pass with nothing to compare, weighs 1)."""
    return POINT_SD / max(rse, POINT_SD)


# What a concurrency-1 point is fitted on besides METRICS: the Figures field, the Target field holding its
# measured relative standard error, and the name a report gives it
SIDE_FIGURES = (("ttft_slope_s", "slope_rse", "TTFT per prompt token"),
                ("frontend_s", "frontend_rse", "TTFT outside the engine"))


def side_errors(targets: list[Target], predicted: list[Figures]) -> np.ndarray:
    """log(predicted ÷ measured) of every SIDE_FIGURES quantity measured on a target (the TTFT-vs-prompt slopes,
    then the front-end times), each times the :func:`precision_weight` of its own relative standard error.

    Why the front end is weighed by its precision and not as a share of TTFT: the server's histograms and the
    client time the same requests, so the front end is measured to a few percent (3.7, 3.7 and 3.5 ms in three
    passes on the real vLLM), and a fit that misplaces it pays for it at every other load: in a closed loop a
    request's arrival at the scheduler comes that long after the step that finished its predecessor, so at two
    users, with 5 ms steps, 5.3 ms instead of the measured 3.6 made each arrival miss the step boundary and wait
    a whole step more (TTFT +19 % against +5 %). Counted as a share of the 56 ms TTFT, that 1.7 ms cost the fit 3 %.
    """
    out = []
    for attr, rse, _ in SIDE_FIGURES:
        for t, p in zip(targets, predicted, strict=True):
            measured, got = getattr(t.measured, attr), getattr(p, attr)
            if measured is not None:
                out.append((math.log(got / measured) if got else MISSING_LOG_ERROR) * precision_weight(getattr(t, rse)))
    return np.array(out)


# ---- the fit ---------------------------------------------------------------------------------------

def _to_x(values: dict[str, float]) -> np.ndarray:
    return np.array([math.log(values[k]) for k in PARAMS])


def _bounded(raw: dict[str, float]) -> dict[str, float]:
    """Each parameter inside its BOUNDS, and the prefill factor within the ratio to the decode one that
    ``FrameworkCosts.prefill_kernel_ratio`` allows (KERNEL_SCALE_RANGE): the values a trial really simulates."""
    out = {k: float(min(max(raw[k], BOUNDS[k][0]), BOUNDS[k][1])) for k in PARAMS}
    k = out["kernel_factor"]
    lo, hi = KERNEL_SCALE_RANGE
    out["prefill_kernel_factor"] = min(max(out["prefill_kernel_factor"], lo * k), hi * k)
    return out


def _from_x(x: np.ndarray) -> dict[str, float]:
    return _bounded({k: math.exp(v) for k, v in zip(PARAMS, x, strict=True)})


_FLOOR = np.array([BOUNDS[k][0] for k in PARAMS])     # the bounds (linear start, Gauss-Newton) ...
_CEIL = np.array([BOUNDS[k][1] for k in PARAMS])
_LO = np.array([math.log(BOUNDS[k][0]) for k in PARAMS])   # ... and in log space (Nelder-Mead)
_HI = np.array([math.log(BOUNDS[k][1]) for k in PARAMS])


def nelder_mead(f: Callable[[np.ndarray], float], x0: np.ndarray, step: float, lo: np.ndarray, hi: np.ndarray,
                max_evals: int = 400, xtol: float = 2e-3, ftol: float = 1e-7) -> tuple[np.ndarray, float, int]:
    """Minimise ``f`` inside the box [lo, hi] (every trial point clipped into it); (x, f(x), evaluations).

    Standard coefficients (reflect 1, expand 2, contract ½, shrink ½); stops when the simplex is smaller
    than ``xtol`` in every coordinate and its values differ by less than ``ftol``, or after ``max_evals``.
    """
    n = x0.size
    evals = 0

    def g(x: np.ndarray) -> tuple[np.ndarray, float]:
        nonlocal evals
        x = np.clip(x, lo, hi)
        evals += 1
        return x, float(f(x))

    simplex = [g(x0)]
    for i in range(n):
        x = x0.copy()
        x[i] = x[i] + step if x[i] + step <= hi[i] else x[i] - step
        simplex.append(g(x))
    while evals < max_evals:
        simplex.sort(key=lambda p: p[1])
        xs = np.array([p[0] for p in simplex])
        fs = np.array([p[1] for p in simplex])
        if np.max(np.abs(xs[1:] - xs[0])) < xtol and fs[-1] - fs[0] < ftol:
            break
        centroid = xs[:-1].mean(axis=0)
        worst = xs[-1]
        xr, fr = g(centroid + (centroid - worst))
        if fr < fs[0]:
            xe, fe = g(centroid + 2.0 * (centroid - worst))
            simplex[-1] = (xe, fe) if fe < fr else (xr, fr)
        elif fr < fs[-2]:
            simplex[-1] = (xr, fr)
        else:
            inside = fr >= fs[-1]
            xc, fc = g(centroid + 0.5 * ((worst if inside else xr) - centroid))
            if fc < min(fr, fs[-1]):
                simplex[-1] = (xc, fc)
            else:
                best = xs[0]
                simplex = [simplex[0]] + [g(best + 0.5 * (x - best)) for x in xs[1:]]
    simplex.sort(key=lambda p: p[1])
    return simplex[0][0], simplex[0][1], evals


@dataclass
class Objective:
    """Squared log errors of the fit points plus the priors' terms; counts the simulations it ran."""

    config: SimConfig
    prior: FrameworkCosts
    targets: list[Target]
    x_prior: np.ndarray
    prior_rows: np.ndarray         # the priors as rows R: they add |R·(x - x_prior)|² to the loss (prior_rows)
    progress: Callable[[int, float], None] | None = None
    evaluations: int = 0
    best: float = math.inf

    def predict(self, values: dict[str, float]) -> list[Figures]:
        self.evaluations += 1
        return predict_with(self.config, self.prior, values, self.targets)

    def residuals(self, x: np.ndarray) -> np.ndarray:
        """log(predicted ÷ measured) of every fit point and metric at log parameters ``x``, and of every measured
        TTFT-vs-prompt slope and front-end time, those two weighed by how sure they were measured."""
        predicted = self.predict(_from_x(x))
        measured = [t.measured for t in self.targets]
        return np.concatenate([log_errors(measured, predicted).ravel(), side_errors(self.targets, predicted)])

    def data_loss(self, x: np.ndarray) -> float:
        return float(np.sum(self.residuals(x) ** 2))

    def __call__(self, x: np.ndarray) -> float:
        loss = self.data_loss(x) + float(np.sum((self.prior_rows @ (x - self.x_prior)) ** 2))
        self.best = min(self.best, loss)
        if self.progress is not None:
            self.progress(self.evaluations, self.best)
        return loss


def prior_rows(kernel_sd: float) -> np.ndarray:
    """The priors as rows of a quadratic form in the log parameters (each row's square adds to the loss), in
    the points' noise (POINT_SD): the decode kernel factor a Gaussian of ``kernel_sd`` around its prior; the
    prefill one a Gaussian of RATIO_PRIOR_SD on its *ratio* to the decode one (the two phases run kernels of one
    table, so an error of the tables moves both, and what the data leave open moves them together: a fit whose
    decode steps are host-bound still reads its decode kernels off its prompts); each host cost the decade-wide
    whisper."""
    rows = []
    for i, k in enumerate(PARAMS):
        row = np.zeros(len(PARAMS))
        if k == "kernel_factor":
            row[i] = POINT_SD / kernel_sd
        elif k == "prefill_kernel_factor":
            row[i] = POINT_SD / RATIO_PRIOR_SD
            row[PARAMS.index("kernel_factor")] = -POINT_SD / RATIO_PRIOR_SD
        else:
            row[i] = math.sqrt(PRIOR_WEIGHT) / PRIOR_SD
        rows.append(row)
    return np.array(rows)


def kernel_prior_sd(config: SimConfig, targets: list[Target]) -> float:
    """How sure the kernel data are of the fit points' kernel time, in log space: each step component's
    operator sigma (:meth:`StepCost.component_sigma`: 0.08 for a measured table, combined with the entry's
    ``kernel_tables_sigma`` where its tables stand for several machines; the transfer model's
    leave-one-generation-out error for a datasheet, 0.3-0.5) weighted by its share of the kernel time of a
    decode step at each fit point's concurrency, PRIOR_CONTEXT tokens of context a sequence.

    The weighting needs only rough steps: it decides how the components' sigmas mix, not the prior's centre.
    """
    from scoville.sim.cost import COMPONENTS
    from scoville.sim.engine import step_cost

    cost = step_cost(config, config.parallel)
    sigma = cost.component_sigma()
    kernel = [k for k in COMPONENTS if k != "overhead"]
    weighted = time = 0.0
    for t in targets:
        seqs = float(t.point.concurrency or 1)
        parts = cost.breakdown(seqs, seqs, seqs * PRIOR_CONTEXT, seqs * PRIOR_CONTEXT)
        weighted += sum(float(parts[k]) * sigma[k] for k in kernel)
        time += sum(float(parts[k]) for k in kernel)
    return max(weighted / time, SIGMA_FLOOR) if time > 0 else PRIOR_SD


def prior_values(prior: FrameworkCosts) -> dict[str, float]:
    """The uncalibrated values: the framework's priors, kernel_scale as the kernel factor and kernel_scale ×
    prefill_kernel_ratio as the prefill one."""
    return {"kernel_factor": prior.kernel_scale,
            "prefill_kernel_factor": prior.kernel_scale * prior.prefill_kernel_ratio,
            **{k: max(getattr(prior, k), BOUNDS[k][0]) for k in PARAMS if k not in KERNEL_PARAMS}}


# Each parameter's value when it is simulated alone for the linear start (typical magnitudes; the model is
# close to linear in each, so the exact value matters little).
UNIT = {"kernel_factor": 1.0, "prefill_kernel_factor": 1.0, "step_overhead_us": 1000.0, "seq_overhead_us": 100.0,
        "request_overhead_ms": 10.0}


def time_like(figures: list[Figures]) -> np.ndarray:
    """TTFT, TPOT, seconds per token (1 / throughput), TTFT per prompt token and front-end time per point:
    quantities that add up across the parameters' contributions (NaN where missing)."""
    nan = float("nan")
    return np.array([[f.ttft_s or nan, f.tpot_s or nan, 1.0 / f.total_tok_s if f.total_tok_s else nan,
                      f.ttft_slope_s or nan, nan if f.frontend_s is None else f.frontend_s] for f in figures])


def linear_weights(targets: list[Target]) -> np.ndarray:
    """How the linear solve weighs each :func:`time_like` quantity of each target's relative miss, as the objective
    does (the SIDE_FIGURES' :func:`precision_weight`). Flattened like ``time_like(...).ravel()``."""
    return np.array([[1.0, 1.0, 1.0, *(precision_weight(getattr(t, rse)) for _, rse, _ in SIDE_FIGURES)]
                     for t in targets]).ravel()


def nnls_small(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Non-negative least squares by trying every subset of columns (exact; five columns = 32 solves)."""
    n = a.shape[1]
    best, best_res = np.zeros(n), float(np.sum(b ** 2))
    for mask in range(1, 1 << n):
        cols = [j for j in range(n) if mask >> j & 1]
        z, *_ = np.linalg.lstsq(a[:, cols], b, rcond=None)
        if np.any(z < 0):
            continue
        res = float(np.sum((a[:, cols] @ z - b) ** 2))
        if res < best_res:
            best_res = res
            best = np.zeros(n)
            best[cols] = z
    return best


def _linear_solve(objective: Objective, theta: np.ndarray, y: np.ndarray, jac: np.ndarray) -> np.ndarray:
    """The parameters (each >= its lower bound) that make the linearised times ``y + jac·(new - theta)`` match
    the measured ones best in relative terms (weighed as :func:`linear_weights` says), with the kernel factors'
    prior rows (:func:`prior_rows`) as more rows, each log ratio ``log(new ÷ prior)`` expanded at the prior as
    ``new ÷ prior − 1``, close over the tens of percent those priors allow. The host costs' decade-wide whisper
    is left to the objective: linear in a parameter that runs from 0.01 µs to a second, it would outweigh the
    points (a 900 µs answer to a 2 µs prior by 70×)."""
    lo, hi = _FLOOR, _CEIL
    m = time_like([t.measured for t in objective.targets]).ravel()
    weight = linear_weights(objective.targets)
    ok = np.isfinite(m) & (m > 0) & np.isfinite(y) & np.all(np.isfinite(jac), axis=1)
    if not ok.any():
        return theta
    a = jac[ok] / m[ok, None] * weight[ok, None]
    b = (m[ok] - y[ok]) / m[ok] * weight[ok] + a @ (theta - lo)
    kernel_rows = [objective.prior_rows[PARAMS.index(k)] for k in KERNEL_PARAMS]     # prior_rows: one a parameter
    at_prior = np.exp(objective.x_prior)
    prior_a = np.array([r / at_prior for r in kernel_rows])
    prior_b = np.array([float(np.sum(r * (1.0 - lo / at_prior))) for r in kernel_rows])
    return np.minimum(lo + nnls_small(np.vstack([a, prior_a]), np.append(b, prior_b)), hi)


def linear_start(objective: Objective) -> np.ndarray:
    """A starting point from the structure of the cost model: every predicted time is nearly a sum of the
    parameters' contributions (decoding and prompt tokens' kernel time × their factors, host time × steps and
    sequences, the request delay once), so simulate each parameter alone and solve the non-negative least
    squares of relative errors.

    Why not start from the priors: a host cost whose prior is 100× too small has no visible effect there, and
    a search in log space sees a flat valley and leaves it where it is.
    """
    floor = _FLOOR
    base = time_like(objective.predict(_values(floor))).ravel()
    cols = []
    for i, k in enumerate(PARAMS):
        alone = floor.copy()
        alone[i] = UNIT[k]
        cols.append((time_like(objective.predict(_values(alone))).ravel() - base) / (UNIT[k] - floor[i]))
    return _linear_solve(objective, floor, base, np.stack(cols, axis=1))


def gauss_newton(objective: Objective, theta: np.ndarray, iterations: int = 12) -> np.ndarray:
    """Refine ``theta`` by Gauss–Newton in the parameters themselves (not their logarithms, so a host cost can
    go from nothing to milliseconds in one step), with forward-difference Jacobians, the non-negative solve
    of :func:`_linear_solve` and a halving line search on the objective."""
    loss = objective(_to_x(_values(theta)))
    for _ in range(iterations):
        y = time_like(objective.predict(_values(theta))).ravel()
        cols = []
        for i, k in enumerate(PARAMS):
            d = max(0.05 * theta[i], 0.01 * UNIT[k])
            moved = theta.copy()
            moved[i] += d
            cols.append((time_like(objective.predict(_values(moved))).ravel() - y) / d)
        target = _linear_solve(objective, theta, y, np.stack(cols, axis=1))
        for t in (1.0, 0.5, 0.25, 0.125):
            trial = theta + t * (target - theta)
            trial_loss = objective(_to_x(_values(trial)))
            if trial_loss < loss:
                break
        else:
            return theta
        change = float(np.max(np.abs(trial - theta) / np.maximum(theta, 1e-12)))
        theta, loss = trial, trial_loss
        if change < 1e-3:
            break
    return theta


def _values(theta: np.ndarray) -> dict[str, float]:
    return _bounded({k: float(v) for k, v in zip(PARAMS, theta, strict=True)})


def starts(objective: Objective, theta: np.ndarray) -> list[np.ndarray]:
    """Where the local searches begin: the linear start, the priors, and the linear start with one parameter
    at a third or three times its value.

    Why several: in a closed loop the engine's schedule changes in steps (a prompt that arrives just after a
    step began waits a whole step), so the predicted TTFT at high concurrency jumps where the request delay or
    the step time crosses such an edge, and a local search stops at the first jump it meets.
    """
    out = [theta, np.array([prior_values(objective.prior)[k] for k in PARAMS])]
    for i in range(len(PARAMS)):
        for f in (1.0 / 3.0, 3.0):
            moved = theta.copy()
            moved[i] = max(moved[i], 0.01 * UNIT[PARAMS[i]]) * f
            out.append(moved)
    return [np.array([_values(t)[k] for k in PARAMS]) for t in out]


def fit(objective: Objective, max_evals: int = 400, local_searches: int = 3) -> tuple[np.ndarray, float]:
    """The linear start and its variants (:func:`starts`), Gauss–Newton from the ``local_searches`` best of
    them, then a short Nelder–Mead polish in log space from the best answer (the engine's predictions move in
    small steps where the batch schedule changes, which finite differences can miss); (x, loss)."""
    candidates = starts(objective, linear_start(objective))
    ranked = sorted(candidates, key=lambda t: objective(_to_x(_values(t))))
    answers = [gauss_newton(objective, t) for t in ranked[:local_searches]]
    best = min(answers, key=lambda t: objective(_to_x(_values(t))))
    budget = max(max_evals - objective.evaluations, 16)
    x, fx, _ = nelder_mead(objective, _to_x(_values(best)), math.log(1.1), _LO, _HI, max_evals=budget)
    return x, fx


def parameter_spread(objective: Objective, x: np.ndarray, sigma: float) -> dict[str, float]:
    """Log-space standard deviation of each fitted parameter: ``(JᵀJ / sigma² + RᵀR / POINT_SD²)⁻¹`` with ``J``
    the Jacobian of the fit points' log errors with respect to the log parameters (forward differences of 5 %),
    ``sigma`` the fit's residual spread and ``R`` the priors' rows (so ``RᵀR / POINT_SD²`` is the priors'
    inverse covariance). A parameter the points cannot see keeps its prior's spread (decades for a host cost);
    one the points pin gets a few percent. Why report it: two load points of one workload can be matched
    exactly by several combinations (per-sequence host time and per-sequence attention kernel time both grow
    with the batch), and which one was picked decides how well another ISL/OSL is predicted.
    """
    h = math.log(1.05)
    e0 = objective.residuals(x)
    cols = []
    for i in range(len(PARAMS)):
        step = h if x[i] + h <= _HI[i] else -h
        xd = x.copy()
        xd[i] += step
        cols.append((objective.residuals(xd) - e0) / step)
    jac = np.stack(cols, axis=1)
    rows = objective.prior_rows
    cov = np.linalg.inv(jac.T @ jac / sigma ** 2 + rows.T @ rows / POINT_SD ** 2)
    return {k: float(min(math.sqrt(max(cov[i, i], 0.0)), PRIOR_SD * 10)) for i, k in enumerate(PARAMS)}


def residual_sigma(errors: np.ndarray, free: int) -> float:
    """Residual spread of the fit in log space, degrees of freedom counted (never below SIGMA_FLOOR)."""
    n = int(errors.size)
    dof = max(n - free, 1)
    return max(math.sqrt(float(np.sum(errors ** 2)) / dof), SIGMA_FLOOR)


# ---- the whole calibration --------------------------------------------------------------------------

@dataclass(frozen=True)
class SideFigure:
    """What a concurrency-1 point was fitted on besides the metrics it is judged on (a slope in seconds per prompt
    token, a front end in seconds): measured, uncalibrated and calibrated."""

    point: PointError
    name: str
    measured: float
    before: float
    after: float


@dataclass
class CalibrationReport:
    """Every point before and after, and the summary a user judges the profile by."""

    points: list[PointError]
    fit: FitInfo
    prior: dict[str, float]
    fitted: dict[str, float]
    sigma: float

    def errors(self, stage: str, role: Role | None = None) -> list[float]:
        """Every relative error of ``stage`` (all metrics), optionally of one role only."""
        return [e for p in self.points if role is None or p.role == role
                for name, _ in METRICS if (e := p.error(stage, name)) is not None]

    def side_figures(self) -> list[SideFigure]:
        """Every TTFT slope and front-end time that was measured, with both predictions of it."""
        out = []
        for p in self.points:
            for attr, _, name in SIDE_FIGURES:
                values = [getattr(f, attr) for f in (p.measured, p.before, p.after)]
                if all(v is not None for v in values):
                    out.append(SideFigure(p, name, *values))
        return out

    def prior_width(self, param: str) -> str:
        """How wide a parameter's prior is, where it has a real one (:func:`prior_rows`): the decode kernel
        factor's as the kernel data are unsure, the prefill one's on its ratio to the decode one."""
        if param == "kernel_factor":
            return f" ±{self.fit.kernel_prior_sd:.0%}"
        if param == "prefill_kernel_factor":
            return f" (÷ kernel_factor ±{RATIO_PRIOR_SD:.0%})"
        return ""

    def max_abs_error(self, stage: str, role: Role | None = None) -> float | None:
        errs = self.errors(stage, role)
        return max(abs(e) for e in errs) if errs else None

    def within(self, tolerance: float, role: Role | None = None) -> bool:
        worst = self.max_abs_error("after", role)
        return worst is not None and worst <= tolerance

    def notes(self) -> list[str]:
        """What a user must know about this fit: parameters the points did not determine or that hit a bound."""
        out = []
        if self.fit.left_out:
            out.append(f"left out {len(self.fit.left_out)} invalid pass(es), which measured something other than "
                       f"the server: {'; '.join(self.fit.left_out)}")
        if self.fit.undetermined:
            out.append(f"the fit points do not pin {', '.join(self.fit.undetermined)} within a factor of 2; add points "
                       "that exercise them (another concurrency or ISL/OSL) before trusting other workloads")
        sd = self.fit.kernel_prior_sd
        k, q = (self.fitted[p] for p in KERNEL_PARAMS)
        k0, q0 = (self.prior[p] for p in KERNEL_PARAMS)
        ratio = "prefill_kernel_factor ÷ kernel_factor"
        for what, fitted, prior, width in (("kernel_factor", k, k0, sd), (ratio, q / k, q0 / k0, RATIO_PRIOR_SD)):
            pull = abs(math.log(fitted / prior)) / width if width > 0 else 0.0
            if pull > PRIOR_PULL_NOTE:
                out.append(f"{what} {fitted:.3g} is {pull:.1f} prior sds (±{width:.0%}) from {prior:.3g}: the points "
                           "pull hard against the kernel data; check that the hardware entry's kernel tables were "
                           "timed on this machine and framework version (a CPU's with bench/measure_cpu_kernels.py)")
        if self.fit.at_bound:
            bounds = ", ".join(f"{k} {BOUNDS[k]}" for k in self.fit.at_bound)
            out.append(f"{', '.join(self.fit.at_bound)} ended on a bound ({bounds}): "
                       "the cost model's structure does not match these runs there")
        return out


def base_config(hardware: str, model: str, framework: str, config: SimConfig | None) -> SimConfig:
    """The deployment the runs measured: ``config`` (max_num_seqs, token budget, KV capacity...) with the
    hardware, model and framework given, and no profile (a calibration starts from the priors)."""
    update = {"hardware": hardware, "model": model, "framework": framework, "profile": None}
    if config is None:
        return SimConfig.parse({k: v for k, v in update.items() if v is not None})
    return SimConfig.parse({**config.model_dump(), **update})


def resolve_model(runs: list[RunData], model: str | None) -> str:
    """The catalog model (or config.json) the runs measured; runs of different models are an error."""
    from scoville.catalog.models import load_model

    names = sorted({r.model for r in runs})
    if len(names) > 1:
        raise CalibrationError(f"the runs measured different models ({', '.join(n or '?' for n in names)}); "
                               "calibrate one model at a time")
    if model is not None:
        load_model(model)           # unknown name or missing file: its own one-line error
        return model
    name = names[0] if names else ""
    try:
        load_model(name)
    except UserError:
        raise CalibrationError(f"the runs served model {name!r}, which is not in the catalog; pass --model with "
                               "its config.json (a path) or a catalog name") from None
    return name


def calibrate(run_dirs: list[Path], hardware: str, model: str | None = None, framework: str = "vllm",
              fit_points: list[str] | None = None, *, config: SimConfig | str | Path | None = None,
              max_evals: int = 400,
              progress: Callable[[int, float], None] | None = None) -> tuple[Profile, CalibrationReport]:
    """Fit the two kernel factors and the host costs of ``framework`` on the runs' fit points; predict every point.

    ``fit_points``: labels (``c=4``) or ``RUN:LABEL``; None fits on every point. ``config``: the measured
    deployment's serving settings, or the SimConfig file holding them (hardware/model/framework here win).
    Returns the profile and a report of every point's error before and after.
    """
    from scoville.catalog.hardware import load_hardware

    if not run_dirs:
        raise CalibrationError("give at least one run directory (or run id) to calibrate on; `scoville ls` lists them")
    if isinstance(config, (str, Path)):
        # the file gives the serving settings only (base_config sets hardware, model and framework), so a model
        # it does not name is a placeholder until the runs say which
        config = SimConfig.from_file(Path(config), hardware=hardware, model=model or "from-runs")
    hw = load_hardware(hardware)
    prior = load_framework(framework)
    runs = [read_run(Path(d)) for d in run_dirs]
    if len({r.run_id for r in runs}) < len(runs):
        raise CalibrationError("the same run is given twice; give each run once")
    model_ref = resolve_model(runs, model)
    for r in runs:
        if r.hardware is not None and r.hardware != hw.name:
            raise CalibrationError(f"run {r.run_id} was measured on {r.hardware} (its manifest), not {hw.name}; pass "
                                   f"--hardware {r.hardware} or leave the run out")
    cfg = base_config(hardware, model_ref, prior.name, config)
    targets = [t for r in runs for t in r.targets]
    left_out = [x for r in runs for x in r.left_out]
    select_fit_points(targets, fit_points, left_out)
    fitset = [t for t in targets if t.role == "fit"]

    start = prior_values(prior)
    kernel_sd = kernel_prior_sd(cfg, fitset)
    objective = Objective(cfg, prior, fitset, _to_x(start), prior_rows(kernel_sd), progress=progress)
    loss_before = objective(objective.x_prior)
    x, loss = fit(objective, max_evals=max_evals)
    fitted = _from_x(x)
    at_bound = [k for k in PARAMS if fitted[k] <= BOUNDS[k][0] * 1.001 or fitted[k] >= BOUNDS[k][1] / 1.001]

    before = predict_with(cfg, prior, start, targets)
    after = predict_with(cfg, prior, fitted, targets)
    fit_err = log_errors([t.measured for t in fitset], [after[targets.index(t)] for t in fitset])
    observed = int(sum(1 for t in fitset for name, _ in METRICS if t.measured.get(name) is not None))
    sigma = residual_sigma(fit_err[np.isfinite(fit_err)], len(PARAMS))
    spread = parameter_spread(objective, x, sigma)
    weak = [k for k in PARAMS if spread[k] > math.log(2.0)]
    points = [PointError(run_id=t.run_id, label=t.label, workload=t.workload_name, role=t.role, measured=t.measured,
                         before=b, after=a, measured_rse=t.repeat_rse)
              for t, b, a in zip(targets, before, after, strict=True)]
    info = FitInfo(method="squared log errors of mean TTFT, mean TPOT and total throughput, each point replayed in "
                          "the discrete-event engine, of concurrency-1 points' TTFT-vs-prompt slopes, weighed by "
                          "their standard errors, and of their front-end times (client TTFT minus the server's queue "
                          "and prefill time), weighed by theirs; linear start, Gauss-Newton from the best starts, "
                          "bounded Nelder-Mead polish in log space; log-normal priors at the framework priors: "
                          "the decoding tokens' kernel factor as wide as the kernel data are unsure "
                          f"(kernel_prior_sd), the prompt tokens' ±{RATIO_PRIOR_SD:.0%} on its ratio to it "
                          "(RATIO_PRIOR_SD), the host costs' a decade wide of weight 1e-5",
                   metrics=[name for name, _ in METRICS], evaluations=objective.evaluations,
                   loss_before=float(loss_before), loss_after=float(loss), observations=observed,
                   kernel_prior_sd=kernel_sd,
                   spread=spread, undetermined=weak, at_bound=at_bound, left_out=left_out)
    profile = Profile(
        schema_version=SCHEMA_VERSION, hardware=hw.name, model=_model_name(model_ref), framework=prior.name,
        sigma=sigma, prior=start,
        # the scheduling the replay assumed, resolved (None would not say which the fit saw)
        deployment={**cfg.model_dump(exclude={"profile"}), "async_scheduling": cfg.schedules_ahead()},
        fitted_on=[FitPoint(run_id=t.run_id, label=t.label) for t in fitset], points=points, fit=info,
        created=datetime.now(UTC).isoformat(timespec="seconds"), scoville_version=scoville.__version__,
        kernel_factor=fitted["kernel_factor"], step_overhead_us=fitted["step_overhead_us"],
        seq_overhead_us=fitted["seq_overhead_us"], request_overhead_ms=fitted["request_overhead_ms"],
        prefill_kernel_ratio=fitted["prefill_kernel_factor"] / fitted["kernel_factor"],
    )
    report = CalibrationReport(points=points, fit=info, prior=start, fitted=fitted, sigma=sigma)
    return profile, report


def _model_name(model: str) -> str:
    from scoville.catalog.models import load_model

    return load_model(model).name
