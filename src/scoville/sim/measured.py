"""The measured load points a calibration fits and judges: what each point measured, read from a run.

A run's points become :class:`Target` records (the workload and load point the simulator must replay, and the
measured :class:`Figures`). The repeats of a load are one target, their mean; a pass that is not valid is left
out and named. Besides the three figures a point is judged on, a concurrency-1 point carries what only it can
tell, since nothing queues there: how its TTFT grows with the prompt (:func:`ttft_slope`) and, where the server
publishes its own histograms, how much of it is spent outside the engine (:func:`frontend_s`); both separate the
prefill kernels from a fixed per-request cost.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import msgspec
import numpy as np
import pyarrow as pa

from scoville.errors import UserError
from scoville.load import LoadPoint
from scoville.workload.scenarios import Workload

# (name in the report, column of points.parquet): what a fit compares.
METRICS = (("ttft", "ttft_s_mean"), ("tpot", "tpot_s_mean"), ("throughput", "total_throughput"))
SLOPE_MIN_REQUESTS = 8        # a TTFT-vs-prompt slope needs this many measured requests ...
SLOPE_MAX_RSE = 0.5           # ... and a standard error below this share of itself to be fitted on
Role = Literal["fit", "held-out"]


class CalibrationError(UserError):
    """Runs or options calibrate cannot work with; message is user-facing."""


class Figures(msgspec.Struct, kw_only=True, frozen=True):
    """What a point is judged on: mean TTFT and TPOT (s) and total throughput (input + output tokens/s); at
    concurrency 1, also what it is fitted on besides: how TTFT grows with the prompt (:func:`ttft_slope`) and,
    where the server publishes its own timings, how much of TTFT is spent outside its engine (:func:`frontend_s`)."""

    ttft_s: float | None
    tpot_s: float | None
    total_tok_s: float | None
    ttft_slope_s: float | None = None    # seconds of TTFT per prompt token, concurrency-1 points only
    frontend_s: float | None = None      # seconds of TTFT outside the engine's queue and prefill, concurrency 1

    def get(self, metric: str) -> float | None:
        return {"ttft": self.ttft_s, "tpot": self.tpot_s, "throughput": self.total_tok_s}[metric]


@dataclass
class Target:
    """A measured point the fit can predict: its run's workload and load point, and what was measured."""

    run_id: str
    label: str
    workload: Workload
    workload_name: str
    point: LoadPoint
    compat: str
    measured: Figures
    role: Role = "held-out"
    prompt_tokens: tuple[float, float] | None = None   # mean and sd of the prompts behind measured.ttft_slope_s
    slope_rse: float = 0.0                              # its relative standard error
    repeat_rse: dict[str, float] = field(default_factory=dict)   # per metric: the passes' mean's relative s.e.
    frontend_rse: float = 0.0                           # measured.frontend_s's relative s.e. (0: one pass)

    @property
    def key(self) -> str:
        return f"{self.run_id}:{self.label}"


@dataclass
class RunData:
    """One run as calibrate reads it: its model and hardware as the manifest records them, and its points."""

    run_id: str
    model: str
    hardware: str | None = None        # what the manifest says the run measured (None: not recorded)
    targets: list[Target] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)   # invalid passes not fitted or judged, with their reasons


def figures_of_row(row: dict[str, Any]) -> Figures:
    """The judged figures of a metrics row (measured or simulated); None where a column is missing or not positive."""

    def pos(col: str) -> float | None:
        v = row.get(col)
        return float(v) if isinstance(v, (int, float)) and math.isfinite(v) and v > 0 else None

    return Figures(ttft_s=pos("ttft_s_mean"), tpot_s=pos("tpot_s_mean"), total_tok_s=pos("total_throughput"))


def ttft_slope(prompt_tokens: np.ndarray, ttft_s: np.ndarray, passes: np.ndarray) -> tuple[float, float] | None:
    """Seconds of TTFT per prompt token and its relative standard error: the least-squares slope over one load's
    requests, each pass (repeat) with its own intercept, as a machine's speed moves between passes minutes
    apart; None when it is not sure (fewer than SLOPE_MIN_REQUESTS, prompts of one length, not rising, or a
    standard error above SLOPE_MAX_RSE of itself).

    Why: a point's mean TTFT cannot tell the prefill kernels from a fixed per-request cost, but the spread of
    prompt lengths within the point can (InferenceX draws them on [0.8 L, L]). On a real vLLM at concurrency 1
    the regression had no intercept (−4 ms + 0.257 ms a token), where means alone had fitted 17 ms a request.
    """
    groups = np.unique(passes)
    dof = prompt_tokens.size - groups.size - 1
    if prompt_tokens.size < SLOPE_MIN_REQUESTS or dof < 1:
        return None
    x, y = prompt_tokens.astype(float), ttft_s.astype(float)
    for g in groups:                      # within-pass deviations: each pass its own intercept
        on = passes == g
        x[on] -= x[on].mean()
        y[on] -= y[on].mean()
    sxx = float(np.dot(x, x))
    if sxx <= 0:
        return None
    slope = float(np.dot(x, y)) / sxx
    resid = y - slope * x
    se = math.sqrt(float(np.dot(resid, resid)) / dof / sxx)
    return (slope, se / slope) if slope > 0 and se <= SLOPE_MAX_RSE * slope else None


def _measured_slope(requests: Any, points: list[int]) -> tuple[tuple[float, float] | None, tuple[float, float]]:
    """:func:`ttft_slope` of the finished, measured (not warm-up) requests of ``points`` (a load's repeats), and
    the mean and sd of their prompt lengths."""
    import pyarrow.compute as pc

    keep = pc.and_(pc.and_(pc.is_in(requests["point"], value_set=pa.array(points, requests["point"].type)),
                           requests["ok"]), pc.invert(requests["warmup"]))
    rows = requests.filter(keep)
    tokens = np.asarray(rows["input_tokens"].to_numpy(zero_copy_only=False), dtype=float)
    ttft = np.asarray(pc.subtract(rows["t_first_token"], rows["t_sent"]).to_numpy(zero_copy_only=False), dtype=float)
    passes = np.asarray(rows["point"].to_numpy(zero_copy_only=False))
    ok = np.isfinite(tokens) & np.isfinite(ttft)
    prompts = (float(tokens[ok].mean()), float(tokens[ok].std())) if ok.any() else (0.0, 0.0)
    return ttft_slope(tokens[ok], ttft[ok], passes[ok]), prompts


def frontend_s(row: dict[str, Any]) -> float | None:
    """Seconds of a pass's mean TTFT spent outside the server's engine: the client's TTFT minus the server's
    own queue and prefill time (vLLM's ``request_queue_time`` and ``request_prefill_time`` histograms, over the
    same requests, warm-up included); None where the server does not publish both. A load's is the mean over
    its valid passes that have one.

    Why: at concurrency 1 nothing queues, so this is the per-request front end (HTTP, input processing, the
    first token's way out) that the cost model's ``request_overhead_ms`` stands for, measured rather than
    inferred. From means alone a fit cannot tell it from prefill kernel time: on the real vLLM it fitted 19 ms
    where the server's histograms say 2-5 ms.
    """
    values = [row.get(k) for k in ("client_all_ttft_s_mean", "server_queue_s_mean", "server_prefill_s_mean")]
    numbers = [float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    if len(numbers) < len(values):
        return None
    client, queue, prefill = numbers
    gap = client - queue - prefill
    return gap if gap > 0 else None


def _relative_se(values: Sequence[float | None]) -> float | None:
    """Relative standard error of the mean of the finite values; None with fewer than two."""
    v = np.array([x for x in values if x is not None and math.isfinite(x)], dtype=float)
    return float(v.std(ddof=1) / math.sqrt(v.size) / v.mean()) if v.size >= 2 and v.mean() > 0 else None


def repeat_rse(passes: list[dict[str, Any]]) -> dict[str, float]:
    """Per metric (METRICS), the relative standard error of the mean over a load's passes: how far the measured
    figure itself is unsure (empty with fewer than two passes). Why: on this 2-core machine one pass of 512/128 at
    eight users measured TTFT 124.5 ms and the next two 64.7 and 72.4 (the server's own prefill time moved with it),
    so that load's mean is unsure by ±22 %, and a prediction cannot be judged closer than that."""
    figures = [figures_of_row(p) for p in passes]
    spread = {name: _relative_se([f.get(name) for f in figures]) for name, _ in METRICS}
    return {name: rse for name, rse in spread.items() if rse is not None}


def _invalid_pass(run_id: str, row: dict[str, Any]) -> str:
    codes = ", ".join(dict.fromkeys(str(r.get("code")) for r in row.get("invalid_reasons") or []))
    return f"{run_id}:{row.get('label')} ({codes or 'invalid'})"


def read_run(run_dir: Path) -> RunData:
    """A run's measured points with the workload and load point that produced each; one-line errors. The repeats
    of a load (``sweep --repeats``) are one point, their mean: on a shared machine a load measured minutes apart
    moves by ~10%, which a fit on one pass takes for the server's behaviour. A pass that is not valid (its
    client lagged, its requests failed: ``scoville.validity``) is left out and named in ``left_out``: it
    measured something other than the server. A concurrency-1 point also gets its TTFT-vs-prompt slope over its
    repeats' requests (:func:`ttft_slope`) and its front-end time (:func:`frontend_s`)."""
    from scoville.analysis.repeats import aggregate_repeats
    from scoville.results.catalog import load_manifest, read_point_rows
    from scoville.results.store import read_requests
    from scoville.workload.scenarios import workload_from_dict

    run_dir = Path(run_dir)
    m = load_manifest(run_dir)
    run_id = m.run_id or run_dir.name
    model = m.model.name or ""
    passes = read_point_rows(run_dir) or []
    valid = [r for r in passes if r.get("valid") is not False]
    rows = aggregate_repeats(valid)
    plan = {p.index: p for p in m.load_plan.points}
    try:
        workload = workload_from_dict(m.workload)
    except (UserError, TypeError, msgspec.ValidationError) as e:
        raise CalibrationError(f"run {run_id}: its workload cannot be rebuilt ({e}); calibrate needs the workload "
                               "the run recorded") from None
    wname = m.workload_name or workload.name
    data = RunData(run_id=run_id, model=model, hardware=m.system.hardware or None,
                   left_out=[_invalid_pass(run_id, r) for r in passes if r.get("valid") is False])
    requests = None
    for row in rows:
        fig = figures_of_row(row)
        idx = row.get("point")
        if fig.ttft_s is None or fig.tpot_s is None or idx not in plan:
            continue
        point = plan[idx].load_point()
        load_passes = list(row.get("repeat_points") or [idx])
        mine = [r for r in valid if r.get("point") in load_passes]
        target = Target(run_id=run_id, label=str(row.get("label") or plan[idx].label), workload=workload,
                        workload_name=wname, point=point, compat=str(row.get("compat") or m.compat), measured=fig,
                        repeat_rse=repeat_rse(mine))
        if point.concurrency == 1:
            requests = read_requests(run_dir) if requests is None else requests
            slope, prompts = _measured_slope(requests, load_passes)
            fronts = [f for f in map(frontend_s, mine) if f is not None]
            target.measured = msgspec.structs.replace(fig, frontend_s=float(np.mean(fronts)) if fronts else None)
            target.frontend_rse = _relative_se(fronts) or 0.0
            if slope is not None:
                target.measured = msgspec.structs.replace(target.measured, ttft_slope_s=slope[0])
                target.prompt_tokens, target.slope_rse = prompts, slope[1]
        data.targets.append(target)
    if not data.targets and data.left_out:
        raise CalibrationError(f"run {run_id}: every pass with TTFT and TPOT is invalid ({'; '.join(data.left_out)}); "
                               "measure it again on a quiet machine (`scoville show` gives the reasons)")
    if not data.targets:
        raise CalibrationError(f"run {run_id} has no measured point with TTFT and TPOT ({run_dir}); finish it "
                               "(`scoville sweep --resume`) or leave it out")
    return data


def select_fit_points(targets: list[Target], fit_points: list[str] | None, left_out: Sequence[str] = ()) -> None:
    """Mark the fit points: ``LABEL`` (that label in every run) or ``RUN:LABEL`` (run id, prefix or suffix).

    No selection fits on every point (nothing is held out). ``left_out`` (the invalid passes) is named when a
    point asked for is missing: all its passes may have been left out.
    """
    if not fit_points:
        for t in targets:
            t.role = "fit"
        return
    for want in fit_points:
        run, _, label = want.rpartition(":")
        hits = [t for t in targets if t.label == label
                and (not run or t.run_id == run or t.run_id.startswith(run) or t.run_id.endswith(run))]
        if not hits:
            known = ", ".join(dict.fromkeys(t.key for t in targets))
            invalid = f" (left out as invalid: {'; '.join(left_out)})" if left_out else ""
            raise CalibrationError(f"--fit-points: no point {want!r} in the runs{invalid}; use LABEL or RUN:LABEL "
                                   f"from: {known}")
        for t in hits:
            t.role = "fit"
