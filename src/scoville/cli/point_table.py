"""The load-point table every command prints (sweep, simulate, show, recompute), its cell format, and the
model line above it.

Its own module so that a command printing points does not import the run catalog (DuckDB, pandas).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from scoville.numbers import compact

if TYPE_CHECKING:
    from scoville.results.manifest import Model


def fmt_cell(v: object, scale: float = 1.0) -> str:
    """Compact cells that fit an 80-column terminal (``numbers.compact``: 3 significant digits, k/M from 10,000)."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return compact(float(v) * scale)
    return "" if v is None else str(v)


INVALID_MARK = "!"


def _cell(v: object, scale: float) -> str:
    """A point-table cell: yes/no for a flag (``fmt_cell`` would print True/False), else ``fmt_cell``."""
    if isinstance(v, bool):
        return "yes" if v else "no"
    return fmt_cell(v, scale)


def points_table(title: str, rows: list[dict], columns: list[tuple[str, str, float]]) -> Table:
    """One row per load point; each column is (metric key, header, scale).

    An invalid point (``scoville.validity``) has ``!`` after its first cell; ``invalid_note`` lists why.
    """
    if any(r.get("valid") is False for r in rows):
        title += f" ({INVALID_MARK} = invalid point, reasons below)"
    table = Table(title=title, header_style="bold")
    for _, header, _ in columns:
        table.add_column(header, justify="right")
    for r in rows:
        cells = [_cell(r.get(key), scale) for key, _, scale in columns]
        if r.get("valid") is False:
            cells[0] += INVALID_MARK
        table.add_row(*[escape(c) for c in cells])
    return table


def interval_table(title: str, rows: list[dict], columns: list[tuple[str, str, float]]) -> Table:
    """One row per load: each figure over its 95% interval (``<key>_lo`` / ``_hi``) where the row has one."""
    table = Table(title=title, header_style="bold")
    for _, header, _ in columns:
        table.add_column(header, justify="right")
    for r in rows:
        cells = []
        for key, _, scale in columns:
            lo, hi = r.get(f"{key}_lo"), r.get(f"{key}_hi")
            band = f"\n{fmt_cell(lo, scale)}–{fmt_cell(hi, scale)}" if lo is not None and hi is not None else ""
            cells.append(escape(fmt_cell(r.get(key), scale) + band))
        table.add_row(*cells)
    return table


LOAD_COLUMNS = [
    ("label", "load", 1.0),
    ("repeats", "reps", 1.0),
    ("ttft_s_median", "TTFT p50\nms", 1e3),
    ("interactivity", "tok/s\n/user", 1.0),
    ("e2e_s_median", "E2E p50\nms", 1e3),
    ("total_throughput_per_accelerator", "total\ntok/s\n/acc", 1.0),
    ("total_throughput_per_kw", "total\ntok/s\n/kW", 1.0),
]

def invalid_note(rows: list[dict]) -> str | None:
    """Why points are invalid, to print below ``points_table``: one line a reason, naming every point it hit and
    the first one's details (a busy VM's steal would otherwise repeat on every point); None when all are valid."""
    hits: dict[str, list[tuple[str, str]]] = {}
    for r in rows:
        if r.get("valid") is False:
            for reason in r.get("invalid_reasons") or []:
                hits.setdefault(str(reason.get("code")), []).append((str(r.get("label") or r.get("point")),
                                                                     str(reason.get("detail"))))
    lines = []
    for code, points in hits.items():
        where = f"point {points[0][0]}" if len(points) == 1 else f"points {', '.join(p for p, _ in points)}"
        first = "" if len(points) == 1 else f" ({points[0][0]})"
        lines.append(f"{INVALID_MARK} {where}: {code}: {points[0][1]}{first}")
    return "\n".join(lines) if lines else None


POINT_COLUMNS = [
    ("label", "point", 1.0),
    ("num_ok", "ok", 1.0),
    ("num_errors", "err", 1.0),
    ("ttft_s_median", "TTFT p50\nms", 1e3),
    ("tpot_s_median", "TPOT p50\nms", 1e3),
    ("interactivity", "tok/s\n/user", 1.0),
    ("e2e_s_median", "E2E p50\ns", 1.0),
    ("output_throughput", "out\ntok/s", 1.0),
    ("total_throughput_per_accelerator", "total\ntok/s\n/acc", 1.0),
    ("total_throughput_per_kw", "total\ntok/s\n/kW", 1.0),
]

# The server's own figures per point (docs/server-metrics.md), shown only for runs that scraped them; two
# tables, so each fits 80 columns.
SERVER_LATENCY_COLUMNS = [
    ("label", "point", 1.0),
    ("server_requests", "req", 1.0),
    ("server_ttft_s_mean", "TTFT\nms", 1e3),
    ("client_minus_server_ttft_s", "TTFT\nc-s ms", 1e3),
    ("ttft_gap_large", "c-s\nlarge", 1.0),
    ("server_tpot_s_mean", "TPOT\nms", 1e3),
    ("client_server_tpot_ratio", "TPOT\nc/s", 1.0),
    ("server_queue_s_mean", "queue\nms", 1e3),
    ("server_e2e_s_mean", "E2E\ns", 1.0),
]
SERVER_LOAD_COLUMNS = [
    ("label", "point", 1.0),
    ("server_running_mean", "running\nmean", 1.0),
    ("server_waiting_mean", "waiting\nmean", 1.0),
    ("server_kv_usage_mean", "KV use\nmean", 1.0),
    ("server_kv_usage_max", "KV use\nmax", 1.0),
    ("server_prefix_hit_rate", "prefix\nhit rate", 1.0),
    ("server_preemptions", "preempt-\nions", 1.0),
]


def has_server_metrics(rows: list[dict]) -> bool:
    return any(r.get("server_requests") is not None for r in rows)


# Shown under the points table when a point recorded reasoning (token_metrics.reasoning_metrics).
REASONING_COLUMNS = [
    ("label", "point", 1.0),
    ("ttft_s_median", "TTFT p50\nms", 1e3),
    ("ttfot_s_median", "TTFOT\np50 ms", 1e3),
    ("ttfot_s_p90", "TTFOT\np90 ms", 1e3),
    ("reasoning_tokens_mean", "reasoning\ntok/req", 1.0),
    ("content_tokens_mean", "answer\ntok/req", 1.0),
]


def reasoning_table(rows: list[dict]) -> Table | None:
    """Time to the first answer token and the reasoning/answer split, None when no point reasoned."""
    shown = [r for r in rows if r.get("reasoning_tokens_mean") is not None]
    if not shown:
        return None
    return points_table("reasoning (TTFOT: time to the first answer token)", shown, REASONING_COLUMNS)


def print_token_sections(console: Console, rows: list[dict]) -> None:
    """Below a points table: the reasoning table and the --tokenizer count warnings, when there are any."""
    from scoville.token_metrics import count_check_lines

    table = reasoning_table(rows)
    if table is not None:
        console.print(table)
    for line in count_check_lines(rows):
        console.print(f"[yellow]warning[/]: {escape(line)}")


def model_text(model: Model) -> str:
    """"llama-3.1-8b (fp8)": a run's model and the precision it was served in; a run that recorded none
    served the checkpoint as it is."""
    return f"{model.name} ({model.precision or 'checkpoint precision'})"
