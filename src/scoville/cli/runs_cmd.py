"""Run catalog commands: ls, show, sql, recompute."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from scoville.metrics import recompute
from scoville.results.catalog import query, resolve_run
from scoville.results.store import read_manifest, read_point_metrics

console = Console()
RunsRoot = Annotated[Path, typer.Option("--runs", help="Folder holding run directories.")]


def _fmt(v: object, scale: float = 1.0) -> str:
    """Compact cells that fit an 80-column terminal: 3 significant digits, k/M above 10,000."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        x = float(v) * scale
        if abs(x) >= 1e6:
            return f"{x / 1e6:.3g}M"
        if abs(x) >= 1e4:
            return f"{x / 1e3:.3g}k"
        if x == 0 or abs(x) >= 100:
            return f"{x:,.0f}"
        return f"{x:.3g}"
    return "" if v is None else str(v)


def points_table(title: str, rows: list[dict], columns: list[tuple[str, str, float]]) -> Table:
    """One row per load point; each column is (metric key, header, scale)."""
    table = Table(title=title, header_style="bold")
    for _, header, _ in columns:
        table.add_column(header, justify="right")
    for r in rows:
        table.add_row(*[escape(_fmt(r.get(key), scale)) for key, _, scale in columns])
    return table


POINT_COLUMNS = [
    ("label", "point", 1.0),
    ("num_ok", "ok", 1.0),
    ("num_errors", "err", 1.0),
    ("ttft_s_median", "TTFT p50\nms", 1e3),
    ("tpot_s_median", "TPOT p50\nms", 1e3),
    ("interactivity", "tok/s\n/user", 1.0),
    ("e2e_s_median", "E2E p50\ns", 1.0),
    ("output_throughput", "out\ntok/s", 1.0),
    ("total_throughput_per_accelerator", "total tok/s\n/accel", 1.0),
    ("total_throughput_per_kw", "total tok/s\n/kW", 1.0),
]


def _print_rows(cols: list[str], rows: list[tuple], json_out: bool) -> None:
    """A query result as a Rich table, or as JSON records."""
    if json_out:
        print(json.dumps([dict(zip(cols, r)) for r in rows], indent=2, default=str))
        return
    table = Table(header_style="bold")
    for i, c in enumerate(cols):
        # the first column (usually the run id) stays whole; the others wrap rather than get cut
        table.add_column(escape(c), no_wrap=i == 0, overflow="fold")
    for r in rows:  # cells are data (labels, JSON, SQL strings), never Rich markup
        table.add_row(*[escape(_fmt(v)) for v in r])
    console.print(table)


def register(app: typer.Typer) -> None:
    @app.command("ls")
    def ls_cmd(runs: RunsRoot = Path("runs"), json_out: Annotated[bool, typer.Option("--json")] = False) -> None:
        """List the runs under --runs."""
        cols, rows = query(runs, "SELECT run_id, source, status, hardware || ' x' || accelerators AS system, "
                                 "model, workload, points FROM runs ORDER BY run_id")
        if not rows and not json_out:
            console.print(f"no runs under {runs}/")
            return
        _print_rows(cols, rows, json_out)

    @app.command("show")
    def show_cmd(run: str, runs: RunsRoot = Path("runs"),
                 json_out: Annotated[bool, typer.Option("--json")] = False) -> None:
        """Show one run's manifest summary and per-point metrics."""
        run_dir = resolve_run(runs, run)
        manifest = read_manifest(run_dir)
        rows = read_point_metrics(run_dir)
        if json_out:
            print(json.dumps({"manifest": manifest, "points": rows}, indent=2, default=str))
            return
        system, model, power = manifest.get("system", {}), manifest.get("model", {}), manifest.get("power", {})
        console.print(f"[bold]{manifest.get('run_id')}[/] {manifest.get('source')} · {manifest.get('status')} · "
                      f"{system.get('hardware')} ×{system.get('accelerators')} · {model.get('name')} "
                      f"({model.get('precision')}) · workload {(manifest.get('workload') or {}).get('name')}")
        console.print(f"power: {power.get('source')} ({power.get('boundary')} boundary)")
        console.print(points_table("load points", rows, POINT_COLUMNS))

    @app.command("sql")
    def sql_cmd(statement: str, runs: RunsRoot = Path("runs"),
                json_out: Annotated[bool, typer.Option("--json")] = False) -> None:
        """Plain SQL over the catalog: tables runs, points, requests, power."""
        _print_rows(*query(runs, statement), json_out)

    @app.command("recompute")
    def recompute_cmd(run: str, runs: RunsRoot = Path("runs")) -> None:
        """Rebuild every metric of a run from its raw request and power records."""
        run_dir = resolve_run(runs, run)
        rows = recompute(run_dir)
        console.print(points_table(f"{run_dir.name}: recomputed", rows, POINT_COLUMNS))
