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

from scoville.cli.point_table import (POINT_COLUMNS, SERVER_LATENCY_COLUMNS, SERVER_LOAD_COLUMNS, fmt_cell,
                                      has_server_metrics, model_text, points_table)
from scoville.metrics import recompute
from scoville.power.sources import NO_POWER_BASIS, manifest_power_basis
from scoville.results.catalog import (READ_ERRORS, describe_error, load_manifest, query, read_point_rows, resolve_run,
                                      run_status, system_label)
from scoville.results.manifest import source_label
from scoville.results.store import RunError

console = Console()
err_console = Console(stderr=True, soft_wrap=True)
RunsRoot = Annotated[Path, typer.Option("--runs", help="Folder holding run directories.")]


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
        table.add_row(*[escape(fmt_cell(v)) for v in r])
    console.print(table)


def register(app: typer.Typer) -> None:
    @app.command("ls")
    def ls_cmd(runs: RunsRoot = Path("runs"), json_out: Annotated[bool, typer.Option("--json")] = False) -> None:
        """List the runs under --runs."""
        with warnings_as_lines():
            cols, rows = query(runs, "SELECT run_id, origin AS source, status, system, model, workload, points FROM runs "
                                     "ORDER BY run_id")
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
        summary = (f"{source_label(manifest)} · {run_status(run_dir, manifest)} · {system_label(manifest)} · "
                   f"{model_text(manifest.get('model') or {})} · "
                   f"workload {(manifest.get('workload') or {}).get('name')}")
        console.print(f"[bold]{escape(str(manifest.get('run_id')))}[/] {escape(summary)}")
        basis = manifest_power_basis(manifest)
        console.print(escape(basis if basis == NO_POWER_BASIS else f"power: {basis}"))
        console.print(points_table("load points", rows, POINT_COLUMNS))
        if has_server_metrics(rows):
            console.print(points_table("server side, means (its /metrics; warm-up included)", rows,
                                       SERVER_LATENCY_COLUMNS))
            console.print(points_table("server side, load", rows, SERVER_LOAD_COLUMNS))

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
