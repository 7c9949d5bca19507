"""Run catalog commands: ls, show, sql, recompute."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from scoville.metrics import recompute
from scoville.results.catalog import (READ_ERRORS, describe_error, load_manifest, query, read_point_rows, resolve_run,
                                      run_status)
from scoville.results.store import RunError

console = Console()
err_console = Console(stderr=True, soft_wrap=True)
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


@contextmanager
def warnings_as_lines() -> Iterator[None]:
    """Show each warning (a damaged run skipped, ...) once, as one ``warning:`` line on stderr.

    Python's own format adds the source line that raised it, which tells a user nothing.
    """
    seen: set[str] = set()

    def show(message: Any, *args: Any, **kwargs: Any) -> None:
        text = str(message)
        if text not in seen:
            seen.add(text)
            err_console.print(f"[yellow]warning:[/] {escape(text)}")

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = show
        yield


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
        with warnings_as_lines():
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
        manifest = load_manifest(run_dir)
        with warnings_as_lines():
            rows = read_point_rows(run_dir) or []
        if json_out:
            print(json.dumps({"manifest": manifest, "points": rows}, indent=2, default=str))
            return
        system, model, power = manifest.get("system") or {}, manifest.get("model") or {}, manifest.get("power") or {}
        summary = (f"{manifest.get('source')} · {run_status(run_dir, manifest)} · {system.get('hardware')} "
                   f"×{system.get('accelerators')} · {model.get('name')} ({model.get('precision')}) · "
                   f"workload {(manifest.get('workload') or {}).get('name')}")
        console.print(f"[bold]{escape(str(manifest.get('run_id')))}[/] {escape(summary)}")
        console.print(escape(f"power: {power.get('source')} ({power.get('boundary')} boundary)"))
        console.print(points_table("load points", rows, POINT_COLUMNS))

    @app.command("sql")
    def sql_cmd(statement: str, runs: RunsRoot = Path("runs"),
                json_out: Annotated[bool, typer.Option("--json")] = False) -> None:
        """Plain SQL over the catalog (read-only): tables runs, points, requests, power."""
        with warnings_as_lines():
            result = query(runs, statement)
        _print_rows(*result, json_out)

    @app.command("recompute")
    def recompute_cmd(run: str, runs: RunsRoot = Path("runs")) -> None:
        """Rebuild every metric of a run from its raw request and power records."""
        run_dir = resolve_run(runs, run)
        load_manifest(run_dir)
        try:
            rows = recompute(run_dir)
        except READ_ERRORS as e:  # a damaged file is named in one line, not a traceback
            raise RunError(f"cannot recompute {run_dir.name}: {describe_error(e)}") from None
        console.print(points_table(f"{run_dir.name}: recomputed", rows, POINT_COLUMNS))
