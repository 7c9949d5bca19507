"""Workload commands: list scenarios with their parameters, inspect a trace, freeze a scenario into a trace."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from scoville.workload.scenarios import describe_scenario, list_scenarios, resolve_workload
from scoville.workload.traces import FORMATS, REPLAY_MODES, write_scoville_trace

console = Console()


def register(app: typer.Typer) -> None:
    @app.command("scenarios")
    def scenarios_cmd(
        name: Annotated[Optional[str], typer.Argument(help="Show every parameter of this scenario.")] = None,
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

    @app.command("trace-info")
    def trace_info_cmd(
        path: Path,
        trace_format: Annotated[Optional[str], typer.Option("--trace-format", help="|".join(FORMATS))] = None,
        replay: Annotated[str, typer.Option(help="|".join(REPLAY_MODES))] = "timed",
        block_size: Annotated[Optional[int], typer.Option("--trace-block-size")] = None,
        json_out: Annotated[bool, typer.Option("--json")] = False,
    ) -> None:
        """Validate a trace and summarise it (sessions, requests, lengths, span)."""
        opts = {"replay": replay} | ({"block_size": block_size} if block_size else {})
        w = resolve_workload(None, trace=path, trace_format=trace_format, **opts)
        summary = {"format": w.format, "sha256": w.sha256, **w.summary()}
        if json_out:
            print(json.dumps(summary, indent=2))
            return
        table = Table(title=str(path), header_style="bold")
        table.add_column("")
        table.add_column("value", justify="right")
        for k, v in summary.items():
            table.add_row(k, f"{v:.4g}" if isinstance(v, float) else str(v))
        console.print(table)

    @app.command("export-trace")
    def export_trace_cmd(
        scenario: str,
        out: Path,
        sessions: Annotated[int, typer.Option(help="Sessions to write.")] = 16,
        seed: int = 0,
        rate: Annotated[Optional[float], typer.Option(help="Give sessions Poisson arrival times at this rate/s.")] = None,
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
        console.print(f"wrote {n} requests in {sessions} sessions of {w.name} to {out}")
