"""A measured sweep end to end: probe, run directory, points, power, metrics, resume.

``run_sweep`` writes the run directory of docs/architecture.md as it goes: the manifest
first (status "running"), every finished request journaled the moment it
arrives, each point compacted to Parquet and the metrics recomputed when it
ends, power samples flushed per point, the manifest completed last. Ctrl-C
or SIGTERM stops sending, keeps every finished request, and leaves status
"interrupted" (a second signal while the run is being closed is ignored);
so does a sweep that cannot go on (every request of a point failed to
connect, the disk is full, no socket is left), with one line saying why.
Each point's outcome (failures by kind, cached prompt tokens) goes into the
manifest's ``point_results``. ``resume_sweep`` reopens such a run from its
manifest alone (plus the API key, which is never stored), holding the run's
lock, and redoes the points that measured nothing, with prompts salted by the
attempt so the server has none of them cached.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import msgspec

from scoville.client import hostload
from scoville.client.config import ClientConfig
from scoville.client.errors import ClientError
from scoville.client.fastpath import ClientLimitError
from scoville.client.probe import probe
from scoville.client.scrape import Scraper
from scoville.client.workers import WorkerPool, auto_workers, ensure_open_files, run_point_here
from scoville.errors import UserError
from scoville.load import LoadPoint
from scoville.metrics import COMPAT_MODES, recompute
from scoville.power.csv_meter import read_power_csv
from scoville.power.nvml import NvmlSampler
from scoville.power.sources import PowerError, PowerPlan
from scoville.results.manifest import (
    Clock,
    ClockSegment,
    EnergyCount,
    LoadPlan,
    Manifest,
    PlannedPoint,
    ServerMetrics,
    base_manifest,
)
from scoville.results.schema import PointOutcome, RequestRecord
from scoville.results.store import POWER, RunError, RunLock, RunWriter, measured_points, read_journal, read_manifest
from scoville.workload.scenarios import fit_context, workload_from_dict

EXECUTORS = ("local", "ray")
# Starts the built-in emulator a run recorded (its manifest entry, the API key) for the ``with`` block and
# yields its base URL: given by the layer above (``scoville.measurement``), so the client never imports it.
EmulatorStarter = Callable[[dict[str, Any], str | None], contextlib.AbstractContextManager[str]]


class Observer(Protocol):
    """What a progress display is told (all optional to act on)."""

    def start_point(self, point: LoadPoint, position: int, total: int) -> None: ...
    def record(self, rec: RequestRecord) -> None: ...
    def end_point(self, point: LoadPoint, row: dict[str, Any] | None) -> None: ...
    def warn(self, message: str) -> None: ...


class AdaptivePlan(Protocol):
    """Load points chosen one at a time from what the earlier ones measured (``scoville.slo_search.SloSearch``)."""

    @property
    def widest_concurrency(self) -> int: ...
    def next_point(self, index: int) -> LoadPoint | None: ...
    def observe(self, point: LoadPoint, row: dict[str, Any] | None, seconds: float) -> Any: ...
    def summary(self) -> dict[str, Any]: ...


class _Silent:
    def start_point(self, point: LoadPoint, position: int, total: int) -> None:
        pass

    def record(self, rec: RequestRecord) -> None:
        pass

    def end_point(self, point: LoadPoint, row: dict[str, Any] | None) -> None:
        pass

    def warn(self, message: str) -> None:
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
    max_model_len: int | None = None    # the server's context window; None = as its /v1/models says
    scrape_interval: float = 1.0        # seconds between scrapes of the server's /metrics; 0 = off
    plan: AdaptivePlan | None = None    # points proposed one by one (an SLO search); ``points`` starts empty


@dataclass
class SweepResult:
    run_dir: Path
    rows: list[dict[str, Any]]
    status: str
    outcomes: list[PointOutcome] = field(default_factory=list)


def resume_hint(run_dir: Path) -> str:
    return f"resume with: scoville sweep --resume {run_dir}"


class SweepInterrupted(Exception):
    """Ctrl-C or SIGTERM: the run was stopped and marked "interrupted"; ``run_dir`` can be resumed."""

    def __init__(self, result: SweepResult) -> None:
        super().__init__(f"interrupted; {resume_hint(result.run_dir)}")
        self.result = result


class SweepStopped(ClientError):
    """The sweep could not go on (server gone, disk full, no sockets left); the run is kept as "interrupted"."""

    def __init__(self, why: str, result: SweepResult) -> None:
        kept = len(read_journal(result.run_dir))
        super().__init__(f"{why}; the {kept} finished requests are kept; {resume_hint(result.run_dir)}")
        self.result = result


class _ServerGone(Exception):
    def __init__(self, outcome: PointOutcome, label: str) -> None:
        super().__init__(f"every request of point {label} failed to connect ({outcome.top_error}); "
                         "is the server still running?")


def planned(point: LoadPoint) -> PlannedPoint:
    """A point as the manifest's load plan records it: the load and its label."""
    return PlannedPoint(**point.to_dict(), label=point.describe())


def load_plan(points: list[LoadPoint], seed: int, workers: int) -> LoadPlan:
    """The manifest's plan of a sweep, written before its first point: what a resume measures again."""
    return LoadPlan(points=[planned(p) for p in points], seed=seed, mode=points[0].mode if points else None,
                    workers=workers)


def _workload_dict(workload: Any) -> dict[str, Any]:
    to_dict = getattr(workload, "to_dict", None)
    return to_dict() if to_dict is not None else msgspec.to_builtins(workload)


def _manifest(sweep: Sweep, workers: int, probe_info: dict[str, Any], command: list[str] | None) -> Manifest:
    target = dict(sweep.cfg.to_manifest(), models_served=probe_info.get("models", []),
                  max_model_len=sweep.max_model_len)
    if sweep.emulator is not None:
        target["emulator"] = sweep.emulator
    model = dict(sweep.model)
    model["name"] = model.get("name") or sweep.cfg.model
    m = base_manifest(source="measured", target=target, system=sweep.system, model=model, serving=sweep.serving,
                      workload=_workload_dict(sweep.workload),
                      load_plan=msgspec.to_builtins(load_plan(sweep.points, sweep.seed, workers)),
                      power=sweep.power.manifest(), compat=sweep.compat, slo=sweep.slo, command=command)
    return m


def point_outcome(point: int, attempt: int, t_start: float, records: list[RequestRecord],
                  reuses_prefixes: bool) -> PointOutcome:
    """How one attempt at a point went (see ``PointOutcome``)."""
    failed = [r for r in records if not r.ok]
    messages = Counter((r.error or "")[:160] for r in failed)
    ok = [r for r in records if r.ok]
    cached = sum(r.cached_tokens or 0 for r in ok)
    return PointOutcome(
        point=point, attempt=attempt, t_start=t_start, requests=len(records), ok=sum(1 for r in ok if not r.warmup),
        failed=len(failed), errors=dict(Counter(r.error_kind or "stream" for r in failed)),
        top_error=messages.most_common(1)[0][0] if messages else None, cached_tokens=cached,
        input_tokens=sum(r.input_tokens for r in ok), unexpected_cache_hits=cached > 0 and not reuses_prefixes)


def cache_warning(label: str, outcome: PointOutcome) -> str:
    share = outcome.cached_tokens / outcome.input_tokens if outcome.input_tokens else 0.0
    return (f"point {label}: the server reported {outcome.cached_tokens} cached prompt tokens ({share:.0%} of input) "
            "on a workload whose prompts should all be new; its prefix cache held them from an earlier run "
            "(the same --seed?), so TTFT is too low. Rerun without --seed, or restart the server")


def _flush_power(writer: RunWriter, sampler: NvmlSampler | None) -> None:
    if sampler is not None:
        samples = sampler.drain()
        if samples.num_rows:
            writer.write_power(samples)


def _write_csv_power(writer: RunWriter, csv_path: str) -> None:
    """Replace the run's power samples with the meter file's (re-read whole, so resumes do not double it)."""
    samples = read_power_csv(csv_path, writer.manifest.clock.segments if writer.manifest.clock else [])
    (writer.run_dir / POWER).unlink(missing_ok=True)
    writer.write_power(samples)


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM (``kill``, a batch system, a container stop) stops the sweep as Ctrl-C does.

    It is handed to whatever handles SIGINT at that moment (the event loop's
    runner cancels in-flight requests; elsewhere a KeyboardInterrupt), so the
    run ends "interrupted" and resumable instead of killed "running".
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def forward(signum: int, frame: Any) -> None:
        handler = signal.getsignal(signal.SIGINT)
        if not callable(handler):
            raise KeyboardInterrupt
        handler(signal.SIGINT, frame)

    previous = signal.signal(signal.SIGTERM, forward)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _uninterruptible() -> Iterator[None]:
    """Ignore Ctrl-C and SIGTERM while the run is being closed.

    A second Ctrl-C used to land in the middle of closing the run and leave it
    "running" with the exit code 0; closing takes seconds at most.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _flush_energy(writer: RunWriter, sampler: NvmlSampler | None, mark: dict[str, Any] | None, point: int) -> None:
    if sampler is None or mark is None:
        return
    end = sampler.mark()
    if end["joules"]:
        power = writer.manifest.power
        power.energy_counter = [*(power.energy_counter or []), EnergyCount(
            point=point, t_start=mark["t"], t_end=end["t"],
            joules={d: end["joules"][d] - mark["joules"].get(d, 0.0) for d in end["joules"]})]
    _flush_power(writer, sampler)


def _measure_point(writer: RunWriter, sweep: Sweep, pool: Any, sampler: NvmlSampler | None, point: LoadPoint,
                   observer: Observer, scraper: Scraper) -> tuple[PointOutcome, dict[str, Any] | None]:
    """Send one point, journal every record as it comes, compact it, and record how it went; returns the
    outcome and the point's metrics row (None when it measured nothing)."""
    records: list[RequestRecord] = []

    def on_record(rec: RequestRecord) -> None:
        writer.record(rec)
        records.append(rec)
        observer.record(rec)

    mark = sampler.mark() if sampler is not None else None
    scraper.start(point.index)
    t_start = writer.now()
    run_point = pool.run_point if pool is not None else functools.partial(run_point_here, sweep.cfg, sweep.workload)
    # this process and its local workers; Ray's client actors run elsewhere and are not read
    pids = [os.getpid(), *(p.pid for p in getattr(pool, "procs", []) if p.pid is not None)]
    host_start = hostload.sample(pids)
    run_point(point, t0=writer.t0, t_start=t_start, on_record=on_record, seed=sweep.seed, salt=writer.attempt)
    host_end = hostload.sample(pids)   # before the end scrape, whose wait for the server is no client time
    scraper.stop(writer.run_dir, sum(1 for r in records if r.ok))
    _flush_energy(writer, sampler, mark, point.index)
    writer.write_point(point.index, records)
    outcome = point_outcome(point.index, writer.attempt, t_start, records,
                            getattr(sweep.workload, "reuses_prefixes", True))
    outcome.client_cpu_share = hostload.client_cpu_share(host_start, host_end)
    outcome.steal_share = hostload.steal_share(host_start, host_end)
    writer.manifest.point_results = {**(writer.manifest.point_results or {}), str(point.index): outcome}
    writer.save_manifest()
    rows = recompute(writer.run_dir)
    row = next((r for r in rows if r["point"] == point.index), None)
    observer.end_point(point, row)
    if outcome.unexpected_cache_hits:
        observer.warn(cache_warning(point.describe(), outcome))
    return outcome, row


def _start_sampler(writer: RunWriter, sweep: Sweep) -> NvmlSampler | None:
    if sweep.power.source != "nvml":
        return None
    sampler = NvmlSampler(writer.now, devices=sweep.power.nvml_devices)
    writer.manifest.power.nvml_device_names = sampler.names
    sampler.start()
    return sampler


def _close_run(writer: RunWriter, sweep: Sweep, pool: Any, sampler: NvmlSampler | None,
               status: str) -> tuple[list[dict[str, Any]], UserError | None]:
    """Stop the load and the power sampler, store what they hold, mark the run; every step is tried.

    Returns the metric rows and the first error met (a full disk can fail each
    step); the caller reports it once the run is marked.
    """
    errors: list[UserError] = []
    rows: list[dict[str, Any]] = []
    if hasattr(pool, "describe"):  # final worker list, clock offsets and losses
        writer.manifest.executor = pool.describe()
    if pool is not None:
        pool.close()
    if sampler is not None:
        sampler.stop()
        with contextlib.suppress(RunError):
            _flush_power(writer, sampler)
    if sweep.power.source == "csv" and sweep.power.csv_path:
        try:
            _write_csv_power(writer, sweep.power.csv_path)
        except PowerError as e:  # the requests are on disk: finish the run first, then say why
            errors.append(PowerError(f"{e} (the measured requests are kept in {writer.run_dir})"))
        except RunError as e:
            errors.append(e)
    try:
        rows = recompute(writer.run_dir)
    except RunError as e:
        errors.append(e)
    try:
        writer.finish(status)
    except RunError as e:
        errors.append(e)
    return rows, errors[0] if errors else None


def _planned_points(writer: RunWriter, plan: AdaptivePlan, points: list[LoadPoint]) -> Iterator[LoadPoint]:
    """The points an adaptive plan proposes, each added to the manifest's load plan before it is measured
    (so show, report and compare read a search run as any other)."""
    while (point := plan.next_point(len(points))) is not None:
        points.append(point)
        writer.manifest.load_plan.points.append(planned(point))
        writer.manifest.load_plan.mode = point.mode
        writer.save_manifest()
        yield point


def _execute(writer: RunWriter, sweep: Sweep, pool: Any, observer: Observer) -> SweepResult:
    """Measure the points the run still lacks; end the run "complete" or "interrupted", never "running"."""
    done = measured_points(writer.run_dir)
    todo = [p for p in sweep.points if p.index not in done]
    points = iter(todo) if sweep.plan is None else _planned_points(writer, sweep.plan, sweep.points)
    outcomes: list[PointOutcome] = []
    status, stop_error = "interrupted", None
    sampler = None
    scraper = Scraper(sweep.cfg, writer.now, sweep.scrape_interval, observer.warn)
    try:
        clock = writer.manifest.clock = writer.manifest.clock or Clock()
        clock.segments.append(ClockSegment(t=writer.now(), unix=time.time()))
        if hasattr(pool, "describe"):
            writer.manifest.executor = pool.describe()
        if sweep.plan is not None:
            writer.manifest.slo_search = sweep.plan.summary()
        writer.save_manifest()
        sampler = _start_sampler(writer, sweep)
        scraper.probe()
        writer.manifest.server_metrics = msgspec.convert(scraper.manifest(), ServerMetrics)
        for position, point in enumerate(points):
            observer.start_point(point, position, len(todo) if sweep.plan is None else 0)  # 0: not known
            t_point = writer.now()
            outcome, row = _measure_point(writer, sweep, pool, sampler, point, observer, scraper)
            outcomes.append(outcome)
            if outcomes[-1].server_unreachable:
                raise _ServerGone(outcomes[-1], point.describe())
            if sweep.plan is not None:
                sweep.plan.observe(point, row, writer.now() - t_point)
                writer.manifest.slo_search = sweep.plan.summary()
        status = "complete"
    except KeyboardInterrupt:
        pass
    except (UserError, ClientLimitError, _ServerGone) as e:
        stop_error = e
    finally:
        scraper.close()
        with _uninterruptible():
            rows, close_error = _close_run(writer, sweep, pool, sampler, status)
    result = SweepResult(writer.run_dir, rows, status, outcomes)
    if stop_error is not None:
        raise SweepStopped(str(stop_error), result)
    if close_error is not None:
        if isinstance(close_error, PowerError):
            raise close_error
        raise SweepStopped(str(close_error), result)
    if status == "interrupted":
        raise SweepInterrupted(result)
    return result


def _point_runner(sweep: Sweep, workers: int) -> Any:
    """What drives each point, started now: Ray client actors, local worker processes, or (None) this process."""
    if sweep.executor == "ray":
        from scoville.client.ray_pool import RayLoadCoordinator  # imports Ray only when asked

        coordinator = RayLoadCoordinator(sweep.cfg, sweep.workload, workers=sweep.ray_workers,
                                         ray_address=sweep.ray_address)
        coordinator.start_workers()
        return coordinator
    return WorkerPool(workers, sweep.cfg, sweep.workload) if workers > 1 else None


def _widest(sweep: Sweep) -> int:
    """The most requests any point of the sweep may have in flight (an adaptive plan's ceiling included)."""
    widest = max((p.concurrency or 1 for p in sweep.points), default=1)
    return max(widest, sweep.plan.widest_concurrency) if sweep.plan is not None else widest


def _workers_for(sweep: Sweep) -> int:
    if sweep.workers > 0:
        return sweep.workers
    return auto_workers(_widest(sweep))


def check_options(*, executor: str, compat: str, max_model_len: int | None) -> None:
    """The named choices of a sweep, checked before anything starts (an emulator, a probe, a run)."""
    if executor not in EXECUTORS:
        raise ClientError(f"unknown --executor {executor!r}; use local or ray")
    if executor == "ray":
        from scoville.executor.ray_executor import ray_module

        ray_module()  # a one-line error naming the install command when Ray is missing
    if compat not in COMPAT_MODES:
        raise ClientError(f"unknown --compat {compat!r}; use inferencex or clean")
    if max_model_len is not None and max_model_len < 2:
        raise ClientError(f"--max-model-len must be at least 2 tokens (got {max_model_len})")


def validate(sweep: Sweep) -> None:
    """Everything that can be checked before a request is sent or a run directory made (ClientError, one line)."""
    if not sweep.points and sweep.plan is None:
        raise ClientError("nothing to measure: the load plan has no points")
    check_options(executor=sweep.executor, compat=sweep.compat, max_model_len=sweep.max_model_len)
    if not (0 <= sweep.scrape_interval < float("inf")):  # also refuses NaN
        raise ClientError(f"--scrape-interval must be 0 (off) or a positive number of seconds "
                          f"(got {sweep.scrape_interval:g})")
    if sweep.executor == "local":
        ensure_open_files(-(-_widest(sweep) // _workers_for(sweep)))


def _fit(sweep: Sweep, probe_info: dict[str, Any]) -> None:
    """Shape the workload to the server's context window (the flag's, else the one /v1/models gives)."""
    sweep.max_model_len = sweep.max_model_len or probe_info.get("max_model_len")
    if sweep.max_model_len:
        # Chat prompts gain the chat template's tokens on the server; leave them room.
        margin = 0 if sweep.cfg.api == "completions" else max(32, sweep.max_model_len // 50)
        sweep.workload = fit_context(sweep.workload, sweep.max_model_len - margin)


def run_sweep(sweep: Sweep, runs_root: Path, *, observer: Observer | None = None,
              command: list[str] | None = None) -> SweepResult:
    """Measure every point of ``sweep`` into a new run under ``runs_root``.

    Raises ClientError (one line) when the target is unusable or an option is
    wrong, before any run directory is created; SweepInterrupted after Ctrl-C
    or SIGTERM, and SweepStopped when the sweep cannot go on, with the run kept.
    """
    validate(sweep)
    with _terminate_as_interrupt():
        info = probe(sweep.cfg)
        _fit(sweep, info)
        if sweep.power.source == "nvml":  # fail before a run directory exists
            NvmlSampler(time.perf_counter, devices=sweep.power.nvml_devices).stop()
        workers = _workers_for(sweep)
        pool = _point_runner(sweep, workers)
        try:
            writer = RunWriter.create(runs_root, _manifest(sweep, workers, info, command))
        except BaseException:
            if pool is not None:
                pool.close()
            raise
        return _execute(writer, sweep, pool, observer or _Silent())


def sweep_from_manifest(manifest: Manifest, *, api_key: str | None = None,
                        base_url: str | None = None) -> Sweep:
    """The Sweep a manifest describes (the API key is not in it and must be given again)."""
    target = msgspec.to_builtins(manifest.target)
    emulator = target.pop("emulator", None)
    if base_url:  # set before ClientConfig so it is normalised as --url is (trailing "/" or "/v1" dropped)
        target["base_url"] = base_url
    fields = set(ClientConfig.__struct_fields__)
    cfg = ClientConfig(**{k: v for k, v in target.items() if k in fields})
    cfg.api_key = api_key
    power = manifest.power
    plan = PowerPlan(source=power.source, boundary=power.boundary or "chip",
                     watts_per_accelerator=power.watts_per_accelerator, csv_path=power.csv_path,
                     nvml_devices=power.nvml_devices)
    plan_info = manifest.load_plan
    return Sweep(cfg=cfg, workload=workload_from_dict(manifest.workload),
                 points=[p.load_point() for p in plan_info.points], power=plan,
                 system=msgspec.to_builtins(manifest.system), model=msgspec.to_builtins(manifest.model),
                 serving=msgspec.to_builtins(manifest.serving), compat=manifest.compat,
                 seed=plan_info.seed or 0, workers=plan_info.workers or 0,
                 emulator=emulator, slo=manifest.slo or None, max_model_len=manifest.target.max_model_len,
                 scrape_interval=manifest.server_metrics.interval_s if manifest.server_metrics else 1.0)


def resume_sweep(run_dir: Path, *, api_key: str | None = None, base_url: str | None = None,
                 observer: Observer | None = None, start_emulator: EmulatorStarter | None = None) -> SweepResult:
    """Continue an interrupted or killed run: keep the points that measured something, redo the rest.

    The run's lock is taken first, so a run still being measured (or resumed
    elsewhere) is refused in one line before anything is started or sent. A run
    that measured the built-in emulator needs ``base_url`` or ``start_emulator``.
    """
    lock = RunLock(run_dir)
    try:
        manifest = read_manifest(run_dir)
        if manifest.source != "measured":
            raise ClientError(f"{run_dir} is a {manifest.source} run; only measured runs resume here")
        if manifest.slo_search is not None:
            raise ClientError(f"{run_dir} is an SLO search, which cannot be resumed; run the search again "
                              "(its measured points stay in this run)")
        sweep = sweep_from_manifest(manifest, api_key=api_key, base_url=base_url)
        validate(sweep)
    except BaseException:
        lock.release()
        raise
    with contextlib.ExitStack() as stack, _terminate_as_interrupt():
        try:
            if sweep.emulator is not None and not base_url:
                if start_emulator is None:
                    raise ClientError(f"{run_dir} measured the built-in emulator; give the URL of a server to "
                                      "resume against, or resume through scoville.measurement.resume_run")
                sweep.cfg.base_url = stack.enter_context(start_emulator(sweep.emulator, api_key))
            probe(sweep.cfg)
            pool = _point_runner(sweep, _workers_for(sweep))
        except BaseException:
            lock.release()
            raise
        try:
            writer = RunWriter.resume(run_dir, lock=lock)
        except BaseException:
            if pool is not None:
                pool.close()
            raise
        target = writer.manifest.target
        if target.base_url != sweep.cfg.base_url:  # --url given, or a fresh emulator on a new port
            target.base_url, target.endpoint = sweep.cfg.base_url, sweep.cfg.endpoint
        return _execute(writer, sweep, pool, observer or _Silent())
