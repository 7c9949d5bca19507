"""``sweep`` and ``run`` as a library call: one typed spec in, a measured run directory out.

``SweepSpec`` is the commands' options (``scoville sweep --help`` lists the same names); ``sweep`` applies the
defaults a user relies on (no ``url``: the built-in emulator, its system and a 1024/128 workload; a URL: 1k1k;
the power basis and price from the catalog), builds the load plan or the SLO search, and measures; ``resume_run``
continues an interrupted run. The CLI only builds the spec, shows progress and prints; notebooks and services
call the same functions.

Starting the built-in emulator is this layer's job: the measuring client (``scoville.client``) is handed a URL,
or for a resumed run a way to start one, and never imports the emulator.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from pydantic import Field

from scoville.load import DEFAULT_CONCURRENCY, LoadSpec
from scoville.spec import Spec
from scoville.workload.options import WorkloadSpec

if TYPE_CHECKING:
    from scoville.client.sweep import Observer, SweepResult


class _EmulatorDefaults(TypedDict):
    """``EMULATOR_DEFAULTS``'s keys, typed: each default goes to a typed parameter (hardware name, ISL, ...)."""

    hardware: str
    model: str
    isl: int
    osl: int
    concurrency: str


# What a sweep without --url measures: the built-in emulator's system and a short InferenceX-shaped workload.
EMULATOR_DEFAULTS: _EmulatorDefaults = {"hardware": "h200", "model": "llama-3.1-8b", "isl": 1024, "osl": 128,
                                         "concurrency": "1,2,4,8,16,32,64"}


class SweepSpec(Spec):
    """Everything ``scoville sweep`` (and ``run``, with ``single``) takes: the target, what to send and how hard,
    the power and price basis, the SLO search, and where the run goes."""

    url: str | None = Field(None, description="an OpenAI-compatible server; None: the built-in emulator")
    api_key: str | None = Field(None, repr=False, description="bearer token (never written to disk)")
    model: str | None = Field(None, description="model to request (default: the server's first)")
    api: Literal["completions", "chat"] = "completions"
    ignore_eos: bool = True
    timeout: float = Field(600.0, gt=0)
    read_timeout: float = Field(120.0, gt=0)
    tokenizer: str | None = None
    vocab_size: int = Field(32000, ge=2)
    max_model_len: int | None = Field(None, ge=1)
    scrape_interval: float = Field(1.0, ge=0)
    workload: WorkloadSpec = WorkloadSpec()
    load: LoadSpec = LoadSpec()
    single: bool = Field(False, description="`run`: one load only")
    seed: int | None = Field(None, description="None: a new one per run, so no prompt is in the server's cache")
    compat: Literal["inferencex", "clean"] = "inferencex"
    hardware: str | None = None
    accelerators: int | None = Field(None, ge=1)
    power: Literal["rated", "all-in", "nvml", "csv"] | None = None
    power_csv: Path | None = None
    power_boundary: Literal["chip", "board", "node", "rack"] | None = None
    rated_watts: float | None = Field(None, gt=0)
    cost_per_hour: str | None = Field(None, description="$ per accelerator-hour, or a catalog preset")
    slo: str | None = None
    search: bool = False
    search_rate: float | None = None
    search_max: float | None = None
    predict: str | None = None
    profile: Path | None = None
    search_repeats: int = Field(3, ge=1)
    runs: Path = Path("runs")
    report: bool = Field(True, description="write report.html into the run when it finishes (about 1 s)")
    workers: int = Field(0, ge=0)
    executor: Literal["local", "ray"] = "local"
    ray_address: str | None = None
    ray_workers: int = Field(2, ge=1)


def sweep(spec: SweepSpec, *, observer: Observer | None = None, command: list[str] | None = None,
          on_info: Callable[[str], None] | None = None) -> SweepResult:
    """Measure what ``spec`` describes and return the finished run (raises ``SweepInterrupted`` on Ctrl-C with
    every finished request kept, ``SweepStopped`` when the server went away, ``UserError`` for bad options)."""
    # the measuring stack (aiohttp, the catalog) loads only when a sweep runs
    from scoville.client.config import ClientConfig
    from scoville.client.errors import ClientError
    from scoville.client.sweep import Sweep, check_options, run_sweep
    from scoville.power.sources import cost_per_hour, plan_power, system_info
    from scoville.search_plan import build_search

    seed = spec.seed if spec.seed is not None else secrets.randbelow(2**31)
    check_options(executor=spec.executor, compat=spec.compat, max_model_len=spec.max_model_len)
    if spec.ray_address and spec.executor != "ray":
        raise ClientError("--ray-address only applies with --executor ray")
    if spec.load.repeats > 1 and (spec.search or spec.search_rate is not None):
        raise ClientError("--repeats measures a fixed plan; a --search repeats at its boundary (--search-repeats)")
    workload_spec, hardware, rated_watts = spec.workload, spec.hardware, spec.rated_watts
    unnamed = not (workload_spec.scenario or workload_spec.isl or workload_spec.osl or workload_spec.trace)
    with contextlib.ExitStack() as stack:
        emulator: dict[str, Any] | None = None
        default_c = DEFAULT_CONCURRENCY
        system_defaults: dict[str, Any] = {}
        if spec.url is None:
            from scoville.emulator.launch import spawn_emulator  # the emulator's stack only when it is measured

            hw, mdl = hardware or EMULATOR_DEFAULTS["hardware"], spec.model or EMULATOR_DEFAULTS["model"]
            if on_info is not None:
                on_info(f"no --url: measuring the built-in emulator ({hw}, {mdl})")
            handle = stack.enter_context(spawn_emulator(hw, mdl, api_key=spec.api_key))
            target_url, model_name = handle.base_url, handle.model
            system_defaults = dict(getattr(handle, "system", {}) or {})
            emulator = {"hardware": hw, "model": mdl, "config": getattr(handle, "config", None)}
            hardware = system_defaults.get("hardware") or hw
            if unnamed:
                workload_spec = workload_spec.model_copy(update={"isl": EMULATOR_DEFAULTS["isl"],
                                                                 "osl": EMULATOR_DEFAULTS["osl"]})
            default_c = EMULATOR_DEFAULTS["concurrency"]
        else:
            target_url, model_name = spec.url, spec.model or ""
            if unnamed:
                workload_spec = workload_spec.model_copy(update={"scenario": "1k1k"})
        workload = workload_spec.resolve(seed=seed)
        n_acc = spec.accelerators or int(system_defaults.get("accelerators") or 1)
        load = spec.load
        slo_limits, search_plan = build_search(
            slo_text=spec.slo, search=spec.search, search_rate=spec.search_rate, search_max=spec.search_max,
            predict=spec.predict, profile=spec.profile, repeats=spec.search_repeats, workload=workload,
            concurrency=load.concurrency, rate=load.rate, single=spec.single, num_requests=load.num_requests,
            warmup_requests=load.warmup_requests, duration=load.duration, burstiness=load.burstiness,
            max_concurrency=load.max_concurrency, accelerators=n_acc)
        points = [] if search_plan is not None else load.plan(workload=workload, default_concurrency=default_c,
                                                               single=spec.single)
        if rated_watts is None and system_defaults.get("rated_watts_per_accelerator") and spec.power != "all-in":
            rated_watts = system_defaults["rated_watts_per_accelerator"]
        source = spec.power or ("rated" if (hardware or rated_watts) else "none")
        power = plan_power(source, hardware=hardware, accelerators=n_acc, rated_watts=rated_watts,
                           csv_path=str(spec.power_csv) if spec.power_csv else None, boundary=spec.power_boundary)
        cost = cost_per_hour(spec.cost_per_hour, hardware)
        if cost is None:
            cost = system_defaults.get("cost_per_accelerator_hour")
        cfg = ClientConfig(base_url=target_url, model=model_name, api=spec.api, api_key=spec.api_key,
                           ignore_eos=spec.ignore_eos, timeout_s=spec.timeout, read_timeout_s=spec.read_timeout,
                           vocab_size=spec.vocab_size, tokenizer=spec.tokenizer)
        per_request = (slo_limits.per_request() or None) if slo_limits is not None else None
        run = Sweep(cfg=cfg, workload=workload, points=points, power=power,
                    system=system_info(hardware, n_acc, power, cost), model={"name": model_name or None},
                    compat=spec.compat, seed=seed, workers=spec.workers, emulator=emulator, executor=spec.executor,
                    ray_address=spec.ray_address, ray_workers=spec.ray_workers, max_model_len=spec.max_model_len,
                    scrape_interval=spec.scrape_interval, plan=search_plan, slo=per_request)
        result = run_sweep(run, spec.runs, observer=observer, command=command)
    if spec.report:
        write_run_report(result.run_dir, on_info)
    return result


def write_run_report(run_dir: Path, on_info: Callable[[str], None] | None = None) -> Path | None:
    """``<run_dir>/report.html`` for a finished measurement. The run is on disk already, so a report that
    cannot be written is a warning through ``on_info`` (None: silent), never an error that hides the result."""
    from scoville.reporting.html import write_report

    try:
        return write_report([run_dir], run_dir / "report.html")
    except Exception as e:  # any failure of the report leaves the measurement intact
        if on_info is not None:
            on_info(f"warning: report not written ({type(e).__name__}: {e}); the run is complete in {run_dir}")
        return None


@contextlib.contextmanager
def _restart_emulator(recorded: dict[str, Any], api_key: str | None) -> Iterator[str]:
    """The emulator a run measured (its manifest's ``target.emulator``), started afresh on a free port."""
    from scoville.emulator.launch import spawn_emulator

    with spawn_emulator(recorded["hardware"], recorded["model"], recorded.get("config"), api_key=api_key) as handle:
        yield handle.base_url


def resume_run(run: str | Path, *, runs: Path = Path("runs"), url: str | None = None, api_key: str | None = None,
               observer: Observer | None = None, report: bool = True,
               on_info: Callable[[str], None] | None = None) -> SweepResult:
    """Continue the interrupted or killed run ``run`` (a path, an id under ``runs``, or ``latest``), redoing the
    points that measured nothing; a run of the built-in emulator gets a fresh one unless ``url`` is given. Its
    report is written afresh (``report``), as a sweep's is."""
    from scoville.client.sweep import resume_sweep
    from scoville.results.catalog import resolve_run

    result = resume_sweep(resolve_run(runs, str(run)), api_key=api_key, base_url=url, observer=observer,
                          start_emulator=_restart_emulator)
    if report:
        write_run_report(result.run_dir, on_info)
    return result
