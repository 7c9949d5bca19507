"""Per-request records -> per-point metrics, exactly as docs/architecture.md (section 5) defines them.

This is the only place metrics are computed, for measured and simulated runs
alike (so a simulated GB300 and a measured H200 can never disagree on what
"TPOT" means). Everything is vectorised over Arrow columns: a simulated sweep
has millions of token timestamps.

Two modes (recorded in each metrics row as ``compat``):

* ``inferencex`` — the public dashboard's method: window from the first measured
  request sent to the last measured request finished; interactivity = 1 /
  median TPOT; ITL = gaps between successive chunks.
* ``clean`` — a steady-state window that excludes ramp-up and drain (from the
  moment the last of the first C measured requests was sent to the moment the
  first of the last C finished, C = concurrency), counting only tokens that
  arrived inside it; per-token ITL (a chunk of k tokens adds its gap and k-1
  zero gaps; see ``itl_gaps``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from scoville.latency import request_tpot
from scoville.load import repeat_columns
from scoville.results.manifest import Manifest, PlannedPoint
from scoville.results.schema import COMPAT_MODES
from scoville.results.server_store import read_server_metrics
from scoville.results.store import RunError, read_manifest, read_power, read_requests, write_point_metrics
from scoville.server_metrics import point_server_columns
from scoville.stats import request_intervals
from scoville.summary import summarize
from scoville.token_metrics import token_metrics
from scoville.validity import point_validity


@dataclass(frozen=True)
class PointContext:
    """What metrics need beyond the records: system size, power and price."""

    accelerators: int = 1
    power_source: str = "rated"        # rated | all-in | nvml | csv | model | none
    power_boundary: str = "chip"       # chip | board | node | rack
    watts_per_accelerator: float | None = None  # for rated / all-in
    cost_per_accelerator_hour: float | None = None
    concurrency: int | None = None
    compat: str = "inferencex"
    slo: dict[str, float] = field(default_factory=dict)  # ttft_s, tpot_s, e2e_s maxima


def mean_power_w(power: pa.Table, t_start: float, t_end: float) -> tuple[float | None, float | None]:
    """Mean total power (W) and energy (J) over [t_start, t_end] by the trapezoid rule.

    Each device is integrated separately on its own samples (clipped to the
    window, with values at the edges interpolated) and the devices are summed.
    """
    if power.num_rows == 0 or t_end <= t_start:
        return None, None
    t_all = power.column("t").to_numpy()
    w_all = power.column("watts").to_numpy()
    devices = np.asarray(power.column("device").to_pylist(), dtype=object)
    energy = 0.0
    for dev in sorted(set(devices.tolist())):
        mask = devices == dev
        t, w = t_all[mask], w_all[mask]
        order = np.argsort(t)
        t, w = t[order], w[order]
        if t.size < 2 or t[-1] < t_start or t[0] > t_end:
            continue
        inner = (t > t_start) & (t < t_end)
        tt = np.concatenate([[t_start], t[inner], [t_end]])
        ww = np.concatenate([[np.interp(t_start, t, w)], w[inner], [np.interp(t_end, t, w)]])
        energy += float(np.trapezoid(ww, tt))
    return energy / (t_end - t_start), energy


def itl_gaps(times: pa.ChunkedArray | pa.Array, counts: pa.ChunkedArray | pa.Array, compat: str) -> np.ndarray:
    """ITL samples (s) of a set of requests, as ``compat`` defines ITL.

    ``inferencex``: the gaps between successive chunk arrivals of each request.
    ``clean``: per-token gaps; every chunk of k tokens (the first one included)
    also adds k-1 zero gaps, so a request contributes ``output_tokens - 1`` gaps
    and the mean ITL agrees with TPOT. The metrics rows and the report's ITL
    CDFs both call this, so the two can never disagree on a run's ITL.
    """
    if compat not in COMPAT_MODES:
        raise ValueError(f"unknown compat mode {compat!r}; use one of {COMPAT_MODES}")
    times = times.combine_chunks() if isinstance(times, pa.ChunkedArray) else times
    counts = counts.combine_chunks() if isinstance(counts, pa.ChunkedArray) else counts
    flat_t = pc.list_flatten(times).to_numpy(zero_copy_only=False)
    lengths = np.diff(times.offsets.to_numpy())
    owner = np.repeat(np.arange(lengths.size), lengths)
    gaps = np.diff(flat_t)[owner[1:] == owner[:-1]]
    if compat != "clean":
        return gaps
    flat_c = pc.list_flatten(counts).to_numpy(zero_copy_only=False)
    extra = int(np.maximum(flat_c - 1, 0).sum())
    return np.concatenate([gaps, np.zeros(extra)])


def _window(t_sent: np.ndarray, t_done: np.ndarray, concurrency: int | None, compat: str) -> tuple[float, float]:
    t_start, t_end = float(t_sent.min()), float(t_done.max())
    if compat != "clean" or not concurrency or t_sent.size <= 2 * concurrency:
        return t_start, t_end
    c = concurrency
    steady_start = float(np.sort(t_sent)[c - 1])
    steady_end = float(np.sort(t_done)[-c])
    if steady_end <= steady_start:
        return t_start, t_end
    return steady_start, steady_end


def _tokens_in_window(table: pa.Table, t_start: float, t_end: float) -> tuple[float, float]:
    """Output tokens that arrived inside the window, and input tokens whose first token did."""
    times = table.column("token_times").combine_chunks()
    counts = table.column("token_counts").combine_chunks()
    flat_t = pc.list_flatten(times).to_numpy(zero_copy_only=False)
    flat_c = pc.list_flatten(counts).to_numpy(zero_copy_only=False)
    inside = (flat_t >= t_start) & (flat_t <= t_end)
    out_tokens = float(flat_c[inside].sum())
    first = table.column("t_first_token").to_numpy(zero_copy_only=False).astype(float)
    inp = table.column("input_tokens").to_numpy(zero_copy_only=False).astype(float)
    in_mask = (first >= t_start) & (first <= t_end)
    return out_tokens, float(inp[in_mask].sum())


def cache_hit_rate(cached: np.ndarray, inputs: np.ndarray) -> float | None:
    """Cached share of the input tokens of the requests that reported cached tokens (None when none did):
    the one definition for points, turns and sessions."""
    return float(cached.sum() / inputs.sum()) if inputs.size and inputs.sum() > 0 else None


def point_metrics(requests: pa.Table, ctx: PointContext, power: pa.Table | None = None) -> dict[str, Any]:
    """All metrics of one load point from its request records (warm-up excluded)."""
    if ctx.compat not in COMPAT_MODES:
        raise ValueError(f"unknown compat mode {ctx.compat!r}; use one of {COMPAT_MODES}")
    measured = requests.filter(pc.invert(requests.column("warmup")))
    ok_mask = measured.column("ok")
    ok = measured.filter(ok_mask)
    row: dict[str, Any] = {
        "compat": ctx.compat,
        "num_requests": measured.num_rows,
        "num_ok": ok.num_rows,
        "num_errors": measured.num_rows - ok.num_rows,
        "accelerators": ctx.accelerators,
        "power_source": ctx.power_source,
        "power_boundary": ctx.power_boundary,
    }
    if ok.num_rows == 0:
        return row

    def col(name: str) -> np.ndarray:
        return ok.column(name).to_numpy(zero_copy_only=False).astype(float)

    t_sent, t_first, t_done = col("t_sent"), col("t_first_token"), col("t_done")
    out_tok, in_tok = col("output_tokens"), col("input_tokens")
    ttft = t_first - t_sent
    e2e = t_done - t_sent
    multi = out_tok > 1
    per_request_tpot = request_tpot(t_first, t_done, out_tok)
    tpot = per_request_tpot[multi]
    itl = itl_gaps(ok.column("token_times"), ok.column("token_counts"), ctx.compat)

    row.update(summarize(ttft, "ttft_s"))
    row.update(summarize(tpot, "tpot_s"))
    row.update(summarize(itl, "itl_s"))
    row.update(summarize(e2e, "e2e_s"))
    with np.errstate(divide="ignore"):
        row.update(summarize(1.0 / tpot[tpot > 0], "tok_s_user"))
    median_tpot = row["tpot_s_median"]
    row["interactivity"] = 1.0 / median_tpot if median_tpot else None
    row["interactivity_estimator"] = "1/median(TPOT)"
    row.update(request_intervals(ttft, tpot, e2e))  # 95% bootstrap intervals (scoville.stats)
    cached = ok.column("cached_tokens").to_numpy(zero_copy_only=False).astype(float)
    known = ~np.isnan(cached)      # a server that does not report cached tokens says nothing about its cache
    row["cached_tokens"] = float(cached[known].sum())
    row["cache_hit_rate"] = cache_hit_rate(cached[known], in_tok[known])
    row.update(token_metrics(ok))   # TTFOT and reasoning split, the --tokenizer count check: when recorded

    t_start, t_end = _window(t_sent, t_done, ctx.concurrency, ctx.compat)
    window = t_end - t_start
    if ctx.compat == "clean" and (t_start, t_end) != (float(t_sent.min()), float(t_done.max())):
        out_sum, in_sum = _tokens_in_window(ok, t_start, t_end)
    else:
        out_sum, in_sum = float(out_tok.sum()), float(in_tok.sum())
    row.update(window_start_s=t_start, window_end_s=t_end, window_s=window)
    if window <= 0:
        return row
    # Requests are counted whole, so request rates use the whole span even in clean mode (whose
    # steady window counts only the tokens inside it): goodput can then never exceed request throughput.
    request_span = float(t_done.max()) - float(t_sent.min()) or window
    row["request_throughput"] = ok.num_rows / request_span
    watts = None
    provisioned = ctx.power_source in PROVISIONED_POWER and bool(ctx.watts_per_accelerator)
    if power is not None and power.num_rows and not provisioned:
        watts, energy = mean_power_w(power, t_start, t_end)
        row["energy_j"] = energy
    row.update(throughput_metrics(out_sum / window, (out_sum + in_sum) / window, ctx, watts))
    if ctx.slo:
        good = np.ones(ok.num_rows, dtype=bool)
        if "ttft_s" in ctx.slo:
            good &= ttft <= ctx.slo["ttft_s"]
        if "tpot_s" in ctx.slo:
            good &= np.where(multi, per_request_tpot, 0.0) <= ctx.slo["tpot_s"]
        if "e2e_s" in ctx.slo:
            good &= e2e <= ctx.slo["e2e_s"]
        row["goodput"] = float(good.sum()) / request_span
        row["slo_attainment"] = float(good.mean())
    return row


PROVISIONED_POWER = ("rated", "all-in", "model")   # power known per accelerator, not sampled


def throughput_metrics(output_tput: float, total_tput: float, ctx: PointContext,
                       measured_watts: float | None = None) -> dict[str, Any]:
    """Throughputs of a point and everything derived from them: per accelerator, per kW, J/token, $/Mtok.

    One definition for records-based points and the simulator's analytic points. Power is the
    provisioned figure per accelerator (rated, all-in, modelled) times the accelerators, else the mean
    of the sampled power (``measured_watts``).
    """
    n_acc = max(ctx.accelerators, 1)
    row: dict[str, Any] = {
        "output_throughput": output_tput, "total_throughput": total_tput,
        "output_throughput_per_accelerator": output_tput / n_acc,
        "total_throughput_per_accelerator": total_tput / n_acc,
    }
    watts = measured_watts
    if ctx.power_source in PROVISIONED_POWER and ctx.watts_per_accelerator:
        watts = ctx.watts_per_accelerator * n_acc
    row["power_w"] = watts
    if watts:
        kw = watts / 1000.0
        row["output_throughput_per_kw"] = output_tput / kw
        row["total_throughput_per_kw"] = total_tput / kw
        row["joules_per_output_token"] = watts / output_tput if output_tput else None
    if ctx.cost_per_accelerator_hour:
        dollars_per_hour = ctx.cost_per_accelerator_hour * n_acc
        for kind, tput in (("total", total_tput), ("output", output_tput)):  # no price where nothing was served
            row[f"usd_per_mtok_{kind}"] = dollars_per_hour / (tput * 3600 / 1e6) if tput else None
    return row


def context_from_manifest(manifest: Manifest, point: PlannedPoint) -> PointContext:
    """PointContext of one load point, from what the manifest recorded."""
    system, power = manifest.system, manifest.power
    return PointContext(
        # A point may carry its own accelerator count (the simulator's per-point winning configuration).
        accelerators=point.accelerators or system.accelerators or 1,
        power_source=power.source,
        power_boundary=power.boundary or system.power_boundary or "chip",
        watts_per_accelerator=power.watts_per_accelerator,
        cost_per_accelerator_hour=system.cost_per_accelerator_hour,
        concurrency=point.concurrency,
        compat=manifest.compat,
        slo=manifest.slo,
    )


def run_metrics(run_dir: Path) -> list[dict[str, Any]]:
    """Metrics of every load point of a run, rebuilt from its raw records, power and server samples."""
    manifest = read_manifest(run_dir)
    requests = read_requests(run_dir)
    power = read_power(run_dir)
    server = read_server_metrics(run_dir)
    rows = []
    for point in manifest.load_plan.points:
        idx = point.index
        subset = requests.filter(pc.equal(requests.column("point"), idx))
        if subset.num_rows == 0:
            continue
        row = {"point": idx, "label": point.label, "concurrency": point.concurrency, "rate": point.rate,
               **repeat_columns(point)}
        row.update(point_metrics(subset, context_from_manifest(manifest, point), power))
        row.update(point_server_columns(server, idx, subset, manifest.target.model))
        row.update(point_validity(manifest, row, subset, power))
        if point.config is not None:  # the simulator's winning configuration of this point
            row["config"] = json.dumps(point.config, sort_keys=True)
        rows.append(row)
    return rows


def recompute(run_dir: Path) -> list[dict[str, Any]]:
    """Rebuild points.parquet from raw records (``scoville recompute``).

    A run predicted by the steady-state estimator (``fidelity: analytic``) has no request records: its points
    *are* the record, so it is refused rather than rebuilt into nothing (which used to delete them).
    """
    if read_manifest(run_dir).target.fidelity == "analytic":
        raise RunError(f"{run_dir.name} is an analytic prediction: its points were estimated, not built from request "
                       "records, so there is nothing to recompute (simulate --fidelity des records requests)")
    rows = run_metrics(run_dir)
    write_point_metrics(run_dir, rows)
    return rows
