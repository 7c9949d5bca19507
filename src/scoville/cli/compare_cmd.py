"""``scoville compare`` and ``scoville report``: the verdict table and the report file.

A run argument is a run directory, id, unique id prefix/suffix or ``latest``;
``A+B`` pools several runs (e.g. different parallelism configurations of the
same hardware) into one system, so its frontier spans all of them. The first
system is the baseline of every ratio.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from scoville.analysis.compare import compare, parse_interactivities
from scoville.analysis.runs import load_systems
from scoville.cli.runs_cmd import warnings_as_lines
from scoville.errors import UserError
from scoville.results.catalog import resolve_run

console = Console()

RunRefs = Annotated[list[str], typer.Argument(
    metavar="RUN...", help="Runs to compare (first = baseline); A+B pools runs into one system.", show_default=False)]
RunsRoot = Annotated[Path, typer.Option("--runs", help="Folder holding run directories.")]
AtOption = Annotated[str, typer.Option("--at-interactivity",
                                       help="tok/s/user to compare at, e.g. 100,169; 'common' = the highest "
                                            "interactivity every system reaches; 'auto' = the highest the "
                                            "baseline reaches.")]


def resolve_groups(runs_root: Path, refs: list[str]) -> list[list[Path]]:
    """Each argument's run directories (``A+B`` -> two runs pooled as one system)."""
    if not refs:
        raise UserError("give at least one run (a path, a run id or 'latest'); `scoville ls` lists them")
    groups = []
    for ref in refs:
        parts = [p for p in ref.split("+") if p]
        if not parts:
            raise UserError(f"{ref!r} names no run")
        groups.append([resolve_run(runs_root, p) for p in parts])
    return groups


def register(app: typer.Typer) -> None:
    @app.command("compare")
    def compare_cmd(
        run_refs: RunRefs,
        at_interactivity: AtOption = "common",
        per: Annotated[str, typer.Option("--per", help="Normalise throughput per kW, accelerator or dollar.")] = "kW",
        metric: Annotated[str, typer.Option("--metric", help="total (input+output, InferenceX's 'throughput per "
                                                             "GPU') or output tokens.")] = "total",
        json_out: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON.")] = False,
        markdown: Annotated[bool, typer.Option("--markdown", help="Print a Markdown table.")] = False,
        runs: RunsRoot = Path("runs"),
    ) -> None:
        """Peak throughput, highest tok/s/user, lowest TTFT/E2E and iso-interactivity throughput, with ratios."""
        if json_out and markdown:
            raise UserError("give --json or --markdown, not both")
        at = parse_interactivities(at_interactivity)
        with warnings_as_lines():
            systems = load_systems(resolve_groups(runs, run_refs))
        result = compare(systems, at, per=per, metric=metric)
        if json_out:
            print(json.dumps(result.to_dict(), indent=2))
            return
        if markdown:
            print(result.to_markdown(), end="")
            return
        header, rows = result.table()
        table = Table(title=f"throughput per {result.per} ({result.metric} tokens)", header_style="bold")
        for i, h in enumerate(header):
            table.add_column(escape(h), justify="left" if i == 0 else "right", overflow="fold")
        for r in rows:  # cells hold "[rated, chip boundary]": escaped so Rich does not read them as markup
            table.add_row(*[f"[italic red]{escape(c)}[/]" if c.endswith(("beyond reach", "below range"))
                            else f"[yellow]{escape(c)}[/]" if c.endswith("not distinguishable")
                            else escape(c) for c in r])
        console.print(table)
        for w in result.warnings():
            console.print(f"[yellow]note:[/] {escape(w)}")
        console.print("[dim]interactivity = 1/median(TPOT); latencies are medians, lowest over load points; "
                      f"values at an interactivity by {result.baseline.frontier.method} interpolation along each "
                      "frontier, never extrapolated; ratios are each system over the first; \\[lo–hi]: 95% "
                      "bootstrap interval, a ratio's from the two; 'not distinguishable': it holds 1.[/]")

    @app.command("report")
    def report_cmd(
        run_refs: RunRefs,
        out: Annotated[Path, typer.Option("-o", "--out", help="HTML file to write.")] = Path("report.html"),
        png: Annotated[Path | None, typer.Option("--png", help="Also write every chart as PNG here.")] = None,
        svg: Annotated[Path | None, typer.Option("--svg", help="Also write every chart as SVG here.")] = None,
        title: Annotated[str | None, typer.Option("--title", help="Report title.")] = None,
        at_interactivity: AtOption = "common",
        runs: RunsRoot = Path("runs"),
    ) -> None:
        """One self-contained HTML report (opens offline) with frontiers, comparison, latencies, power, manifests."""
        from scoville.reporting.html import write_report_groups

        groups = resolve_groups(runs, run_refs)
        at = parse_interactivities(at_interactivity)
        with warnings_as_lines():
            path = write_report_groups(groups, out, title=title, at=at)
            console.print(f"report: [bold]{escape(str(path))}[/]")
            for folder, fmt in ((png, "png"), (svg, "svg")):
                if folder is not None:
                    from scoville.reporting.static import write_images

                    files = write_images(groups, folder, fmt)
                    console.print(f"{len(files)} {fmt.upper()} charts in [bold]{escape(str(folder))}[/]")
