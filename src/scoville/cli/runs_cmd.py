"""Run catalog commands: ls, show, sql, recompute."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import msgspec
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from scoville.cli.point_table import (
    POINT_COLUMNS,
    SERVER_LATENCY_COLUMNS,
    SERVER_LOAD_COLUMNS,
    fmt_cell,
    has_server_metrics,
    invalid_note,
    model_text,
    points_table,
    print_token_sections,
)
from scoville.conventions import CONVENTIONS
from scoville.errors import UserError
from scoville.metrics import recompute
from scoville.power.sources import NO_POWER_BASIS, manifest_power_basis
from scoville.results.catalog import (
    READ_ERRORS,
    describe_error,
    load_manifest,
    query,
    read_point_rows,
    resolve_run,
    run_status,
    system_label,
)
from scoville.results.manifest import source_label
from scoville.results.store import RunError
from scoville.validity import basis_text

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
        print(json.dumps([dict(zip(cols, r, strict=True)) for r in rows], indent=2, default=str))
        return
    cells = [[escape(fmt_cell(v)) for v in r] for r in rows]   # data (labels, JSON, SQL), never Rich markup
    # No box, one space between columns, and every column as wide as its longest word: `ls`'s seven columns fit
    # 80 terminal columns, and a narrower terminal wraps cells between words, not inside them.
    table = Table(header_style="bold underline", box=None, padding=(0, 1, 0, 0))
    for i, c in enumerate(cols):
        longest_word = max((len(w) for row in cells for w in row[i].split()), default=0)
        # the first column (usually the run id) stays whole; the others wrap rather than get cut
        table.add_column(escape(c), no_wrap=i == 0, overflow="fold", min_width=max(longest_word, len(c)))
    for row in cells:
        table.add_row(*row)
    console.print(table)


def _print_validity(rows: list[dict[str, Any]]) -> None:
    """What the validity stamp checked, then the reasons of every invalid point (``scoville.validity``)."""
    if (basis := basis_text(rows)) is not None:
        console.print(escape(f"validity: {basis}"))
    if (note := invalid_note(rows)) is not None:
        console.print(f"[yellow]{escape(note)}[/]")


def register(app: typer.Typer) -> None:
    @app.command("ls")
    def ls_cmd(runs: RunsRoot = Path("runs"), json_out: Annotated[bool, typer.Option("--json")] = False) -> None:
        """List the runs under --runs."""
        with warnings_as_lines():
            cols, rows = query(runs, "SELECT run_id, origin AS source, status, system, model, workload, points "
                                     "FROM runs ORDER BY run_id")
        if not rows and not json_out:
            console.print(f"no runs under {runs}/")
            return
        _print_rows(cols, rows, json_out)

    @app.command("show")
    def show_cmd(run: str, runs: RunsRoot = Path("runs"),
                 json_out: Annotated[bool, typer.Option("--json")] = False,
                 chart: Annotated[bool, typer.Option("--chart", help="Draw the Pareto frontier in the terminal.")]
                 = False) -> None:
        """Show one run's manifest summary and per-point metrics."""
        run_dir = resolve_run(runs, run)
        manifest = load_manifest(run_dir)
        with warnings_as_lines():
            rows = read_point_rows(run_dir) or []
        if json_out:
            print(json.dumps({"manifest": msgspec.to_builtins(manifest), "points": rows}, indent=2, default=str))
            return
        summary = (f"{source_label(manifest)} · {run_status(run_dir, manifest)} · {system_label(manifest)} · "
                   f"{model_text(manifest.model)} · workload {manifest.workload_name}")
        console.print(f"[bold]{escape(str(manifest.run_id))}[/] {escape(summary)}")
        basis = manifest_power_basis(manifest)
        console.print(escape(basis if basis == NO_POWER_BASIS else f"power: {basis}"))
        console.print(points_table("load points", rows, POINT_COLUMNS))
        print_token_sections(console, rows)
        if has_server_metrics(rows):
            console.print(points_table("server side, means (its /metrics; warm-up included)", rows,
                                       SERVER_LATENCY_COLUMNS))
            console.print(points_table("server side, load", rows, SERVER_LOAD_COLUMNS))
        _print_validity(rows)
        if chart:
            from scoville.reporting.terminal import run_charts

            for text in run_charts(rows, width=min(console.width, 100)):
                console.print()
                console.print(escape(text), soft_wrap=True, highlight=False)

    @app.command("sql")
    def sql_cmd(statement: str, runs: RunsRoot = Path("runs"),
                json_out: Annotated[bool, typer.Option("--json")] = False) -> None:
        """Plain SQL over the catalog (read-only): tables runs, points, requests, power."""
        with warnings_as_lines():
            result = query(runs, statement)
        _print_rows(*result, json_out)

    @app.command("recompute")
    def recompute_cmd(
        run: str, runs: RunsRoot = Path("runs"),
        as_: Annotated[str | None, typer.Option(
            "--as", rich_help_panel="Conventions", metavar="NAME",
            help=f"Re-derive under another tool's definitions ({', '.join(CONVENTIONS)}); "
                 "points.parquet is left as it is.")] = None,
        diff: Annotated[bool, typer.Option(
            "--diff", rich_help_panel="Conventions",
            help="Each convention's TTFT, TPOT, ITL, tok/s/user and output tok/s per point, and how far "
                 "each is from the run's own (with --as: that one only).")] = False,
        json_out: Annotated[bool, typer.Option("--json", rich_help_panel="Output",
                                               help="Machine-readable output on stdout.")] = False,
        out: Annotated[Path | None, typer.Option(
            "-o", "--out", rich_help_panel="Output",
            help="Also write the --as/--diff rows here: JSON, or Parquet for *.parquet (never into a run).")] = None,
    ) -> None:
        """Rebuild every metric of a run from its raw request and power records, or re-derive them under
        another tool's conventions (docs/conventions.md)."""
        run_dir = resolve_run(runs, run)
        load_manifest(run_dir)
        if as_ is None and not diff:
            if out is not None:
                raise UserError("-o writes --as/--diff rows; plain recompute writes points.parquet itself")
            try:
                rows = recompute(run_dir)
            except READ_ERRORS as e:  # a damaged file is named in one line, not a traceback
                raise RunError(f"cannot recompute {run_dir.name}: {describe_error(e)}") from None
            if json_out:
                print(json.dumps(rows, indent=2, default=str))
                return
            console.print(points_table(f"{run_dir.name}: recomputed", rows, POINT_COLUMNS))
            print_token_sections(console, rows)
            _print_validity(rows)
            return
        _conventions(run_dir, as_, diff, json_out, out)


def _conventions(run_dir: Path, name: str | None, diff: bool, json_out: bool, out: Path | None) -> None:
    """``recompute --as`` / ``--diff``: read the records, print or write, and never touch points.parquet."""
    from scoville.cli.convention_table import convention_table, diff_table, write_records
    from scoville.conventions import as_dict, convention, convention_diff, convention_points

    if name is not None:
        convention(name)  # an unknown name is refused before anything is read
    try:
        if diff:
            own, deviations = convention_diff(run_dir, [name] if name else None)
            records = [as_dict(d) for d in deviations]
        else:
            points = convention_points(run_dir, name)  # type: ignore[arg-type]
            records = [as_dict(p) for p in points]
    except READ_ERRORS as e:
        raise RunError(f"cannot read the records of {run_dir.name}: {describe_error(e)}") from None
    if out is not None:
        write_records(records, out)
    if json_out:
        print(json.dumps(records, indent=2, default=str))
    elif diff:
        console.print(diff_table(f"{run_dir.name}: conventions", own, deviations))
    else:
        console.print(convention_table(f"{run_dir.name} as {name}", points))
    if out is not None and not json_out:
        console.print(escape(f"written: {out}"))
