"""``scoville simulate``: predict a system's frontier and write it as a run.

Thin: options become a SimConfig (pinned with ``--config``, else the config
search), a workload and a load plan; ``scoville.sim`` does the work; this
module shows progress and prints the summary table and the run directory.
"""

from __future__ import annotations

from contextlib import nullcontext

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from scoville.cli.runs_cmd import POINT_COLUMNS, points_table
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
from scoville.load import concurrency_sweep, parse_float_list, parse_int_list, rate_sweep
from scoville.results.store import read_manifest, read_point_metrics
from scoville.sim.config import SimConfig, SimConfigError

console = Console(stderr=True)
DEFAULT_CONCURRENCY = "1-1024"


def _progress() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console, transient=True)


def register(app: typer.Typer) -> None:
    @app.command("simulate")
    def simulate_cmd(
        hardware: Annotated[Optional[str], typer.Option(help="System from the catalog (h200, gb300, jalapeno...) "
                                                             "or a hardware YAML path.")] = None,
        model: Annotated[Optional[str], typer.Option(help="Model from the catalog (deepseek-r1, gpt-oss-120b...) "
                                                          "or a config.json path.")] = None,
        scenario: Annotated[Optional[str], typer.Option(help="Workload: 8k1k, 1k1k, chat-multiturn, ...")] = None,
        isl: Annotated[Optional[int], typer.Option(help="Custom input length (with --osl).")] = None,
        osl: Annotated[Optional[int], typer.Option(help="Custom output length (with --isl).")] = None,
        concurrency: Annotated[Optional[str], typer.Option(help="Closed-loop levels: 1,2,4 or 1-1024 (doubling).")] = None,
        rate: Annotated[Optional[str], typer.Option(help="Open-loop request rates (req/s), e.g. 1,2,4.")] = None,
        config: Annotated[Optional[Path], typer.Option(help="Pin one SimConfig (YAML/JSON) instead of searching.")] = None,
        precision: Annotated[Optional[str], typer.Option(help="Weight precision override (fp8, fp4, bf16).")] = None,
        num_requests: Annotated[Optional[int], typer.Option(help="Measured requests per point (default 10 x C).")] = None,
        warmup_requests: Annotated[Optional[int], typer.Option(help="Warm-up requests per point (default 2 x C).")] = None,
        power: Annotated[str, typer.Option(help="Per-kW power: rated | all-in | model (utilisation).")] = "rated",
        compat: Annotated[str, typer.Option(help="Metric method: inferencex | clean.")] = "inferencex",
        seed: Annotated[int, typer.Option(help="Seed for workload draws and speculative acceptance.")] = 0,
        executor: ExecutorOption = "local",
        ray_address: RayAddressOption = None,
        workers: Annotated[Optional[int], typer.Option(help="Local worker processes for the search.")] = None,
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
        """Predict the latency-throughput-energy frontier of a model on a system (searches configs unless --config)."""
        from scoville.sim.driver import simulate_run
        from scoville.workload.scenarios import resolve_workload

        if config is not None:
            base = SimConfig.from_file(config, hardware=hardware, model=model, precision=precision)
        else:
            if not hardware or not model:
                raise SimConfigError("give --hardware and --model (or a --config file that names them)")
            base = SimConfig(hardware=hardware, model=model, precision=precision)
        workload = resolve_workload(scenario if (scenario or isl or osl or trace) else "8k1k", isl=isl, osl=osl,
                                    seed=seed, **workload_kwargs(
                                        trace=trace, trace_format=trace_format, time_scale=time_scale,
                                        sample=sample, max_sessions=max_sessions, idle_gap_cap=idle_gap_cap,
                                        replay=replay, trace_block_size=trace_block_size, think_scale=think_scale))
        if concurrency and rate:
            raise SimConfigError("give --concurrency or --rate, not both")
        if rate:
            points = rate_sweep(parse_float_list(rate), num_requests=num_requests or 200,
                                warmup_requests=warmup_requests or 0)
        else:
            points = concurrency_sweep(parse_int_list(concurrency or DEFAULT_CONCURRENCY),
                                       num_requests=num_requests, warmup_requests=warmup_requests)

        search_info = None
        configs = None
        if config is None:
            from scoville.executor import make_executor
            from scoville.sim.search import frontier_plan, search

            with make_executor(executor, ray_address, max_workers=workers) as ex, _progress() as bar:
                task = bar.add_task("searching configurations", total=None)
                result = search(base, workload, points, seed=seed, executor=ex,
                                progress=lambda done, total: bar.update(task, completed=done, total=total))
            points, configs = frontier_plan(result, points)
            search_info = result.summary()
            console.print(f"searched {result.evaluated} configurations in {result.elapsed_s:.1f} s; "
                          f"{len(points)} frontier points")
        from scoville.executor import make_executor

        # Points fan out only when asked for a cluster; locally the sequential loop is already fast.
        fan_out = make_executor(executor, ray_address, max_workers=workers) if executor == "ray" else nullcontext()
        with fan_out as point_executor, _progress() as bar:
            task = bar.add_task("simulating points", total=len(points))
            run_dir = simulate_run(base, workload, points, runs, seed=seed, compat=compat, power=power,
                                   point_configs=configs, search=search_info, executor=point_executor,
                                   progress=lambda i, n, p: bar.update(task, completed=i))
        rows = read_point_metrics(run_dir)
        manifest = read_manifest(run_dir)
        if json_out:
            print(json.dumps({"run_dir": str(run_dir), "points": rows}, indent=2, default=str))
            return
        title = (f"{manifest['system']['hardware']} · {manifest['model']['name']} · "
                 f"{(manifest.get('workload') or {}).get('name')} (simulated)")
        out = Console()
        out.print(points_table(title, rows, POINT_COLUMNS))
        if configs:
            table = Table(title="winning configuration of each frontier point", header_style="bold")
            for header in ("point", "configuration", "accelerators"):
                table.add_column(header, no_wrap=True)
            for r, c in zip(rows, configs):
                table.add_row(str(r.get("label")), c.label(), str(c.accelerators))
            out.print(table)
        pw = manifest.get("power", {})
        console.print(f"power: {pw.get('source')} ({pw.get('boundary')} boundary)")
        print(run_dir)
