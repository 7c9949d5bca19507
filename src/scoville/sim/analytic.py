"""An analytic simulated run: the search's frontier written as a run directory without replaying requests.

``scoville simulate`` ranks deployments with the steady-state estimator (``steady.py``) in about a
second; replaying every frontier point request by request in the discrete-event engine takes seconds to
minutes more. The default writes the estimates themselves: ``points.parquet`` holds one row per frontier
point with the same metric names a measured point has (means from the estimator; medians equal to them;
tail percentiles left empty, since a steady state has no tail), its uncertainty band (``*_lo`` / ``*_hi``,
the 10th-90th percentile of the log-normal spread of the estimate), and the configuration that produced
it. The manifest says ``fidelity: analytic``; there are no request records to recompute from.
``--fidelity des`` replays the same points in the engine instead (``driver.simulate_run``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from scoville.catalog.hardware import load_hardware
from scoville.load import LoadPoint
from scoville.metrics import PointContext, throughput_metrics
from scoville.power.sources import DEFAULT_COST_PRESET
from scoville.results.store import RunWriter, write_point_metrics
from scoville.sim.config import SimConfig, SimConfigError
from scoville.sim.driver import simulated_manifest, system_and_power
from scoville.sim.search import FrontierPoint
from scoville.stats import PREDICTION_BAND, Z90
from scoville.validity import simulated_validity


def band(value: float, sigma: float) -> tuple[float, float]:
    """(low, high): 10th and 90th percentiles of a log-normal estimate with log-space spread ``sigma``."""
    return value * math.exp(-Z90 * sigma), value * math.exp(Z90 * sigma)


def prediction(p: FrontierPoint) -> dict[str, Any]:
    """The estimate of one point and its band, as stored in manifests."""
    return {
        "concurrency": p.concurrency, "config": p.config.label(), "interactivity": p.interactivity,
        "total_throughput_per_accelerator": p.total_tput_per_accelerator, "ttft_s": p.ttft_median,
        "ttft_s_mean": p.ttft, "tpot_s": p.tpot, "sigma": p.sigma, "sigma_ttft": p.sigma_ttft,
        "interactivity_band": band(p.interactivity, p.sigma),
        "total_throughput_per_accelerator_band": band(p.total_tput_per_accelerator, p.sigma),
        "ttft_s_band": band(p.ttft_median, p.sigma_ttft), "kv_overflow": p.kv_overflow,
    }


def point_row(index: int, p: FrontierPoint, power: dict[str, Any], cost_preset: str, compat: str) -> dict[str, Any]:
    """One frontier point as a metrics row (the names ``scoville.metrics.point_metrics`` produces)."""
    hw = load_hardware(p.config.hardware)
    ctx = PointContext(accelerators=p.config.accelerators, power_source=power["source"],
                       power_boundary=power["boundary"], watts_per_accelerator=power["watts_per_accelerator"],
                       cost_per_accelerator_hour=hw.cost_per_hour.get(cost_preset), concurrency=p.concurrency,
                       compat=compat)
    n = p.config.accelerators
    row: dict[str, Any] = {
        "point": index, "label": f"c={p.concurrency}", "concurrency": p.concurrency, "rate": None,
        "compat": compat, "fidelity": "analytic", "accelerators": n,
        "power_source": ctx.power_source, "power_boundary": ctx.power_boundary,
        "interactivity": p.interactivity, "interactivity_estimator": "1/TPOT (steady-state estimate)",
        "request_throughput": p.request_rate,
    }
    # (mean, median): the window's opening burst lifts the mean TTFT, not its median; the rest are steady figures
    for name, mean, median in (("ttft_s", p.ttft, p.ttft_median), ("tpot_s", p.tpot, p.tpot), ("e2e_s", p.e2e, p.e2e),
                               ("tok_s_user", p.interactivity, p.interactivity)):
        row[f"{name}_mean"], row[f"{name}_median"] = mean, median
        row[f"{name}_p90"] = row[f"{name}_p99"] = None
    row.update(throughput_metrics(p.output_tput_per_accelerator * n, p.total_tput_per_accelerator * n, ctx))
    lo, hi = band(p.interactivity, p.sigma)
    row.update(interactivity_lo=lo, interactivity_hi=hi)
    for key in ("total_throughput_per_accelerator", "output_throughput_per_accelerator", "total_throughput_per_kw",
                "output_throughput_per_kw"):
        if row.get(key):
            row[f"{key}_lo"], row[f"{key}_hi"] = band(row[key], p.sigma)
    row["ttft_s_lo"], row["ttft_s_hi"] = band(p.ttft_median, p.sigma_ttft)
    row["sigma"] = p.sigma
    row["band_kind"] = PREDICTION_BAND
    row["config"] = json.dumps(p.config.model_dump(), sort_keys=True)
    row.update(simulated_validity())
    return row


def write_analytic_run(base: SimConfig, workload: Any, frontier: list[FrontierPoint], runs_root: Path, *,
                       compat: str = "inferencex", power: str = "rated", search: dict[str, Any] | None = None,
                       cost_preset: str = DEFAULT_COST_PRESET) -> Path:
    """Write the frontier as a run directory (manifest + points.parquet); returns its path."""
    if power == "model":
        raise SimConfigError("--power model needs request-level steps; add --fidelity des (or use rated / all-in)")
    points = [LoadPoint(index=i, concurrency=p.concurrency, num_requests=10 * p.concurrency,
                        warmup_requests=0) for i, p in enumerate(frontier)]
    configs = [p.config for p in frontier]
    manifest = simulated_manifest(base, workload, points, configs, power=power, compat=compat, search=search,
                                  fidelity="analytic", predictions=[prediction(p) for p in frontier])
    _, power_info = system_and_power(base, power)
    writer = RunWriter.create(runs_root, manifest, journal=False)
    rows = [point_row(i, p, power_info, cost_preset, compat) for i, p in enumerate(frontier)]
    write_point_metrics(writer.run_dir, rows)
    writer.finish()
    return writer.run_dir
