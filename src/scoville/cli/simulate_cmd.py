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
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from scoville.cli.executor_options import ExecutorOption, RayAddressOption
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
)
from scoville.power.sources import manifest_power_basis
from scoville.results.manifest import JsonObject
from scoville.results.store import read_manifest, read_point_metrics
from scoville.sim.config import SimConfig

console = Console(stderr=True)


def _progress() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console, transient=True)


def register(app: typer.Typer) -> None:
    @app.command("simulate")
    def simulate_cmd(
        hardware: Annotated[str | None, typer.Option(help="System from the catalog (h200, gb300, mi355x, jalapeno...) "
                                                             "or a hardware YAML path.")] = None,
        model: Annotated[str | None, typer.Option(help="Model from the catalog (deepseek-r1, gpt-oss-120b...) "
                                                          "or a config.json path.")] = None,
        scenario: Annotated[str | None, typer.Option(help="Workload: 8k1k, 1k1k, chat-multiturn, ...")] = None,
        isl: Annotated[int | None, typer.Option(help="Custom input length (with --osl).")] = None,
        osl: Annotated[int | None, typer.Option(help="Custom output length (with --isl).")] = None,
        concurrency: Annotated[str | None, typer.Option(
            help="Closed-loop levels: 1,2,4 or 1-1024 (doubling); with the search, the range it covers.")] = None,
        rate: Annotated[str | None, typer.Option(
            help="Open-loop request rates (req/s), e.g. 1,2,4 (--config).")] = None,
        config: Annotated[Path | None, typer.Option(
            help="Pin one SimConfig (YAML/JSON) instead of searching.")] = None,
        precision: Annotated[str | None, typer.Option(
            help="Weight precision: native (checkpoint), fp8, nvfp4/mxfp4/fp4, int4, bf16, fp32 (the whole "
                 "model, as `vllm serve --dtype float32`).")] = None,
        kv_dtype: Annotated[str, typer.Option(
            "--kv-dtype", help="KV cache: auto (fp8 where supported, bf16 where the framework's measured "
                               "attention kernel runs fp8 slower; fp32 for an fp32 model) | bf16 | fp8 "
                               "| fp32.")] = "auto",
        framework: Annotated[str, typer.Option(
            help="Serving stack whose kernels and overheads to use: vllm | sglang | trtllm.")] = "vllm",
        mtp: Annotated[str, typer.Option(
            help="Speculative decoding: auto (search MTP drafts on models with MTP heads) | off | "
                 "K[:ACCEPT].")] = "auto",
        max_accelerators: Annotated[int | None, typer.Option(
            "--max-accelerators", help="Largest deployment the search may use (default: the scale-up domain, "
                                       "or two domains' worth when the model needs more).")] = None,
        disaggregation: Annotated[bool, typer.Option(
            "--disagg/--no-disagg", help="Search prefill/decode pools too.")] = True,
        unified: Annotated[bool, typer.Option(
            "--unified/--no-unified", help="Search unified instances too (--no-unified: disaggregated pools "
                                           "only, as InferenceX's NVL72 results ran).")] = True,
        deployments: Annotated[str, typer.Option(
            help="search (every layout, drafts and pool) | inferencex (only the recipes InferenceX ran for this "
                 "system, model, precision and --framework, at their users: its published curve like for "
                 "like).")] = "search",
        fidelity: Annotated[str | None, typer.Option(
            help="analytic (estimator, ~1 s) | des (replay every frontier request in the engine).")] = None,
        cost_backend: Annotated[str, typer.Option(
            "--cost-backend", help="Operator times: auto (measured tables where they exist) | measured | "
                                   "transfer (datasheet only).")] = "auto",
        profile: Annotated[Path | None, typer.Option(help="Calibration profile from `scoville calibrate`.")] = None,
        range_ratio: Annotated[float | None, typer.Option(
            help="Lengths uniform from ratio·L to L; 0.8 = InferenceX, 1 = fixed.")] = None,
        burstiness: Annotated[float, typer.Option(help="Gamma shape of --rate arrivals (1 = Poisson).")] = 1.0,
        max_concurrency: Annotated[int | None, typer.Option(
            help="Cap on requests in flight for --rate points.")] = None,
        num_requests: Annotated[int | None, typer.Option(
            help="Measured requests per point (default 10·C; 100 for --rate).")] = None,
        warmup_requests: Annotated[int | None, typer.Option(help="Warm-up requests per point (default 2·C).")] = None,
        duration: Annotated[float | None, typer.Option(
            help="Stop sending after this many (simulated) seconds per point.")] = None,
        power: Annotated[str, typer.Option(
            help="Per-kW power: rated | all-in | model (utilisation; needs --fidelity des).")] = "rated",
        compat: Annotated[str, typer.Option(help="Metric method: inferencex | clean.")] = "inferencex",
        seed: Annotated[int, typer.Option(help="Seed for workload draws and speculative acceptance.")] = 0,
        executor: ExecutorOption = "local",
        ray_address: RayAddressOption = None,
        workers: Annotated[int | None, typer.Option(help="Local worker processes that replay --fidelity des "
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
        report: Annotated[bool, typer.Option(
            "--report", help="Also write the run's report.html (about 1 s more).")] = False,
    ) -> None:
        """Predict the latency-throughput-energy frontier of a model on a system
        (searches deployments unless --config)."""
        from scoville.simulation import SimulateSpec, simulate

        spec = SimulateSpec.of_flat(
            hardware=hardware, model=model, config=config, precision=precision, kv_dtype=kv_dtype,
            framework=framework, mtp=mtp, max_accelerators=max_accelerators, disaggregation=disaggregation,
            unified=unified, deployments=deployments, fidelity=fidelity, cost_backend=cost_backend, profile=profile,
            power=power, compat=compat, seed=seed, runs=runs, executor=executor, ray_address=ray_address,
            workers=workers, report=report, scenario=scenario, isl=isl, osl=osl, range_ratio=range_ratio,
            trace=trace, trace_format=trace_format, time_scale=time_scale, sample=sample, max_sessions=max_sessions,
            idle_gap_cap=idle_gap_cap, replay=replay, trace_block_size=trace_block_size, think_scale=think_scale,
            concurrency=concurrency, rate=rate, burstiness=burstiness, max_concurrency=max_concurrency,
            num_requests=num_requests, warmup_requests=warmup_requests, duration=duration)
        with _progress() as bar:
            search_task = bar.add_task("pricing InferenceX's recipes" if spec.deployments == "inferencex"
                                       else "searching deployments", total=None, visible=spec.config is None)
            point_task = bar.add_task("simulating points", total=None, visible=False)

            def searched(done: int, total: int | None) -> None:
                bar.update(search_task, completed=done, total=total)

            def replayed(done: int, total: int | None) -> None:
                bar.update(search_task, visible=False)
                bar.update(point_task, completed=done, total=total, visible=True)

            result = simulate(spec, on_search=searched, on_point=replayed)
        if result.search is not None:
            looked = (f"priced {result.search['candidates']} InferenceX recipe deployments"
                      if spec.deployments == "inferencex" else f"searched {result.search['candidates']} candidates")
            console.print(f"{looked} in {result.search['elapsed_s']:.1f} s; {len(result.search['frontier'])} frontier "
                          f"points")
        _summary(result.run_dir, json_out)


def _summary(run_dir: Path, json_out: bool) -> None:
    """Print the points, the deployment behind each, and where the run is."""
    rows = read_point_metrics(run_dir)
    manifest = read_manifest(run_dir)
    if json_out:
        print(json.dumps({"run_dir": str(run_dir), "points": rows}, indent=2, default=str))
        return
    fidelity = manifest.target.fidelity or "discrete-event"
    title = (f"{manifest.system.hardware} · {model_text(manifest.model)} · "
             f"{manifest.workload_name} (simulated, {fidelity})")
    out = Console()
    out.print(points_table(escape(title), rows, POINT_COLUMNS))
    plan = manifest.load_plan.points
    preds = manifest.target.predictions or []
    if plan and len({json.dumps(p.config, sort_keys=True) for p in plan}) > 1 or preds:
        table = Table(title="deployment of each point (80% band of the estimate)", header_style="bold")
        # the deployment label is the one column that may wrap: on a narrow terminal the figures stay whole
        for header in ("point", "deployment", "GPUs", "tok/s/user", "tok/s/GPU", "TTFT ms"):
            table.add_column(header, no_wrap=header != "deployment", overflow="fold")
        for i, p in enumerate(plan):
            cfg = SimConfig.model_validate(p.config)
            pr = preds[i] if i < len(preds) else None
            table.add_row(str(p.label), escape(cfg.label() + _drafts(cfg)), str(cfg.accelerators),
                          _band(pr, "interactivity"), _band(pr, "total_throughput_per_accelerator"),
                          _band(pr, "ttft_s", scale=1e3))
        out.print(table)
        overflowing = [f"{p.label} on {_instance(SimConfig.model_validate(p.config))}"
                       for p, pr in zip(plan, preds, strict=False) if pr.get("kv_overflow")]
        if overflowing and fidelity == "analytic":
            console.print(f"{', '.join(overflowing)}: the users overflow the KV cache, where vLLM and SGLang preempt "
                          "and the estimate's TTFT is least sure; --fidelity des replays such points request by "
                          "request (bench/bench_kv_overflow.py)", soft_wrap=True)
    if manifest.target.track_record:
        console.print(escape(manifest.target.track_record), soft_wrap=True)
    console.print(f"power: {manifest_power_basis(manifest)}")
    written = run_dir / "report.html"
    console.print(f"report: {escape(str(written))}" if written.exists()
                  else f"report: scoville report {escape(str(run_dir))} (or simulate --report)", soft_wrap=True)
    print(run_dir)


def _instance(cfg: SimConfig) -> str:
    """The layout and replica count of a deployment's label ("tp2 x1", "P tp4x2 : D tp8x1"), without its limits."""
    label = cfg.label()
    return label if cfg.disaggregation is not None else " ".join(label.split()[:2])


def _drafts(cfg: SimConfig) -> str:
    return f" mtp{cfg.speculative.num_draft_tokens}" if cfg.speculative else ""


def _band(prediction: JsonObject | None, key: str, scale: float = 1.0) -> str:
    """A point's 80% band of ``key`` (times ``scale``) as "low-high" (empty when the point has no prediction)."""
    band = None if prediction is None else prediction.get(key + "_band")
    if not isinstance(band, list):
        return ""
    return f"{band[0] * scale:,.0f}-{band[1] * scale:,.0f}"
