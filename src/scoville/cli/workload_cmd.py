"""Workload commands: list scenarios, inspect a trace, freeze a scenario into a trace, session metrics of a run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from scoville.numbers import significant
from scoville.results.catalog import resolve_run
from scoville.results.store import read_requests
from scoville.session_metrics import run_session_metrics, turn_metrics
from scoville.workload.scenarios import describe_scenario, list_scenarios, resolve_workload
from scoville.workload.traces import FORMATS, REPLAY_MODES, write_scoville_trace

console = Console()


def scenarios_cmd(
    name: Annotated[str | None, typer.Argument(help="Show every parameter of this scenario.")] = None,
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """List the named workloads (--scenario NAME), or one scenario's parameters."""
    if name is not None:
        params = describe_scenario(name)
        if json_out:
            print(json.dumps({"name": name, "parameters": params}, indent=2))
            return
        table = Table(title=name, header_style="bold")
        table.add_column("parameter")
        table.add_column("value")
        for k, v in params.items():
            table.add_row(k, v)
        console.print(table)
        return
    rows = list_scenarios()
    if json_out:
        print(json.dumps([{"name": n, "description": d} for n, d in rows], indent=2))
        return
    table = Table(header_style="bold")
    table.add_column("scenario")
    table.add_column("what it sends")
    for n, d in rows:
        table.add_row(n, d)
    console.print(table)
    console.print("`scoville scenarios NAME` shows a scenario's parameters; "
                  "traces replay with --trace PATH [--trace-format " + "|".join(FORMATS) + "]")


def trace_info_cmd(
    path: Path,
    trace_format: Annotated[str | None, typer.Option("--trace-format", help="|".join(FORMATS))] = None,
    replay: Annotated[str, typer.Option(help="|".join(REPLAY_MODES))] = "timed",
    block_size: Annotated[int | None, typer.Option("--trace-block-size")] = None,
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Validate a trace and summarise it (sessions, requests, lengths, span)."""
    opts: dict[str, Any] = {"replay": replay} | ({"block_size": block_size} if block_size is not None else {})
    w = resolve_workload(None, trace=path, trace_format=trace_format, **opts)
    summary = {"format": w.format, "sha256": w.sha256, **w.summary()}
    if json_out:
        print(json.dumps(summary, indent=2))
        return
    table = Table(title=escape(str(path)), header_style="bold")
    table.add_column("")
    table.add_column("value", justify="right")
    for k, v in summary.items():
        table.add_row(k, significant(v, 4) if isinstance(v, float) else str(v))
    console.print(table)


def export_trace_cmd(
    scenario: str,
    out: Path,
    sessions: Annotated[int, typer.Option(min=1, help="Sessions to write.")] = 16,
    seed: int = 0,
    rate: Annotated[float | None, typer.Option(help="Give sessions Poisson arrival times at this rate/s.")] = None,
) -> None:
    """Freeze a session scenario into a scoville JSONL trace (to inspect, edit or replay it)."""
    import numpy as np

    w = resolve_workload(scenario, seed=seed)
    drawn = w.sessions(sessions)
    arrivals = None
    if rate is not None:
        if rate <= 0:
            raise typer.BadParameter("--rate must be > 0 sessions per second")
        gaps = np.random.default_rng([seed, 0xA77]).exponential(1 / rate, sessions)
        arrivals = np.cumsum(np.concatenate([[0.0], gaps[1:]])).tolist()
    n = write_scoville_trace(out, drawn, arrivals)
    console.print(escape(f"wrote {n} requests in {sessions} sessions of {w.name} to {out}"))


def sessions_cmd(
    run: str,
    runs: Annotated[Path, typer.Option("--runs", help="Folder holding run directories.")] = Path("runs"),
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Session and prefix-cache metrics of a run: per point, and per turn (TTFT, hit rate)."""
    import pyarrow.compute as pc

    run_dir = resolve_run(runs, run)
    points = run_session_metrics(run_dir)
    requests = read_requests(run_dir)
    per_turn = {p["point"]: turn_metrics(requests.filter(pc.equal(requests.column("point"), p["point"])))
                for p in points}
    if json_out:
        print(json.dumps([{**p, "turns": per_turn[p["point"]]} for p in points], indent=2, default=str))
        return

    def f(v: object, scale: float = 1.0) -> str:
        return "" if v is None else significant(float(v) * scale, 4)  # type: ignore[arg-type]

    table = Table(title=f"{run_dir.name}: sessions", header_style="bold")
    for h in ("point", "sessions", "failed", "hit %", "TTFT p50 ms", "E2E tok/s (1/p90)", "completion p50 s",
              "cached in tok/s/acc", "computed in tok/s/acc"):
        table.add_column(h, justify="right")
    for p in points:
        table.add_row(str(p["point"]), f(p.get("num_sessions")), f(p.get("num_sessions_failed")),
                      f(p.get("cache_hit_rate"), 100), f(p.get("ttft_s_median"), 1000),
                      f(p.get("interactivity_e2e")), f(p.get("session_completion_s_median")),
                      f(p.get("input_cached_tok_s_per_accelerator")),
                      f(p.get("input_computed_tok_s_per_accelerator")))
    console.print(table)
    for p in points:
        turns = Table(title=f"point {p['point']}: per turn", header_style="bold")
        for h in ("turn", "requests", "input tok", "TTFT p50 ms", "TTFT p90 ms", "TPOT p50 ms", "hit %"):
            turns.add_column(h, justify="right")
        for r in per_turn[p["point"]]:
            turns.add_row(str(r["turn"]), str(r["requests"]), f(r["input_tokens_mean"]),
                          f(r["ttft_s_median"], 1000), f(r["ttft_s_p90"], 1000), f(r["tpot_s_median"], 1000),
                          f(r["cache_hit_rate"], 100))
        console.print(turns)


def register(app: typer.Typer) -> None:
    """Add the workload commands to the CLI (module-level functions, so each is read and tested on its own)."""
    app.command("scenarios")(scenarios_cmd)
    app.command("trace-info")(trace_info_cmd)
    app.command("export-trace")(export_trace_cmd)
    app.command("sessions")(sessions_cmd)
