"""``scoville simulate``: predict a system's frontier and write it as a run.

Thin: options become a SimConfig (pinned with ``--config``, else the configuration search over layouts,
drafts, token budgets and disaggregated pools), a workload and a load plan; ``scoville.sim`` does the
work; this module shows progress and prints the summary table and the run directory.

Fidelity: the search ranks deployments with the steady-state estimator; ``--fidelity analytic`` (the
default for single-turn workloads) writes its frontier directly, ``--fidelity des`` replays each frontier
point request by request in the discrete-event engine (always so for session workloads and traces,
whose prefix caching and think times only the engine follows).
"""

from __future__ import annotations

import json
from contextlib import nullcontext
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from scoville.cli.point_table import POINT_COLUMNS, model_text, points_table
from scoville.cli.workload_options import (
    IdleGapCapOption,
    MaxSessionsOption,
    ReplayOption,
    SampleOption,
    ThinkScaleOption,
    TimeScaleOption,
    TraceBlockSizeOption,
    TraceFormatOption,
    TraceOption,
    workload_kwargs,
)
from scoville.executor.options import ExecutorOption, RayAddressOption
from scoville.load import LoadPoint, load_plan
from scoville.power.sources import manifest_power_basis
from scoville.results.store import read_manifest, read_point_metrics
from scoville.sim.config import SimConfig, SimConfigError, SpeculativeConfig

console = Console(stderr=True)
DEFAULT_CONCURRENCY = "1-1024"
FIDELITIES = ("analytic", "des")


def _progress() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console, transient=True)


def parse_mtp(value: str | None) -> tuple[str, SpeculativeConfig | None]:
    """``--mtp``: ``auto`` (search MTP drafts where the model has MTP heads), ``off``, or ``K[:ACCEPT]`` (pin K
    draft tokens, each accepted with probability ACCEPT, default 0.7: MTP or an EAGLE-style draft head)."""
    v = (value or "auto").strip().lower()
    if v in ("auto", "off"):
        return v, None
    k, _, a = v.partition(":")
    try:
        spec = SpeculativeConfig(num_draft_tokens=int(k), acceptance_rate=float(a) if a else 0.7)
    except ValueError:
        raise SimConfigError(f"--mtp {value!r}: use auto, off, or K[:ACCEPT] such as 2:0.8 "
                             "(1 <= K <= 16, 0 <= ACCEPT <= 1)") from None
    return "pinned", spec


def resolve_kv_dtype(value: str | None, hardware: str) -> str:
    """``--kv-dtype auto``: FP8 where the chip has FP8 math (what InferenceX's recipes run), else BF16."""
    from scoville.sim.hardware import load_hardware

    v = (value or "auto").lower()
    if v == "auto":
        return "fp8" if "fp8" in load_hardware(hardware).flops_tflops else "bf16"
    if v not in ("bf16", "fp8"):
        raise SimConfigError(f"--kv-dtype {value!r}: use auto, bf16 or fp8")
    return v


def mean_lengths(workload: object) -> tuple[float, float, float]:
    """(mean input, mean output, longest ÷ mean output) of a workload's requests (the estimator's inputs)."""
    import numpy as np

    if getattr(workload, "kind", None) == "synthetic":
        isl_w, osl_w = workload.lengths(4096)  # type: ignore[attr-defined]
    else:
        reqs = [r for s in workload.sessions(256) for r in s.requests]  # type: ignore[attr-defined]
        isl_w = np.array([r.input_tokens for r in reqs], dtype=float)
        osl_w = np.array([r.output_tokens for r in reqs], dtype=float)
    return float(np.mean(isl_w)), float(np.mean(osl_w)), float(np.max(osl_w) / max(np.mean(osl_w), 1.0))


def register(app: typer.Typer) -> None:
    @app.command("simulate")
    def simulate_cmd(
        hardware: Annotated[Optional[str], typer.Option(help="System from the catalog (h200, gb300, mi355x, jalapeno...) "
                                                             "or a hardware YAML path.")] = None,
        model: Annotated[Optional[str], typer.Option(help="Model from the catalog (deepseek-r1, gpt-oss-120b...) "
                                                          "or a config.json path.")] = None,
        scenario: Annotated[Optional[str], typer.Option(help="Workload: 8k1k, 1k1k, chat-multiturn, ...")] = None,
        isl: Annotated[Optional[int], typer.Option(help="Custom input length (with --osl).")] = None,
        osl: Annotated[Optional[int], typer.Option(help="Custom output length (with --isl).")] = None,
        concurrency: Annotated[Optional[str], typer.Option(
            help="Closed-loop levels: 1,2,4 or 1-1024 (doubling); with the search, the range it covers.")] = None,
        rate: Annotated[Optional[str], typer.Option(help="Open-loop request rates (req/s), e.g. 1,2,4 (--config).")] = None,
        config: Annotated[Optional[Path], typer.Option(help="Pin one SimConfig (YAML/JSON) instead of searching.")] = None,
        precision: Annotated[Optional[str], typer.Option(
            help="Weight precision: native (checkpoint), fp8, nvfp4/mxfp4/fp4, int4, bf16.")] = None,
        kv_dtype: Annotated[Optional[str], typer.Option("--kv-dtype", help="KV cache: auto (fp8 where supported) | bf16 | fp8.")] = None,
        framework: Annotated[str, typer.Option(help="Serving stack whose kernels and overheads to use: vllm | sglang | trtllm.")] = "vllm",
        mtp: Annotated[Optional[str], typer.Option(
            help="Speculative decoding: auto (search MTP drafts on models with MTP heads) | off | K[:ACCEPT].")] = None,
        max_accelerators: Annotated[Optional[int], typer.Option(
            "--max-accelerators", help="Largest deployment the search may use (default: the scale-up domain, "
                                       "or two domains' worth when the model needs more).")] = None,
        disaggregation: Annotated[bool, typer.Option("--disagg/--no-disagg", help="Search prefill/decode pools too.")] = True,
        fidelity: Annotated[Optional[str], typer.Option(
            help="analytic (estimator, ~1 s) | des (replay every frontier request in the engine).")] = None,
        cost_backend: Annotated[str, typer.Option("--cost-backend", help="Operator times: auto (measured tables "
                                                  "where they exist) | measured | transfer (datasheet only).")] = "auto",
        profile: Annotated[Optional[Path], typer.Option(help="Calibration profile from `scoville calibrate`.")] = None,
        range_ratio: Annotated[Optional[float], typer.Option(help="Lengths uniform from ratio·L to L; 0.8 = InferenceX, 1 = fixed.")] = None,
        burstiness: Annotated[float, typer.Option(help="Gamma shape of --rate arrivals (1 = Poisson).")] = 1.0,
        max_concurrency: Annotated[Optional[int], typer.Option(help="Cap on requests in flight for --rate points.")] = None,
        num_requests: Annotated[Optional[int], typer.Option(help="Measured requests per point (default 10·C; 100 for --rate).")] = None,
        warmup_requests: Annotated[Optional[int], typer.Option(help="Warm-up requests per point (default 2·C).")] = None,
        duration: Annotated[Optional[float], typer.Option(help="Stop sending after this many (simulated) seconds per point.")] = None,
        power: Annotated[str, typer.Option(help="Per-kW power: rated | all-in | model (utilisation; needs --fidelity des).")] = "rated",
        compat: Annotated[str, typer.Option(help="Metric method: inferencex | clean.")] = "inferencex",
        seed: Annotated[int, typer.Option(help="Seed for workload draws and speculative acceptance.")] = 0,
        executor: ExecutorOption = "local",
        ray_address: RayAddressOption = None,
        workers: Annotated[Optional[int], typer.Option(help="Local worker processes that replay --fidelity des "
                                                          "points in parallel (default: one sequential loop).")] = None,
        runs: Annotated[Path, typer.Option("--runs", help="Folder holding run directories.")] = Path("runs"),
        trace: TraceOption = None,
        trace_format: TraceFormatOption = None,
        time_scale: TimeScaleOption = None,
        sample: SampleOption = None,
        max_sessions: MaxSessionsOption = None,
        idle_gap_cap: IdleGapCapOption = None,
        replay: ReplayOption = None,
        trace_block_size: TraceBlockSizeOption = None,
        think_scale: ThinkScaleOption = None,
        json_out: Annotated[bool, typer.Option("--json", help="Print the points as JSON on stdout.")] = False,
    ) -> None:
        """Predict the latency-throughput-energy frontier of a model on a system (searches deployments unless --config)."""
        from scoville.metrics import COMPAT_MODES
        from scoville.workload.scenarios import resolve_workload

        if compat not in COMPAT_MODES:
            raise SimConfigError(f"unknown --compat {compat!r}; use one of {', '.join(COMPAT_MODES)}")
        if fidelity is not None and fidelity not in FIDELITIES:
            raise SimConfigError(f"unknown --fidelity {fidelity!r}; use analytic or des")
        mtp_mode, pinned_spec = parse_mtp(mtp)
        common = dict(framework=framework, cost_backend=cost_backend,
                      profile=str(profile) if profile is not None else None)
        if config is not None:
            base = SimConfig.from_file(config, hardware=hardware, model=model, precision=precision, **common)
        else:
            if not hardware or not model:
                raise SimConfigError("give --hardware and --model (or a --config file that names them)")
            base = SimConfig.parse({"hardware": hardware, "model": model, "precision": precision,
                                    "kv_dtype": resolve_kv_dtype(kv_dtype, hardware),
                                    "speculative": pinned_spec.model_dump() if pinned_spec else None, **common},
                                   where="options")
        workload = resolve_workload(scenario if (scenario or isl or osl or trace) else "8k1k", isl=isl, osl=osl,
                                    range_ratio=range_ratio, seed=seed, **workload_kwargs(
                                        trace=trace, trace_format=trace_format, time_scale=time_scale,
                                        sample=sample, max_sessions=max_sessions, idle_gap_cap=idle_gap_cap,
                                        replay=replay, trace_block_size=trace_block_size, think_scale=think_scale))
        single_turn = getattr(workload, "kind", None) == "synthetic"
        fid = fidelity or ("analytic" if single_turn and config is None else "des")
        if fid == "analytic" and not single_turn:
            raise SimConfigError("--fidelity analytic covers single-turn workloads; sessions and traces need --fidelity des")
        if fid == "analytic" and config is not None:
            raise SimConfigError("--fidelity analytic writes a search's frontier; a pinned --config runs with --fidelity des")
        # the same plan `sweep` builds from the same flags; the search sweeps concurrency, so a timed trace
        # replays at its own times only on a pinned --config
        points = load_plan(concurrency, rate, num_requests=num_requests, warmup_requests=warmup_requests,
                           duration=duration, burstiness=burstiness, max_concurrency=max_concurrency,
                           default_concurrency=DEFAULT_CONCURRENCY, workload=workload if config is not None else None)

        search_info, configs, predictions = None, None, None
        if config is None:
            if rate:
                raise SimConfigError("the configuration search sweeps closed-loop concurrency; give --concurrency "
                                     "(or pin a deployment with --config to simulate --rate points)")
            from scoville.sim.search import SearchSpace, search

            levels = [p.concurrency or 1 for p in points]
            space = SearchSpace(max_accelerators=max_accelerators, mtp="off" if mtp_mode == "off" else "auto",
                                disaggregation=disaggregation, min_concurrency=min(levels),
                                max_concurrency=max(levels))
            mean_isl, mean_osl, spread = mean_lengths(workload)
            with _progress() as bar:
                task = bar.add_task("searching deployments", total=None)
                result = search(base, mean_isl, mean_osl, space=space, osl_spread=spread, points=len(points),
                                progress=lambda done, total: bar.update(task, completed=done, total=total))
            if not result.frontier:
                raise SimConfigError(f"no deployment of {base.model} on {base.hardware} reached a steady state over "
                                     f"concurrency {min(levels)}-{max(levels)}; widen --concurrency or --max-accelerators")
            search_info = result.summary()
            console.print(f"searched {result.evaluated} candidates in {result.elapsed_s:.1f} s; "
                          f"{len(result.frontier)} frontier points")
            from scoville.sim.analytic import prediction, write_analytic_run

            predictions = [prediction(p) for p in result.frontier]
            if fid == "analytic":
                run_dir = write_analytic_run(base, workload, result.frontier, runs, compat=compat, power=power,
                                             search=search_info)
                _summary(run_dir, json_out)
                return
            configs = [p.config for p in result.frontier]
            points = [LoadPoint(index=i, concurrency=p.concurrency, num_requests=num_requests or 10 * p.concurrency,
                                warmup_requests=2 * p.concurrency if warmup_requests is None else warmup_requests,
                                duration_s=duration)
                      for i, p in enumerate(result.frontier)]
        from scoville.executor import make_executor
        from scoville.sim.driver import simulate_run

        # Points fan out when asked: to a cluster, or to --workers local processes; else one sequential loop
        fan_out = (make_executor(executor, ray_address, max_workers=workers) if executor == "ray" or workers
                   else nullcontext())
        with fan_out as point_executor, _progress() as bar:
            task = bar.add_task("simulating points", total=len(points))
            run_dir = simulate_run(base, workload, points, runs, seed=seed, compat=compat, power=power,
                                   point_configs=configs, search=search_info, executor=point_executor,
                                   predictions=predictions, progress=lambda i, n, p: bar.update(task, completed=i))
        _summary(run_dir, json_out)


def _summary(run_dir: Path, json_out: bool) -> None:
    """Print the points, the deployment behind each, and where the run is."""
    rows = read_point_metrics(run_dir)
    manifest = read_manifest(run_dir)
    if json_out:
        print(json.dumps({"run_dir": str(run_dir), "points": rows}, indent=2, default=str))
        return
    fidelity = manifest.get("target", {}).get("fidelity", "discrete-event")
    title = (f"{manifest['system']['hardware']} · {model_text(manifest['model'])} · "
             f"{(manifest.get('workload') or {}).get('name')} (simulated, {fidelity})")
    out = Console()
    out.print(points_table(escape(title), rows, POINT_COLUMNS))
    plan = manifest.get("load_plan", {}).get("points", [])
    preds = manifest.get("target", {}).get("predictions") or []
    if plan and len({json.dumps(p.get("config"), sort_keys=True) for p in plan}) > 1 or preds:
        table = Table(title="deployment of each point (80% band of the estimate)", header_style="bold")
        for header in ("point", "deployment", "GPUs", "tok/s/user", "tok/s/GPU"):
            table.add_column(header, no_wrap=True)
        for i, p in enumerate(plan):
            cfg = SimConfig.model_validate(p["config"])
            pr = preds[i] if i < len(preds) else None
            band = lambda key: ("" if pr is None else  # noqa: E731
                                f"{pr[key + '_band'][0]:,.0f}-{pr[key + '_band'][1]:,.0f}")
            table.add_row(str(p.get("label")), escape(cfg.label() + _drafts(cfg)), str(cfg.accelerators),
                          band("interactivity"), band("total_throughput_per_accelerator"))
        out.print(table)
    console.print(f"power: {manifest_power_basis(manifest)}")
    console.print(f"report: scoville report {escape(str(run_dir))}", soft_wrap=True)
    print(run_dir)


def _drafts(cfg: SimConfig) -> str:
    return f" mtp{cfg.speculative.num_draft_tokens}" if cfg.speculative else ""
