"""Simulated runs: load points one after another on one run clock, written as a run directory.

Each point is ``scoville.sim.point.simulate_point`` on a fresh engine; point k starts one second after
point k-1's last request finished, or every point runs as a task on an executor the caller passes in
(``scoville.sim.fanout``) and is laid on the same clock. The run then goes through
``scoville.metrics.recompute`` like a measured one.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from scoville.catalog.hardware import load_hardware
from scoville.catalog.models import load_model
from scoville.load import LoadPoint
from scoville.metrics import COMPAT_MODES, PointContext, point_metrics, recompute
from scoville.power.sources import DEFAULT_COST_PRESET, default_boundary
from scoville.results.manifest import Manifest, base_manifest
from scoville.results.schema import POWER_SCHEMA
from scoville.results.store import RunWriter
from scoville.sim.config import SimConfig, SimConfigError
from scoville.sim.engine import step_cost
from scoville.sim.fanout import simulate_points
from scoville.sim.point import POINT_GAP_S, simulate_point
from scoville.sim.track_record import quote

if TYPE_CHECKING:
    from scoville.executor.base import Executor

POWER_MODES = ("rated", "all-in", "model")


def system_and_power(config: SimConfig, power: str, cost_preset: str = DEFAULT_COST_PRESET) -> tuple[dict, dict]:
    """The manifest's ``system`` and ``power`` sections for a simulated deployment (boundaries as a measured
    run's: ``all-in`` covers the rack)."""
    if power not in POWER_MODES:
        raise SimConfigError(f"unknown --power {power!r}; use one of {', '.join(POWER_MODES)}")
    hw = load_hardware(config.hardware)
    watts = None if power == "model" else hw.power_watts(power)
    system = {
        "hardware": hw.name,
        "accelerators": config.accelerators,
        "rated_watts_per_accelerator": hw.rated_watts,
        "power_boundary": default_boundary(power),
        "cost_per_accelerator_hour": hw.cost_per_hour.get(cost_preset),
        "cost_preset": cost_preset if cost_preset in hw.cost_per_hour else None,
    }
    return system, {"source": power, "boundary": default_boundary(power), "watts_per_accelerator": watts}


def point_context(config: SimConfig, point: LoadPoint, power: dict, cost: float | None, compat: str,
                  watts: float | None = None) -> PointContext:
    return PointContext(accelerators=config.accelerators, power_source=power["source"],
                        power_boundary=power["boundary"],
                        watts_per_accelerator=watts if watts is not None else power["watts_per_accelerator"],
                        cost_per_accelerator_hour=cost, concurrency=point.concurrency, compat=compat)


def simulate_run(
    config: SimConfig,
    workload: Any,
    points: list[LoadPoint],
    runs_root: Path,
    *,
    seed: int = 0,
    compat: str = "inferencex",
    power: str = "rated",
    progress: Callable[[int, int, LoadPoint], None] | None = None,
    point_configs: list[SimConfig] | None = None,
    search: dict[str, Any] | None = None,
    executor: Executor | None = None,
    predictions: list[dict[str, Any]] | None = None,
) -> Path:
    """Simulate every point and write a run directory in the measured runs' schema; returns its path.

    ``point_configs`` gives each point its own (winning) configuration, as the
    config search does; by default every point uses ``config``. With an
    ``executor`` (``scoville.executor``, built by the caller: the simulator only maps tasks over it), the points
    run as parallel tasks — locally or on Ray — and are laid on the same run clock as the sequential loop.
    """
    configs = point_configs or [config] * len(points)
    if len(configs) != len(points):
        raise ValueError("point_configs must have one configuration per point")
    manifest = simulated_manifest(config, workload, points, configs, power=power, compat=compat, search=search,
                                  fidelity="discrete-event", predictions=predictions, seed=seed)
    writer = RunWriter.create(runs_root, manifest, journal=False)
    t = 0.0
    power_rows: list[tuple[float, float]] = []
    fanned_out = None
    if executor is not None:
        fanned_out = simulate_points(executor, configs, workload, points, seed=seed, model_power=power == "model")
        writer.manifest.executor = executor.describe()     # what replayed the points, as measured runs record
        writer.save_manifest()
    for i, (p, c) in enumerate(zip(points, configs, strict=True)):
        if progress is not None:
            progress(i, len(points), p)
        res = fanned_out[i] if fanned_out is not None else simulate_point(
            c, workload, p, seed=seed, t_start=t, model_power=power == "model")
        writer.write_point(p.index, res.table)
        if res.watts_per_accelerator is not None:
            total = res.watts_per_accelerator * c.accelerators
            power_rows += [(res.t_start, total), (res.t_end, total)]
        t = res.t_end + POINT_GAP_S
    if progress is not None:
        progress(len(points), len(points), points[-1] if points else None)  # type: ignore[arg-type]
    if power_rows:
        ts, ws = zip(*power_rows, strict=True)
        writer.write_power(pa.table({"t": list(ts), "device": ["sim:all"] * len(ts), "watts": list(ws)},
                                    schema=POWER_SCHEMA))
    recompute(writer.run_dir)      # before finish: the manifest's file hashes cover points.parquet
    writer.finish()
    return writer.run_dir


def simulated_manifest(config: SimConfig, workload: Any, points: list[LoadPoint], configs: list[SimConfig], *,
                       power: str, compat: str, search: dict[str, Any] | None, fidelity: str,
                       predictions: list[dict[str, Any]] | None = None, seed: int | None = None) -> Manifest:
    """The manifest of a simulated run: the deployment(s), what each operator's time came from, the fidelity.

    ``fidelity`` is ``discrete-event`` (every request replayed in the engine, metrics from its records) or
    ``analytic`` (the steady-state estimator's figures, written as the points themselves, with their
    uncertainty bands). ``predictions`` carries each point's estimate and band in either case.
    """
    if compat not in COMPAT_MODES:   # checked before any work: a run must never end in a traceback
        raise SimConfigError(f"unknown --compat {compat!r}; use one of {', '.join(COMPAT_MODES)}")
    system, power_info = system_and_power(config, power)
    system["accelerators"] = max(c.accelerators for c in configs)  # winning configs may differ in size
    arch = load_model(config.model)
    decode_par = config.parallel if config.disaggregation is None else config.disaggregation.decode.parallel
    load_plan: dict[str, object] = {
        "points": [dict(p.to_dict(), label=p.describe(), config=c.model_dump(), accelerators=c.accelerators)
                   for p, c in zip(points, configs, strict=True)]}
    if seed is not None:           # the replay's seed, as a measured run records its own
        load_plan["seed"] = seed
    return base_manifest(
        source="simulated",
        target={"simulator": config.model_dump(), "fidelity": fidelity,
                "cost_model": step_cost(config, decode_par).describe(),
                **({"search": search} if search else {}), **({"predictions": predictions} if predictions else {}),
                "track_record": quote(arch.name, load_hardware(config.hardware), config.framework,
                                      drafted=any(c.speculative is not None for c in configs))},
        system=system,
        model={"name": arch.name, "precision": config.precision or getattr(arch, "default_precision", None)},
        serving={"framework": f"scoville.sim ({config.framework})",
                 "parallelism": config.parallel.model_dump(exclude_none=True),
                 "config_label": config.label(), "options": config.model_dump()},
        workload=workload.to_dict(),
        load_plan=load_plan,
        power=power_info,
        compat=compat,
    )


def point_rows(config: SimConfig, workload: Any, points: list[LoadPoint], *, seed: int = 0,
               compat: str = "inferencex", power: str = "rated",
               stop_when_saturated: bool = False) -> list[dict[str, Any]]:
    """Metrics rows of each point without writing a run (the config search's inner loop).

    ``stop_when_saturated``: on a closed-loop sweep in rising concurrency, stop once
    throughput per accelerator no longer grows (within 2 %): more lanes then only
    queue, so every later point is dominated by an earlier one of the same config.
    """
    _, power_info = system_and_power(config, power)
    cost = load_hardware(config.hardware).cost_per_hour.get(DEFAULT_COST_PRESET)
    rows: list[dict[str, Any]] = []
    t = 0.0
    for p in points:
        res = simulate_point(config, workload, p, seed=seed, t_start=t, model_power=power == "model")
        row = {"point": p.index, "label": p.describe(), "concurrency": p.concurrency, "rate": p.rate}
        row.update(point_metrics(res.table, point_context(config, p, power_info, cost, compat,
                                                          res.watts_per_accelerator)))
        row["preemptions"] = res.counters.get("preemptions", 0)
        rows.append(row)
        t = res.t_end + POINT_GAP_S
        if stop_when_saturated and len(rows) >= 2 and p.rate is None:
            y = [r.get("total_throughput_per_accelerator") or 0.0 for r in rows]
            if y[-1] <= 1.02 * max(y[:-1]):
                break
    return rows
