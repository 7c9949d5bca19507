"""Virtual-time load driver: runs load points against a SimEngine and writes a run directory.

What is sent when, what is warm-up and when a point ends is ``scoville.load_policy.PointLoad``'s, the
policy the measuring client (``scoville.client.driver``) follows too, so a simulated point and a measured
one differ only in where the timestamps came from. This module keeps what is its own: a heap of due turns
in virtual time, submission to the engine, a FIFO queue for the open-loop in-flight cap (the client's
semaphore), and the records.

Each point runs on a fresh engine (an idle server with an empty cache, as after
a restart) and its records are stamped on one run clock: point k starts one
second after point k-1's last request finished. Records become an Arrow table
column by column (token timestamps straight from the engine's numpy arrays),
then the run goes through ``scoville.metrics.recompute`` like a measured one.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pyarrow as pa

from scoville.load import LoadPoint
from scoville.load_policy import (LocalCounters, PointLoad, Send, Turn, in_flight_cap, lanes, point_sessions,
                                  request_cap)
from scoville.metrics import PointContext, point_metrics, recompute
from scoville.power.sources import DEFAULT_COST_PRESET, default_boundary
from scoville.results.manifest import Manifest, base_manifest
from scoville.results.schema import ARROW_SCHEMA, POWER_SCHEMA
from scoville.results.store import RunWriter
from scoville.sim.config import SimConfig, SimConfigError
from scoville.sim.engine import RequestTrace, SimEngine, step_cost
from scoville.workload.spec import Session

POINT_GAP_S = 1.0               # idle time between points on the run clock
POWER_MODES = ("rated", "all-in", "model")


@dataclass
class PointResult:
    """One simulated point: its records, when it ended, and what the engine counted."""

    table: pa.Table
    t_start: float
    t_end: float
    counters: dict[str, int]
    watts_per_accelerator: float | None = None   # utilisation model mean over the point (power="model")


@dataclass
class _Columns:
    request_id: list[str] = field(default_factory=list)
    session_id: list[str | None] = field(default_factory=list)
    turn: list[int] = field(default_factory=list)
    t_sent: list[float] = field(default_factory=list)
    t_first: list[float | None] = field(default_factory=list)
    t_done: list[float | None] = field(default_factory=list)
    times: list[np.ndarray] = field(default_factory=list)
    counts: list[np.ndarray] = field(default_factory=list)
    input_tokens: list[int] = field(default_factory=list)
    output_tokens: list[int] = field(default_factory=list)
    cached_tokens: list[int] = field(default_factory=list)
    ok: list[bool] = field(default_factory=list)
    error: list[str | None] = field(default_factory=list)
    http_status: list[int | None] = field(default_factory=list)
    warmup: list[bool] = field(default_factory=list)

    def add(self, sent: Send, t_sent: float, tr: RequestTrace) -> None:
        """One finished request, as the client records it (no session id for a single-turn request)."""
        spec, ok = sent.spec, tr.error is None
        self.request_id.append(spec.request_id)
        self.session_id.append(spec.session_id)
        self.turn.append(spec.turn)
        self.t_sent.append(t_sent)
        self.t_first.append(tr.t_first)
        self.t_done.append(tr.t_done)
        self.times.append(tr.times)
        self.counts.append(tr.counts)
        self.input_tokens.append(spec.input_tokens)
        self.output_tokens.append(tr.output_tokens)
        self.cached_tokens.append(tr.cached_tokens)
        self.ok.append(ok)
        self.error.append(tr.error)
        self.http_status.append(200 if ok else 400)
        self.warmup.append(sent.warmup)

    def table(self, point: int) -> pa.Table:
        n = len(self.request_id)
        lengths = np.fromiter((a.size for a in self.times), dtype=np.int32, count=n)
        offsets = np.concatenate(([0], np.cumsum(lengths, dtype=np.int64))).astype(np.int32)
        flat_t = np.concatenate(self.times) if n else np.empty(0)
        flat_c = np.concatenate(self.counts).astype(np.int32) if n else np.empty(0, dtype=np.int32)
        cols = {
            "point": pa.array(np.full(n, point, dtype=np.int32)),
            "request_id": pa.array(self.request_id, pa.string()),
            "session_id": pa.array(self.session_id, pa.string()),
            "turn": pa.array(self.turn, pa.int32()),
            "t_sent": pa.array(self.t_sent, pa.float64()),
            "t_first_token": pa.array(self.t_first, pa.float64()),
            "t_done": pa.array(self.t_done, pa.float64()),
            "token_times": pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat_t, pa.float64())),
            "token_counts": pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat_c, pa.int32())),
            "input_tokens": pa.array(self.input_tokens, pa.int64()),
            "output_tokens": pa.array(self.output_tokens, pa.int64()),
            "cached_tokens": pa.array(self.cached_tokens, pa.int64()),
            "ok": pa.array(self.ok, pa.bool_()),
            "error": pa.array(self.error, pa.string()),
            "http_status": pa.array(self.http_status, pa.int32()),
            "warmup": pa.array(self.warmup, pa.bool_()),
            "worker": pa.nulls(n, pa.string()),
            "token_count_source": pa.array(["server"] * n, pa.string()),
        }
        return pa.Table.from_arrays([cols[name] for name in ARROW_SCHEMA.names], schema=ARROW_SCHEMA)


class _Replay:
    """One point in virtual time: the engine, a heap of due turns, the in-flight cap's queue and the records.

    ``PointLoad`` decides; this only keeps time. A turn is admitted when it is due (as the client takes its
    request slot at that moment) and, when the in-flight cap is full, waits in FIFO order for the next
    request to finish (as behind the client's semaphore).
    """

    def __init__(self, engine: SimEngine, load: PointLoad, cap: int | None) -> None:
        self.engine, self.load, self.cap = engine, load, cap
        self.pending: list[tuple[float, int, Turn]] = []   # (due time, seq, turn): ties keep push order
        self.seq = itertools.count()
        self.inflight: dict[str, tuple[Send, float]] = {}  # request id -> (what was sent, when)
        self.queued: deque[Send] = deque()
        self.cols = _Columns()

    def push(self, turn: Turn | None) -> None:
        if turn is not None:
            heapq.heappush(self.pending, (turn.t, next(self.seq), turn))

    def run(self) -> None:
        """Advance the engine from one due turn to the next until nothing is due or running."""
        engine, pending = self.engine, self.pending
        while pending or not engine.idle():
            t_next = pending[0][0] if pending else float("inf")
            for ev in engine.advance(t_next, stop_at_finish=True):
                if ev.finished:
                    self._finished(ev.request_id)
            while pending and pending[0][0] <= engine.now:
                self._due(heapq.heappop(pending)[2])

    def _due(self, turn: Turn) -> None:
        sent = self.load.admit(turn, turn.t)
        if sent is None:          # the point is over: nothing due will be sent
            self.pending.clear()
        elif self.cap is not None and len(self.inflight) >= self.cap:
            self.queued.append(sent)
        else:
            self._submit(sent, turn.t)

    def _submit(self, sent: Send, t: float) -> None:
        self.engine.submit(sent.spec, t)
        self.inflight[sent.spec.request_id] = (sent, t)

    def _finished(self, rid: str) -> None:
        sent, t_sent = self.inflight.pop(rid)
        tr = self.engine.pop_trace(rid)
        self.cols.add(sent, t_sent, tr)
        self.push(self.load.after(sent, tr.t_done))
        if self.queued:
            self._submit(self.queued.popleft(), tr.t_done)


def simulate_point(config: SimConfig, workload: Any, point: LoadPoint, *, seed: int = 0, t_start: float = 0.0,
                   sessions: list[Session] | None = None, model_power: bool = False) -> PointResult:
    """Run one load point in virtual time on a fresh engine; records stamped from ``t_start``."""
    engine = SimEngine(config, seed=seed * 1_000_003 + point.index, token_events=False)
    if model_power:
        for inst in engine.instances:
            inst.steplog = []
    if sessions is None:
        sessions = point_sessions(workload, point)
    load = PointLoad(point, sessions, LocalCounters(len(sessions), request_cap(point)), t_start=t_start)
    replay = _Replay(engine, load, in_flight_cap(point))
    for turn in load.lane_starts(lanes(point)) if load.closed else load.arrivals(seed, workload):
        replay.push(turn)
    replay.run()
    cols = replay.cols
    table = cols.table(point.index)
    t_end = max(cols.t_done, default=t_start) or t_start
    watts = _model_watts(config, engine, t_start, t_end) if model_power else None
    return PointResult(table, t_start, float(t_end), engine.counters(), watts)


def _model_watts(config: SimConfig, engine: SimEngine, t_start: float, t_end: float) -> float | None:
    """Mean watts per accelerator over the point from each step's compute and memory utilisation."""
    from scoville.sim.power_model import PowerModel

    span = t_end - t_start
    if span <= 0:
        return None
    pm = PowerModel(config.hardware)
    energy = 0.0
    accs = 0
    for inst in engine.instances:
        n_acc = inst.timer.accelerators  # type: ignore[attr-defined]
        accs += n_acc
        busy = 0.0
        for entry in inst.steplog or []:
            dt = np.asarray(entry[0], dtype=np.float64)
            cu, mu = inst.timer.utilization(*entry[1:])  # type: ignore[attr-defined]
            energy += float(np.sum(dt * pm.watts(cu, mu))) * n_acc
            busy += float(np.sum(dt))
        energy += max(span - busy, 0.0) * pm.idle * n_acc
    return energy / span / accs if accs else None


def system_and_power(config: SimConfig, power: str, cost_preset: str = DEFAULT_COST_PRESET) -> tuple[dict, dict]:
    """The manifest's ``system`` and ``power`` sections for a simulated deployment (boundaries as a measured
    run's: ``all-in`` covers the rack)."""
    from scoville.sim.hardware import load_hardware

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
    executor: Any = None,
    predictions: list[dict[str, Any]] | None = None,
) -> Path:
    """Simulate every point and write a run directory in the measured runs' schema; returns its path.

    ``point_configs`` gives each point its own (winning) configuration, as the
    config search does; by default every point uses ``config``. With an
    ``executor`` (``scoville.executor``), the points run as parallel tasks —
    locally or on Ray — and are laid on the same run clock as the sequential loop.
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
        from scoville.executor.sim import simulate_points  # the executor layer builds on this module

        fanned_out = simulate_points(executor, configs, workload, points, seed=seed, model_power=power == "model")
        writer.manifest.executor = executor.describe()     # what replayed the points, as measured runs record
        writer.save_manifest()
    for i, (p, c) in enumerate(zip(points, configs)):
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
        ts, ws = zip(*power_rows)
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
    from scoville.metrics import COMPAT_MODES
    from scoville.sim.models import load_model

    if compat not in COMPAT_MODES:   # checked before any work: a run must never end in a traceback
        raise SimConfigError(f"unknown --compat {compat!r}; use one of {', '.join(COMPAT_MODES)}")
    system, power_info = system_and_power(config, power)
    system["accelerators"] = max(c.accelerators for c in configs)  # winning configs may differ in size
    arch = load_model(config.model)
    decode_par = config.parallel if config.disaggregation is None else config.disaggregation.decode.parallel
    load_plan = {"points": [dict(p.to_dict(), label=p.label(), config=c.model_dump(), accelerators=c.accelerators)
                            for p, c in zip(points, configs)]}
    if seed is not None:           # the replay's seed, as a measured run records its own
        load_plan["seed"] = seed
    return base_manifest(
        source="simulated",
        target={"simulator": config.model_dump(), "fidelity": fidelity,
                "cost_model": step_cost(config, decode_par).describe(),
                **({"search": search} if search else {}), **({"predictions": predictions} if predictions else {})},
        system=system,
        model={"name": arch.name, "precision": config.precision or getattr(arch, "default_precision", None)},
        serving={"framework": f"scoville.sim ({config.framework})", "parallelism": config.parallel.model_dump(),
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
    from scoville.sim.hardware import load_hardware

    cost = load_hardware(config.hardware).cost_per_hour.get(DEFAULT_COST_PRESET)
    rows = []
    t = 0.0
    for p in points:
        res = simulate_point(config, workload, p, seed=seed, t_start=t, model_power=power == "model")
        row = {"point": p.index, "label": p.label(), "concurrency": p.concurrency, "rate": p.rate}
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
