"""A measured sweep end to end: probe, run directory, points, power, metrics, resume.

``run_sweep`` writes the run directory of DESIGN.md as it goes: the manifest
first (status "running"), every finished request journaled the moment it
arrives, each point compacted to Parquet and the metrics recomputed when it
ends, power samples flushed per point, the manifest completed last. Ctrl-C
stops sending, keeps every finished request, and leaves status "interrupted";
``resume_sweep`` reopens such a run from its manifest alone (plus the API key,
which is never stored) and redoes only the points without a Parquet file.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Protocol

import msgspec

from scoville.client.config import ClientConfig
from scoville.client.errors import ClientError
from scoville.client.probe import probe
from scoville.client.workers import WorkerPool, auto_workers, run_point_here
from scoville.load import LoadPoint
from scoville.metrics import recompute
from scoville.power.csv_meter import read_power_csv
from scoville.power.nvml import NvmlSampler
from scoville.power.sources import PowerError, PowerPlan
from scoville.results.manifest import base_manifest
from scoville.results.schema import RequestRecord
from scoville.results.store import POWER, RunWriter, finished_points, read_manifest


class Observer(Protocol):
    """What a progress display is told (all optional to act on)."""

    def start_point(self, point: LoadPoint, position: int, total: int) -> None: ...
    def record(self, rec: RequestRecord) -> None: ...
    def end_point(self, point: LoadPoint, row: dict[str, Any] | None) -> None: ...


class _Silent:
    def start_point(self, point: LoadPoint, position: int, total: int) -> None:
        pass

    def record(self, rec: RequestRecord) -> None:
        pass

    def end_point(self, point: LoadPoint, row: dict[str, Any] | None) -> None:
        pass


@dataclass
class Sweep:
    """Everything a measured sweep needs; all of it but the API key goes into the manifest."""

    cfg: ClientConfig
    workload: Any                       # .sessions(count, stream) and .to_dict()
    points: list[LoadPoint]
    power: PowerPlan
    system: dict[str, Any]
    model: dict[str, Any] = field(default_factory=dict)
    serving: dict[str, Any] = field(default_factory=dict)
    compat: str = "inferencex"
    seed: int = 0
    workers: int = 0                    # 0 = auto (by the widest point)
    emulator: dict[str, Any] | None = None
    slo: dict[str, float] | None = None
    executor: str = "local"             # local (worker processes here) | ray (client actors on a cluster)
    ray_address: str | None = None
    ray_workers: int = 2


@dataclass
class SweepResult:
    run_dir: Path
    rows: list[dict[str, Any]]
    status: str


class SweepInterrupted(Exception):
    """Ctrl-C: the run was stopped and marked "interrupted"; ``run_dir`` can be resumed."""

    def __init__(self, result: SweepResult) -> None:
        super().__init__(f"interrupted; resume with: scoville sweep --resume {result.run_dir}")
        self.result = result


def load_plan(points: list[LoadPoint], seed: int, workers: int) -> dict[str, Any]:
    return {"points": [dict(p.to_dict(), label=p.label()) for p in points], "seed": seed,
            "mode": points[0].mode if points else None, "workers": workers}


def _workload_dict(workload: Any) -> dict[str, Any]:
    to_dict = getattr(workload, "to_dict", None)
    return to_dict() if to_dict is not None else msgspec.to_builtins(workload)


def workload_from_dict(d: dict[str, Any]) -> Any:
    """Rebuild the workload a manifest recorded (for --resume)."""
    if d.get("kind", "synthetic") == "synthetic":
        from scoville.workload.synthetic import SyntheticWorkload

        return SyntheticWorkload(**d)
    try:
        from scoville.workload import sessions as session_workloads
    except ImportError:
        session_workloads = None
    builder = getattr(session_workloads, "workload_from_dict", None)
    if builder is None:
        raise ClientError(f"cannot resume a run of workload kind {d.get('kind')!r} with this scoville")
    return builder(d)


def _manifest(sweep: Sweep, workers: int, probe_info: dict[str, Any], command: list[str] | None) -> dict[str, Any]:
    target = dict(sweep.cfg.to_manifest(), models_served=probe_info.get("models", []))
    if sweep.emulator is not None:
        target["emulator"] = sweep.emulator
    model = dict(sweep.model)
    model["name"] = model.get("name") or sweep.cfg.model
    m = base_manifest(source="measured", target=target, system=sweep.system, model=model, serving=sweep.serving,
                      workload=_workload_dict(sweep.workload), load_plan=load_plan(sweep.points, sweep.seed, workers),
                      power=sweep.power.manifest(), compat=sweep.compat, slo=sweep.slo, command=command)
    return m


def _flush_power(writer: RunWriter, sampler: NvmlSampler | None) -> None:
    if sampler is not None:
        samples = sampler.drain()
        if samples.num_rows:
            writer.write_power(samples)


def _write_csv_power(writer: RunWriter, plan: PowerPlan) -> None:
    """Replace the run's power samples with the meter file's (re-read whole, so resumes do not double it)."""
    samples = read_power_csv(plan.csv_path, writer.manifest.get("clock", {}).get("segments", []))
    (writer.run_dir / POWER).unlink(missing_ok=True)
    writer.write_power(samples)


def _execute(writer: RunWriter, sweep: Sweep, workers: int, observer: Observer) -> SweepResult:
    done = finished_points(writer.run_dir)
    todo = [p for p in sweep.points if p.index not in done]
    writer.manifest.setdefault("clock", {}).setdefault("segments", []).append(
        {"t": writer.now(), "unix": time.time()})
    writer.save_manifest()
    sampler = None
    if sweep.power.source == "nvml":
        sampler = NvmlSampler(writer.now, devices=sweep.power.nvml_devices)
        writer.manifest["power"]["nvml_device_names"] = sampler.names
        sampler.start()
    pool = _point_runner(sweep, workers)
    if hasattr(pool, "describe"):
        writer.manifest["executor"] = pool.describe()
        writer.save_manifest()
    status, rows = "interrupted", []
    power_error: PowerError | None = None
    try:
        for position, point in enumerate(todo):
            observer.start_point(point, position, len(todo))
            records: list[RequestRecord] = []

            def on_record(rec: RequestRecord) -> None:
                writer.record(rec)
                records.append(rec)
                observer.record(rec)

            mark = sampler.mark() if sampler is not None else None
            kwargs = dict(t0=writer.t0, t_start=writer.now(), on_record=on_record, seed=sweep.seed)
            if pool is not None:
                pool.run_point(point, **kwargs)
            else:
                run_point_here(sweep.cfg, sweep.workload, point, **kwargs)
            if sampler is not None:
                end = sampler.mark()
                if end["joules"]:
                    writer.manifest["power"].setdefault("energy_counter", []).append(
                        {"point": point.index, "t_start": mark["t"], "t_end": end["t"],
                         "joules": {d: end["joules"][d] - mark["joules"].get(d, 0.0) for d in end["joules"]}})
                    writer.save_manifest()
            _flush_power(writer, sampler)
            writer.write_point(point.index, records)
            rows = recompute(writer.run_dir)
            observer.end_point(point, next((r for r in rows if r["point"] == point.index), None))
        status = "complete"
    except KeyboardInterrupt:
        pass
    finally:
        if hasattr(pool, "describe"):  # final worker list, clock offsets and losses
            writer.manifest["executor"] = pool.describe()
        if pool is not None:
            pool.close()
        if sampler is not None:
            sampler.stop()
            _flush_power(writer, sampler)
        if sweep.power.source == "csv" and sweep.power.csv_path:
            try:
                _write_csv_power(writer, sweep.power)
            except PowerError as e:  # the requests are on disk: finish the run first, then say why
                power_error = PowerError(f"{e} (the measured requests are kept in {writer.run_dir})")
        rows = recompute(writer.run_dir)
        writer.finish(status)
    if power_error is not None:
        raise power_error
    result = SweepResult(writer.run_dir, rows, status)
    if status == "interrupted":
        raise SweepInterrupted(result)
    return result


def _point_runner(sweep: Sweep, workers: int) -> Any:
    """What drives each point: Ray client actors, local worker processes, or (None) this process."""
    if sweep.executor == "ray":
        from scoville.executor.loadgen import RayLoadCoordinator  # imports Ray only when asked

        return RayLoadCoordinator(sweep.cfg, sweep.workload, workers=sweep.ray_workers,
                                  ray_address=sweep.ray_address)
    if sweep.executor != "local":
        raise ClientError(f"unknown --executor {sweep.executor!r}; use local or ray")
    return WorkerPool(workers, sweep.cfg, sweep.workload) if workers > 1 else None


def _workers_for(sweep: Sweep) -> int:
    if sweep.workers > 0:
        return sweep.workers
    return auto_workers(max((p.concurrency or 1) for p in sweep.points) if sweep.points else 1)


def run_sweep(sweep: Sweep, runs_root: Path, *, observer: Observer | None = None,
              command: list[str] | None = None) -> SweepResult:
    """Measure every point of ``sweep`` into a new run under ``runs_root``.

    Raises ClientError (one line) when the target is unusable, before any run
    directory is created; SweepInterrupted after Ctrl-C, with the run kept.
    """
    if not sweep.points:
        raise ClientError("nothing to measure: the load plan has no points")
    info = probe(sweep.cfg)
    if sweep.power.source == "nvml":  # fail before a run directory exists
        NvmlSampler(time.perf_counter, devices=sweep.power.nvml_devices).stop()
    workers = _workers_for(sweep)
    writer = RunWriter.create(runs_root, _manifest(sweep, workers, info, command))
    return _execute(writer, sweep, workers, observer or _Silent())


def sweep_from_manifest(manifest: dict[str, Any], *, api_key: str | None = None,
                        base_url: str | None = None) -> Sweep:
    """The Sweep a manifest describes (the API key is not in it and must be given again)."""
    target = dict(manifest.get("target") or {})
    emulator = target.pop("emulator", None)
    if base_url:  # set before ClientConfig so it is normalised as --url is (trailing "/" or "/v1" dropped)
        target["base_url"] = base_url
    fields = set(ClientConfig.__struct_fields__)
    cfg = ClientConfig(**{k: v for k, v in target.items() if k in fields})
    cfg.api_key = api_key
    power = dict(manifest.get("power") or {})
    plan = PowerPlan(source=power.get("source", "none"), boundary=power.get("boundary", "chip"),
                     watts_per_accelerator=power.get("watts_per_accelerator"), csv_path=power.get("csv_path"),
                     nvml_devices=power.get("nvml_devices"))
    plan.extra = {k: v for k, v in power.items() if k not in plan.manifest() and k != "nvml_device_names"}
    points = [msgspec.convert({k: v for k, v in p.items() if k != "label"}, LoadPoint)
              for p in manifest.get("load_plan", {}).get("points", [])]
    plan_info = manifest.get("load_plan", {})
    return Sweep(cfg=cfg, workload=workload_from_dict(manifest.get("workload") or {}), points=points, power=plan,
                 system=manifest.get("system") or {}, model=manifest.get("model") or {},
                 serving=manifest.get("serving") or {}, compat=manifest.get("compat", "inferencex"),
                 seed=int(plan_info.get("seed", 0)), workers=int(plan_info.get("workers") or 0),
                 emulator=emulator, slo=manifest.get("slo") or None)


@contextlib.contextmanager
def emulator_target(hardware: str, model: str, config: dict[str, Any] | None = None,
                    api_key: str | None = None) -> Iterator[Any]:
    """The built-in emulator in a child process (``scoville.emulator.launch.spawn_emulator``)."""
    try:
        from scoville.emulator.launch import spawn_emulator
    except ImportError:
        raise ClientError("the built-in emulator is not available in this build; pass --url of a server") from None
    kwargs = {"api_key": api_key} if api_key else {}
    with spawn_emulator(hardware, model, config, **kwargs) as handle:
        yield handle


def resume_sweep(run_dir: Path, *, api_key: str | None = None, base_url: str | None = None,
                 observer: Observer | None = None) -> SweepResult:
    """Continue an interrupted or killed run: skip finished points, redo the rest."""
    manifest = read_manifest(run_dir)
    if manifest.get("source") != "measured":
        raise ClientError(f"{run_dir} is a {manifest.get('source')} run; only measured runs resume here")
    sweep = sweep_from_manifest(manifest, api_key=api_key, base_url=base_url)
    with contextlib.ExitStack() as stack:
        if sweep.emulator is not None and not base_url:
            handle = stack.enter_context(emulator_target(sweep.emulator["hardware"], sweep.emulator["model"],
                                                         sweep.emulator.get("config"), api_key))
            sweep.cfg.base_url = handle.base_url
        probe(sweep.cfg)
        writer = RunWriter.resume(run_dir)
        target = writer.manifest["target"]
        if target.get("base_url") != sweep.cfg.base_url:  # --url given, or a fresh emulator on a new port
            target.update(base_url=sweep.cfg.base_url, endpoint=sweep.cfg.endpoint)
        return _execute(writer, sweep, _workers_for(sweep), observer or _Silent())
