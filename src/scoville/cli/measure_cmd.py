"""``scoville sweep`` and ``scoville run``: measure an OpenAI-compatible server (or the built-in emulator).

Thin: options become a ``scoville.measurement.SweepSpec`` and ``scoville.measurement.sweep`` does the work
(the same call as ``scoville.sweep`` in Python); this module prints the live progress, the summary table and
the one-line errors. ``run`` is ``sweep`` restricted to one load point.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import msgspec
import typer
from rich.console import Console
from rich.markup import escape

from scoville.cli.executor_options import (
    ClientWorkersOption,
    ExecutorOption,
    RayAddressOption,
)
from scoville.cli.point_table import (
    LOAD_COLUMNS,
    POINT_COLUMNS,
    interval_table,
    invalid_note,
    points_table,
    print_token_sections,
)
from scoville.cli.search_options import (
    PredictOption,
    ProfileOption,
    SearchMaxOption,
    SearchOption,
    SearchRateOption,
    SearchRepeatsOption,
    SloOption,
)
from scoville.cli.workload_options import (
    IdleGapCapOption,
    MaxSessionsOption,
    RepeatsOption,
    ReplayOption,
    SampleOption,
    ThinkScaleOption,
    TimeScaleOption,
    TraceBlockSizeOption,
    TraceFormatOption,
    TraceOption,
)
from scoville.client.errors import ClientError
from scoville.client.progress import LiveProgress
from scoville.power.sources import NO_POWER_BASIS, power_basis_text
from scoville.results.store import read_journal, read_manifest

if TYPE_CHECKING:
    from scoville.client.sweep import SweepResult
    from scoville.results.manifest import Manifest, Power

console = Console(stderr=True)


def redacted_argv(argv: list[str]) -> list[str]:
    """The command line for the manifest, with the value of --api-key replaced (keys never reach disk)."""
    out, hide = [], False
    for arg in argv:
        if hide:
            out.append("<redacted>")
            hide = False
        elif arg == "--api-key":
            out.append(arg)
            hide = True
        elif arg.startswith("--api-key="):
            out.append("--api-key=<redacted>")
        else:
            out.append(arg)
    return out


def power_note(manifest_power: Power) -> str:
    """The power source and boundary, printed beside every per-kW figure."""
    basis = power_basis_text(manifest_power.source, manifest_power.boundary)
    if basis == NO_POWER_BASIS:
        return f"{basis} (the per-kW columns stay empty)"
    w = manifest_power.watts_per_accelerator
    return f"power: {basis}" + (f", {w:g} W/accelerator" if w else "") + " — per-kW figures above use it"


# What --resume may be given besides the run: where the server is now, its key, where runs live, the output form.
_RESUME_FLAGS = {"resume", "url", "api_key", "runs", "json_out", "report"}


def _refuse_flags_beside_resume(ctx: typer.Context) -> None:
    """A resumed run replays its manifest; any other flag given would be silently ignored, so refuse it."""
    # By the source's name: Typer vendors its own click, whose ParameterSource is not click's.
    given = [p for p in ctx.command.params if p.name not in _RESUME_FLAGS
             and getattr(ctx.get_parameter_source(p.name), "name", None) == "COMMANDLINE"]
    if given:
        names = ", ".join(p.opts[0] for p in given)
        raise ClientError(f"--resume continues the run with the settings it was started with; drop {names} "
                          "(only --url, --api-key, --runs, --json and --no-report apply), or start a new run")


def failure_lines(result: SweepResult, labels: dict[int, str]) -> list[str]:
    """One line per point with failed requests: how many, of what kind, and the commonest error."""
    lines = []
    for o in result.outcomes:
        if not o.failed:
            continue
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(o.errors.items(), key=lambda kv: -kv[1]))
        head = "measured nothing: " if o.measured_nothing else ""
        lines.append(f"point {labels.get(o.point, o.point)}: {head}{o.failed} of {o.requests} requests failed "
                     f"({kinds}), most often: {o.top_error}")
    return lines


def _repeated_loads(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per load when the sweep repeated its loads (``analysis.repeats``); empty otherwise."""
    if not any(r.get("repeat") is not None for r in rows):
        return []
    from scoville.analysis.repeats import aggregate_repeats

    return aggregate_repeats(rows)


def _print_result(result: SweepResult, manifest: Manifest, json_out: bool, reported: bool) -> int:
    """The summary (with the report's path when one was written); the exit code is 1 when a point measured
    nothing (every request of it failed)."""
    from scoville.client.sweep import resume_hint

    report = result.run_dir / "report.html" if reported and (result.run_dir / "report.html").is_file() else None
    manifest_power = manifest.power
    labels = {p.index: p.label or str(p.index) for p in manifest.load_plan.points}
    empty = [labels.get(o.point, o.point) for o in result.outcomes if o.measured_nothing]
    loads = _repeated_loads(result.rows)
    if json_out:
        print(json.dumps({"run_dir": str(result.run_dir), "run_id": result.run_dir.name, "status": result.status,
                          "power": msgspec.to_builtins(manifest_power), "report": str(report) if report else None,
                          "points": result.rows, "outcomes": [msgspec.to_builtins(o) for o in result.outcomes],
                          **({"loads": loads} if loads else {}), "slo_search": manifest.slo_search},
                         indent=2, default=str))
    else:
        out = Console()
        out.print(points_table(f"{result.run_dir.name} ({result.status})", result.rows, POINT_COLUMNS))
        if loads:
            out.print(interval_table("per load: mean of the repeats, 95% bootstrap interval below", loads,
                                     LOAD_COLUMNS))
        print_token_sections(out, result.rows)
        if (note := invalid_note(result.rows)) is not None:
            out.print(f"[yellow]{escape(note)}[/]")
        out.print(power_note(manifest_power))
        seed = manifest.load_plan.seed
        # one path a line, never wrapped: a path is copied whole, and each line fits 80 columns as far as it can
        out.print(escape(f"run: {result.run_dir}" + (f"  (seed {seed})" if seed is not None else "")), soft_wrap=True)
        if report:
            out.print(escape(f"report: {report}"), soft_wrap=True)
        if manifest.slo_search:
            out.print(escape(str(manifest.slo_search["line"])), soft_wrap=True)
    for line in failure_lines(result, labels):
        console.print(f"[yellow]failed[/]: {escape(line)}")
    if empty:
        console.print(f"[red]error[/]: {len(empty)} point(s) measured nothing ({', '.join(map(str, empty))}); "
                      f"{resume_hint(result.run_dir)} measures them again")
        return 1
    return 0


def register(app: typer.Typer) -> None:
    def measure(
        ctx: typer.Context,
        url: Annotated[str | None, typer.Option(
            rich_help_panel="Target", help="Base URL of an OpenAI-compatible server; omit to measure the built-in "
            "emulator.")] = None,
        api_key: Annotated[str | None, typer.Option(
            rich_help_panel="Target", envvar="SCOVILLE_API_KEY", help="Bearer token (never written to disk).")] = None,
        model: Annotated[str | None, typer.Option(
            rich_help_panel="Target", help="Model name to request (default: the server's first).")] = None,
        api: Annotated[str, typer.Option(
            rich_help_panel="Target", help="completions (token-id prompts) or chat (text prompts).")] = "completions",
        scenario_name: Annotated[str | None, typer.Option(
            "--scenario", rich_help_panel="Workload", help="1k1k, 1k8k, 8k1k (InferenceX) or a session scenario "
            "(`scoville scenarios`).")] = None,
        isl: Annotated[int | None, typer.Option(
            rich_help_panel="Workload", help="Input tokens per request (max of the range).")] = None,
        osl: Annotated[int | None, typer.Option(
            rich_help_panel="Workload", help="Output tokens per request (max of the range).")] = None,
        range_ratio: Annotated[float | None, typer.Option(
            rich_help_panel="Workload", help="Lengths uniform from ratio·L to L; 0.8 = InferenceX, 1 = fixed. Not "
            "vLLM's --random-range-ratio r, which spreads (1-r)·L to (1+r)·L (r = 0 fixed).")] = None,
        concurrency: Annotated[str | None, typer.Option(
            rich_help_panel="Load", help="Closed-loop levels: 1,2,4 or 1-64 (doubling).")] = None,
        rate: Annotated[str | None, typer.Option(
            rich_help_panel="Load", help="Open-loop request rates per second: 1,2,4.")] = None,
        burstiness: Annotated[float, typer.Option(
            rich_help_panel="Load", help="Gamma shape of arrivals (1 = Poisson).")] = 1.0,
        max_concurrency: Annotated[int | None, typer.Option(
            rich_help_panel="Load", help="Cap on requests in flight for --rate points.")] = None,
        num_requests: Annotated[int | None, typer.Option(
            rich_help_panel="Load", help="Measured requests per point (default 10·C; 100 for --rate).")] = None,
        warmup_requests: Annotated[int | None, typer.Option(
            rich_help_panel="Load", help="Warm-up requests per point (default 2·C).")] = None,
        duration: Annotated[float | None, typer.Option(
            rich_help_panel="Load", help="Stop sending after this many seconds per point.")] = None,
        repeats: RepeatsOption = 1,
        seed: Annotated[int | None, typer.Option(
            rich_help_panel="Workload", help="Workload and arrival seed (default: a new one per run, so "
                                                    "no prompt is in the server's cache; recorded in the "
                                                    "manifest; give it to send the same prompts again).")] = None,
        max_model_len: Annotated[int | None, typer.Option(
            rich_help_panel="Target", help="The server's context window in tokens "
                                                             "(default: what its /v1/models says); session "
                                                             "scenarios and traces are shaped to fit it.")] = None,
        hardware: Annotated[str | None, typer.Option(
            rich_help_panel="Power and cost", help="Hardware name in the catalog (h200, b200, ...).")] = None,
        accelerators: Annotated[int | None, typer.Option(
            rich_help_panel="Power and cost", help="Accelerators serving the model.")] = None,
        power: Annotated[str | None, typer.Option(
            rich_help_panel="Power and cost", help="rated | all-in | nvml | csv (default rated when known).")] = None,
        power_csv: Annotated[Path | None, typer.Option(
            rich_help_panel="Power and cost", help="External meter CSV: t or timestamp, watts[, device].")] = None,
        power_boundary: Annotated[str | None, typer.Option(
            rich_help_panel="Power and cost", help="chip | board | node | rack (default by source).")] = None,
        rated_watts: Annotated[float | None, typer.Option(
            rich_help_panel="Power and cost", help="Rated W per accelerator (overrides the catalog).")] = None,
        cost_per_hour_opt: Annotated[str | None, typer.Option(
            "--cost-per-hour", rich_help_panel="Power and cost", help="$ per accelerator-hour, or a catalog preset "
            "(hyperscaler, neocloud, rental).")] = None,
        compat: Annotated[str, typer.Option(
            rich_help_panel="Load",
            help="inferencex (dashboard method) or clean (steady-state window).")] = "inferencex",
        runs: Annotated[Path, typer.Option(
            rich_help_panel="Output", help="Folder holding run directories.")] = Path("runs"),
        resume: Annotated[str | None, typer.Option(
            rich_help_panel="Output", help="Continue an interrupted run (path or id).")] = None,
        json_out: Annotated[bool, typer.Option(
            "--json", rich_help_panel="Output", help="Machine-readable output on stdout.")] = False,
        report: Annotated[bool, typer.Option(
            "--report/--no-report", rich_help_panel="Output",
            help="Write report.html into the run when it finishes (about 1 s).")] = True,
        stop_at_eos: Annotated[bool, typer.Option(
            "--no-ignore-eos", rich_help_panel="Target", help="Let the model stop at EOS (default: ask for exactly "
            "max_tokens, vLLM ignore_eos/min_tokens).")] = False,
        _ignore_eos: Annotated[bool, typer.Option(
            "--ignore-eos", rich_help_panel="Target", hidden=True, help="The default; accepted as vLLM bench spells "
            "it.")] = False,
        workers: Annotated[int, typer.Option(
            rich_help_panel="Execution", help="Client processes (0 = auto by concurrency).")] = 0,
        timeout: Annotated[float, typer.Option(rich_help_panel="Target", help="Per-request timeout, seconds.")] = 600.0,
        read_timeout: Annotated[float, typer.Option(
            rich_help_panel="Target", help="Seconds a request may go without data (raise it for "
                                                    "prefills longer than that).")] = 120.0,
        tokenizer: Annotated[str | None, typer.Option(
            rich_help_panel="Target", help="Local tokenizer.json (or its folder): renders --api chat prompts and "
            "checks the server's token counts.")] = None,
        vocab_size: Annotated[int, typer.Option(
            rich_help_panel="Target", help="Vocabulary size for token-id prompts.")] = 32000,
        scrape_interval: Annotated[float, typer.Option(
            rich_help_panel="Target", help="Seconds between scrapes of the server's Prometheus /metrics during each "
            "point (0 = off).")] = 1.0,
        trace: TraceOption = None,
        trace_format: TraceFormatOption = None,
        time_scale: TimeScaleOption = None,
        sample: SampleOption = None,
        max_sessions: MaxSessionsOption = None,
        idle_gap_cap: IdleGapCapOption = None,
        replay: ReplayOption = None,
        trace_block_size: TraceBlockSizeOption = None,
        think_scale: ThinkScaleOption = None,
        executor: ExecutorOption = "local",
        ray_address: RayAddressOption = None,
        ray_workers: ClientWorkersOption = 2,
        slo: SloOption = None,
        search: SearchOption = False,
        search_rate: SearchRateOption = None,
        search_max: SearchMaxOption = None,
        predict: PredictOption = None,
        profile: ProfileOption = None,
        search_repeats: SearchRepeatsOption = 3,
    ) -> None:
        """Measure a latency-throughput curve: closed-loop concurrency or open-loop rate points."""
        # the measuring stack (aiohttp, the catalog) loads only when a sweep runs: `sweep --help` stays fast
        from scoville.client.sweep import SweepInterrupted, resume_hint
        from scoville.measurement import SweepSpec, resume_run
        from scoville.measurement import sweep as measure_spec

        single = ctx.info_name == "run"
        progress = LiveProgress(console, enabled=not json_out, live=console.is_terminal)
        try:
            if resume:
                _refuse_flags_beside_resume(ctx)
                with progress:
                    result = resume_run(resume, runs=runs, url=url, api_key=api_key, observer=progress,
                                        report=report, on_info=lambda line: console.print(escape(line)))
                sys.exit(_print_result(result, read_manifest(result.run_dir), json_out, report))
            spec = SweepSpec.of_flat(
                url=url, api_key=api_key, model=model, api=api, ignore_eos=not stop_at_eos, timeout=timeout,
                read_timeout=read_timeout, tokenizer=tokenizer, vocab_size=vocab_size, max_model_len=max_model_len,
                scrape_interval=scrape_interval, single=single, seed=seed, compat=compat, hardware=hardware,
                accelerators=accelerators, power=power, power_csv=power_csv, power_boundary=power_boundary,
                rated_watts=rated_watts, cost_per_hour=cost_per_hour_opt, slo=slo, search=search,
                search_rate=search_rate, search_max=search_max, predict=predict, profile=profile,
                search_repeats=search_repeats, runs=runs, report=report, workers=workers, executor=executor,
                ray_address=ray_address, ray_workers=ray_workers, scenario=scenario_name, isl=isl, osl=osl,
                range_ratio=range_ratio, trace=trace, trace_format=trace_format, time_scale=time_scale,
                sample=sample, max_sessions=max_sessions, idle_gap_cap=idle_gap_cap, replay=replay,
                trace_block_size=trace_block_size, think_scale=think_scale, concurrency=concurrency, rate=rate,
                burstiness=burstiness, max_concurrency=max_concurrency, num_requests=num_requests,
                warmup_requests=warmup_requests, duration=duration, repeats=repeats)
            with progress:
                result = measure_spec(spec, observer=progress, command=redacted_argv(sys.argv),
                                 on_info=lambda line: console.print(escape(line)))
            sys.exit(_print_result(result, read_manifest(result.run_dir), json_out, report))
        except SweepInterrupted as e:
            kept = len(read_journal(e.result.run_dir))
            console.print(f"[yellow]interrupted[/]: {kept} finished requests kept in {e.result.run_dir}; "
                          f"{resume_hint(e.result.run_dir)}")
            sys.exit(130)  # not typer.Exit: the app runs with standalone_mode=False, which drops its code

    app.command("sweep")(measure)
    app.command("run", help="Measure one load point (one --concurrency or one --rate).")(measure)
