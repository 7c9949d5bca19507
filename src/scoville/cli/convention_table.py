"""The tables of ``scoville recompute --as`` and ``--diff`` (80 columns), and their JSON/Parquet output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from rich.markup import escape
from rich.table import Table

from scoville.cli.point_table import fmt_cell
from scoville.conventions import CONVENTIONS, ConventionPoint, Deviation
from scoville.reporting.output import write_file

# (headline key, header, scale): seconds shown as ms
COLUMNS = [("ttft_s", "TTFT\nms", 1e3), ("tpot_s", "TPOT\nms", 1e3), ("itl_s", "ITL\nms", 1e3),
           ("interactivity", "tok/s\n/user", 1.0), ("output_throughput", "out\ntok/s", 1.0)]


def convention_table(title: str, points: list[ConventionPoint]) -> Table:
    """One row per point under one convention; the header says which statistic is the headline."""
    conv = CONVENTIONS[points[0].convention] if points else None
    table = Table(title=title, header_style="bold",
                  caption=(f"latencies: {conv.headline}; tok/s/user: {conv.interactivity}" if conv else None))
    table.add_column("point", justify="right")
    for _, header, _ in COLUMNS:
        table.add_column(header, justify="right")
    for p in points:
        table.add_row(escape(str(p.label or p.point)), *[fmt_cell(p.headline(k), s) for k, _, s in COLUMNS])
    return table


def _signed(relative: float | None) -> str:
    if relative is None:
        return ""
    pct = relative * 100
    return "±0%" if abs(pct) < 0.5 else f"{pct:+.0f}%"


def diff_table(title: str, own: str, rows: list[Deviation]) -> Table:
    """Per point, each convention's headline numbers with their deviation from the run's own (``own``)."""
    table = Table(title=title, header_style="bold", caption=f"deviation from {own}, the run's own convention")
    table.add_column("convention", no_wrap=True)
    for _, header, _ in COLUMNS:
        table.add_column(header, justify="right")
    previous = None
    for d in rows:
        if d.point != previous:
            if previous is not None:
                table.add_section()
            table.add_row(f"[bold]point {escape(str(d.label or d.point))}[/]", *[""] * len(COLUMNS))
            previous = d.point
        name = f"{d.convention} ({CONVENTIONS[d.convention].headline})"
        cells = []
        for key, _, scale in COLUMNS:
            value = fmt_cell(d.values[key], scale) if d.values[key] is not None else "—"
            delta = "" if d.convention == own else _signed(d.relative[key])
            cells.append(f"{value}\n[dim]{delta}[/]" if delta else value)
        table.add_row(escape(name), *cells)
    return table


def write_records(records: list[dict[str, Any]], out: Path) -> Path:
    """JSON, or Parquet when ``out`` ends in .parquet, through ``reporting.output.write_file``, which refuses any
    path inside a run folder: a run's own points.parquet can never be overwritten with another convention."""
    if out.suffix == ".parquet":
        sink = pa.BufferOutputStream()
        pq.write_table(pa.Table.from_pylist(records), sink)
        return write_file(out, sink.getvalue().to_pybytes())
    return write_file(out, json.dumps(records, indent=2, default=str).encode())
