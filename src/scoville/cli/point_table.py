"""The load-point table every command prints (sweep, simulate, show, recompute), its cell format, and the
model line above it.

Its own module so that a command printing points does not import the run catalog (DuckDB, pandas).
"""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table


def fmt_cell(v: object, scale: float = 1.0) -> str:
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
        table.add_row(*[escape(fmt_cell(r.get(key), scale)) for key, _, scale in columns])
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


def model_text(model: dict) -> str:
    """"llama-3.1-8b (fp8)": a run's model and the precision it was served in; a run that recorded none
    served the checkpoint as it is."""
    return f"{model.get('name')} ({model.get('precision') or 'checkpoint precision'})"
