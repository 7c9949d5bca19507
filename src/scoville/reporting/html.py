"""One self-contained HTML report: every chart, table and manifest a reader needs to judge a comparison.

plotly.js is read from the installed plotly Python package and inlined, gzipped and base64-encoded (4.8 MB
of script becomes 2 MB: a report is small enough to mail), and unpacked by the browser's own
DecompressionStream; the file opens offline and makes no network request (no CDN, no web fonts). Figures
are built as plain JSON from the renderer-neutral chart specs in
``scoville.reporting.charts``; the sweep command calls ``write_report`` after every
sweep, so it avoids anything slow (no plotly.graph_objects, no matplotlib).
"""

from __future__ import annotations

import base64
import gzip
import html
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

import scoville
from scoville.analysis.compare import Comparison, compare, fmt_ms, fmt_seconds, fmt_usd, fmt_value
from scoville.analysis.runs import System, load_systems
from scoville.errors import UserError
from scoville.power.sources import manifest_power_basis
from scoville.reporting.charts import (
    Chart,
    cdf_charts,
    config_summary,
    frontier_charts,
    latency_samples,
    power_chart,
    ratio_charts,
    safe_id,
    system_colors,
)
from scoville.reporting.decision import DECISION_SCRIPT, decision_grid, decision_html
from scoville.reporting.output import check_destination, write_file
from scoville.reporting.plotly_fig import figure
from scoville.results.catalog import accelerator_count, read_power_samples, read_records
from scoville.results.manifest import Manifest, source_label
from scoville.session_metrics import points_session_metrics, turn_metrics
from scoville.validity import basis_text

CSS = """
:root { --fg: #1d1d1f; --muted: #5f6368; --line: #dadce0; --bg-alt: #f6f8fa; }
* { box-sizing: border-box; }
body { font-family: system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif;
       color: var(--fg); margin: 0 auto; max-width: 1500px; padding: 24px 32px 64px; line-height: 1.45; }
h1 { font-size: 30px; margin: 0 0 4px; } h2 { font-size: 23px; margin: 40px 0 8px; border-bottom: 2px solid var(--line);
padding-bottom: 4px; } h3 { font-size: 18px; margin: 24px 0 8px; }
.meta, .note { color: var(--muted); font-size: 14px; }
.systems { display: flex; flex-wrap: wrap; gap: 10px 28px; margin: 14px 0; font-size: 15px; }
.swatch { display: inline-block; width: 14px; height: 14px; border-radius: 3px; margin-right: 6px;
          vertical-align: -2px; }
.grid2 { display: grid; grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 18px; }
.grid3 { display: grid; grid-template-columns: repeat(3, minmax(0, 1fr)); gap: 14px; }
.chart { border: 1px solid var(--line); border-radius: 8px; padding: 4px; min-height: 470px; }
table { border-collapse: collapse; font-size: 14px; margin: 8px 0 4px; font-variant-numeric: tabular-nums; }
th, td { border-bottom: 1px solid var(--line); padding: 5px 10px; text-align: right; white-space: nowrap; }
table.points { font-size: 13px; } table.points th, table.points td { padding: 4px 6px; }
table.points th:nth-child(6), table.points td:nth-child(6), table.points th:nth-child(9),
table.points td:nth-child(9), table.points th:nth-child(12), table.points td:nth-child(12),
table.points th:nth-child(15), table.points td:nth-child(15), table.points th:nth-child(18),
table.points td:nth-child(18) { border-left: 1px solid var(--line); }
th:first-child, td:first-child { text-align: left; }
thead th { background: var(--bg-alt); position: sticky; top: 0; }
table.cmp td:first-child { font-weight: 600; white-space: normal; min-width: 260px; }
.undef { color: #a33; font-style: italic; } .warn { color: #8a5a00; }
.scroll { overflow-x: auto; }
table.facts td { text-align: left; } table.facts td:first-child { color: var(--muted); width: 220px; }
details { margin: 8px 0; } summary { cursor: pointer; color: var(--muted); }
pre { background: var(--bg-alt); padding: 12px; border-radius: 6px; font-size: 12px; overflow-x: auto; }
.decide-control { display: flex; align-items: center; gap: 10px; font-size: 15px; margin: 10px 0; flex-wrap: wrap; }
.decide-control input { flex: 1 1 320px; max-width: 720px; } .decide-control output { font-weight: 600;
min-width: 4em; text-align: right; font-variant-numeric: tabular-nums; }
table.decide th, table.cmp th { white-space: normal; vertical-align: bottom; }
@media (max-width: 1000px) { .grid2, .grid3 { grid-template-columns: 1fr; } }
"""


@lru_cache(maxsize=1)
def plotly_js() -> str:
    """The plotly.js bundle shipped inside the plotly Python package."""
    try:
        return (resources.files("plotly") / "package_data" / "plotly.min.js").read_text(encoding="utf-8")
    except (FileNotFoundError, ModuleNotFoundError) as e:
        raise UserError("plotly.js not found in the plotly package; reinstall it: pip install --force-reinstall "
                        "plotly") from e


@lru_cache(maxsize=1)
def plotly_js_packed() -> str:
    """plotly.js gzipped and base64-encoded, for ``PLOTLY_LOADER`` to unpack (0.2 s, once per process)."""
    return base64.b64encode(gzip.compress(plotly_js().encode("utf-8"), compresslevel=6)).decode("ascii")


# Unpacks the bundle (DecompressionStream: Chromium 80, Firefox 113, Safari 16.4), runs it, then draws the
# charts; a browser without it says so instead of showing empty boxes.
PLOTLY_LOADER = """async function loadPlotly() {
  const packed = atob(document.getElementById('plotly-gz').textContent);
  const bytes = new Uint8Array(packed.length);
  for (let i = 0; i < packed.length; i++) bytes[i] = packed.charCodeAt(i);
  const code = await new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'))).text();
  const script = document.createElement('script');
  script.textContent = code;
  document.head.appendChild(script);
}
"""
NO_DECOMPRESSION = ("'This browser cannot unpack the charts (it lacks DecompressionStream): open the report in a "
                    "current Chrome, Edge, Firefox or Safari.'")


def _e(v: Any) -> str:
    return html.escape("" if v is None else str(v))


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], cls: str = "") -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)

    def cell(c: str) -> str:
        undef = c in ("beyond reach", "below range", "no points") or c.startswith(("baseline ", "both below"))
        return f'<td class="undef">{_e(c)}</td>' if undef else f"<td>{_e(c)}</td>"

    body = "".join("<tr>" + "".join(cell(c) for c in r) + "</tr>" for r in rows)
    return f'<div class="scroll"><table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _chart_div(chart: Chart) -> str:
    return f'<div class="chart" id="{_e(chart.id)}" data-chart="{_e(chart.id)}"></div>'


def run_summary(comparisons: list[Comparison], left_out: list[str]) -> str:
    """What one system's run shows, in a sentence per yardstick (a one-column comparison table says less)."""
    lines = []
    for c in comparisons:
        r = c.systems[0]
        if c.per == "dollar":
            if r.lowest_usd_per_mtok is not None:
                lines.append(f"lowest cost: {fmt_usd(r.lowest_usd_per_mtok)} per million {_e(c.metric)} tokens")
        elif r.peak is not None:
            lines.append(f"peak {_e(c.metric)} throughput: {fmt_value(r.peak)} {_e(c.unit)}"
                         + (f" [{_e(r.system.power_basis)}]" if c.per == "kW" else ""))
    if comparisons:
        first = comparisons[0].systems[0]
        lines += [f"fastest per user: {fmt_value(first.highest_interactivity)} tok/s/user",
                  f"lowest TTFT p50: {fmt_ms(first.lowest_ttft_s)} ms, "
                  f"lowest E2E p50: {fmt_seconds(first.lowest_e2e_s)} s"]
    items = "".join(f"<li>{line}</li>" for line in lines)
    return ("<h2>What this run shows</h2>" + (f"<ul>{items}</ul>" if items else "")
            + "".join(f'<p class="note">{_e(msg)}</p>' for msg in left_out))


def comparison_section(comparisons: list[Comparison], left_out: list[str]) -> str:
    parts = ["<h2>Comparison</h2>",
             '<p class="note">Ratios are each system over the first (the baseline). Throughput at an interactivity '
             "is read off each system's Pareto frontier by monotone (Steffen) interpolation and is never "
             "extrapolated: \u201cbeyond reach\u201d means the frontier ends before that interactivity. "
             "\u2265 marks a lower bound: every load point the sweep measured already served users faster, so the "
             "highest-throughput one bounds the frontier from below. "
             "By default the systems are compared at the highest interactivity every one of them reaches; "
             "<em>auto</em> is the highest the baseline reaches. Total throughput counts input + "
             "output tokens (InferenceX's \u201cthroughput per GPU\u201d).</p>"]
    for c in comparisons:
        header, rows = c.table()
        parts.append(f"<h3>Throughput per {_e(c.per)}</h3>")
        parts.append(_table(header, rows, "cmp"))
        parts += [f'<p class="note warn">Note: {_e(w)}.</p>' for w in c.warnings()]
    parts += [f'<p class="note">{_e(msg)}</p>' for msg in left_out]
    return "\n".join(parts)


POINT_COLUMNS = [
    ("label", "point"), ("concurrency", "conc."), ("num_ok", "ok"), ("num_errors", "errors"),
    ("interactivity", "tok/s/user"),
    ("ttft_s_median", "TTFT p50 ms"), ("ttft_s_p90", "p90"), ("ttft_s_p99", "p99"),
    ("tpot_s_median", "TPOT p50 ms"), ("tpot_s_p90", "p90"), ("tpot_s_p99", "p99"),
    ("itl_s_median", "ITL p50 ms"), ("itl_s_p90", "p90"), ("itl_s_p99", "p99"),
    ("e2e_s_median", "E2E p50 s"), ("e2e_s_p90", "p90"), ("e2e_s_p99", "p99"),
    ("total_throughput_per_accelerator", "tok/s/acc"), ("total_throughput_per_kw", "tok/s/kW"),
    ("power_w", "power W"), ("usd_per_mtok_total", "$/Mtok"),
]


SLO_COLUMNS = [("goodput", "goodput req/s"), ("slo_attainment", "SLO met")]


def _cell(key: str, v: Any) -> str:
    """A metrics table cell; a value that is not a number (a damaged points.parquet) is shown as it is."""
    if v is None:
        return "—"
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    if key.startswith(("ttft_s_", "tpot_s_", "itl_s_")):
        return fmt_ms(v)                      # token latencies in ms, as the terminal prints them
    if key.endswith(("_median", "_p90", "_p99")) and "_s_" in key:
        return fmt_seconds(v)
    if key == "usd_per_mtok_total":
        return fmt_usd(v)
    if key == "slo_attainment":
        return f"{v:.0%}"
    if isinstance(v, float):
        return fmt_value(v)
    return str(v)


def _point_cells(row: dict[str, Any], columns: list[tuple[str, str]]) -> list[str]:
    """A points-table row; an invalid point's first cell says so (the reasons follow the table)."""
    cells = [_cell(k, row.get(k)) for k, _ in columns]
    if row.get("valid") is False:
        cells[0] += " (invalid)"
    return cells


def validity_notes(rows: list[dict[str, Any]]) -> str:
    """What the validity stamp checked, and each invalid point's reasons (``scoville.validity``)."""
    basis = basis_text(rows)
    parts = [f'<p class="note">Validity: {_e(basis)}.</p>'] if basis else []
    items = [f"<li>point {_e(r.get('label') or r.get('point'))}: <code>{_e(reason.get('code'))}</code> "
             f"{_e(reason.get('detail'))}</li>"
             for r in rows if r.get("valid") is False for reason in r.get("invalid_reasons") or []]
    if items:
        parts.append('<p class="note warn">Invalid points: their figures were measured under conditions that '
                     f'distort them.</p><ul class="warn">{"".join(items)}</ul>')
    return "".join(parts)


def _facts(manifest: Manifest) -> list[tuple[str, str]]:
    system, model, serving, power = manifest.system, manifest.model, manifest.serving, manifest.power
    points = manifest.load_plan.points
    conc = [p.concurrency for p in points if p.concurrency is not None]
    rates = [p.rate for p in points if p.rate is not None]
    load = (f"{len(points)} points; concurrency {', '.join(map(str, conc))}" if conc else
            f"{len(points)} points; rate {', '.join(f'{r:g}' for r in rates)} req/s" if rates else
            f"{len(points)} points")

    def js(v: object) -> str:
        if isinstance(v, msgspec.Struct):
            v = msgspec.to_builtins(v)
        return json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else ("—" if v is None else str(v))

    # A searched simulation's points each carry their own deployment: the run-level system and serving blocks
    # describe only the search's starting configuration, so they must not be shown as what ran.
    searched = any(p.config for p in points)
    per_point = "each point's own deployment (table below)"
    return [
        ("run id", js(manifest.run_id)),
        ("source", js(source_label(manifest))),
        ("status", js(manifest.status)),
        ("created", js(manifest.created_at)),
        ("hardware", f"{js(system.hardware)} × {accelerator_count(manifest, dash='–')} accelerators"
                     + (" (per point)" if searched else "")),
        ("rated power per accelerator", f"{js(system.rated_watts_per_accelerator)} W"),
        ("power source, boundary", f"{js(power.source)}, {js(power.boundary or system.power_boundary)}"
                                   + (f" ({power.watts_per_accelerator:g} W per accelerator)"
                                      if power.watts_per_accelerator else "")),
        ("cost per accelerator-hour", f"${system.cost_per_accelerator_hour:g}"
                                      if system.cost_per_accelerator_hour else "—"),
        ("model, precision", f"{js(model.name)}, {js(model.precision)}"),
        ("serving", f"{js(serving.framework)} {serving.version or ''}".strip()),
        ("parallelism", per_point if searched else js(serving.parallelism)),
        ("serving options", per_point if searched else js(serving.options)),
        ("workload", js(manifest.workload)),
        ("load plan", load),
        ("metrics mode (compat)", js(manifest.compat)),
        ("SLO", js(manifest.slo or None)),
        *([("simulator's track record", manifest.target.track_record)] if manifest.target.track_record else []),
        ("target", js(manifest.target)),
        ("scoville version", js(manifest.scoville_version)),
    ]


def run_section(system: System, run_dir: Path, manifest: Manifest, color: str,
                figures: dict[str, dict[str, Any]]) -> str:
    run_id = manifest.run_id or run_dir.name
    rows = [r for r in system.repeat_rows if r.get("run_id") == run_id]  # every repeat
    plan = manifest.load_plan.points
    chart_key = safe_id(run_id)
    parts = [f'<h2><span class="swatch" style="background:{color}"></span>{_e(system.label)} '
             f'<span class="meta">· run {_e(run_id)}</span></h2>']
    parts.append('<h3>Setup</h3>' + _table(["", ""], [[k, v] for k, v in _facts(manifest)], "facts")
                 .replace("<thead><tr><th></th><th></th></tr></thead>", ""))
    deployments = [[p.label or str(p.index), str(p.accelerators or "—"), config_summary(p.config)]
                   for p in plan if p.config]
    if deployments:
        parts.append("<h3>Deployment of each point (searched)</h3>"
                     + _table(["point", "accelerators", "configuration"], deployments, "facts"))
    parts.append("<h3>Latency percentiles per load point</h3>")
    columns = POINT_COLUMNS + [c for c in SLO_COLUMNS if any(r.get(c[0]) is not None for r in rows)]
    ordered = sorted(rows, key=lambda r: r.get("point", 0))
    parts.append(_table([h for _, h in columns], [_point_cells(r, columns) for r in ordered], "points"))
    parts.append(validity_notes(ordered))
    if manifest.slo:
        parts.append(f'<p class="note">goodput: requests/s meeting the run\'s SLO {_e(json.dumps(manifest.slo))} '
                     "(recompute for another SLO with scoville.analysis.goodput).</p>")
    requests = read_records(run_dir)
    compat = manifest.compat
    samples = latency_samples(requests, compat) if requests.num_rows else {}
    charts = cdf_charts(chart_key, plan, samples, system.label, compat) if samples else []
    if charts:
        parts.append("<h3>Latency distributions</h3><div class=\"grid3\">" +
                     "".join(_chart_div(c) for c in charts) + "</div>")
    parts.append(sessions_section(manifest, requests))
    parts.append(server_section(rows))
    watts = power_chart(chart_key, read_power_samples(run_dir), plan, samples, system.label,
                        manifest_power_basis(manifest))
    if watts is not None:        # (not "pc": that is pyarrow.compute in this module)
        parts.append("<h3>Power over time</h3>" + _chart_div(watts))
        charts.append(watts)
    for c in charts:
        figures[c.id] = figure(c)
    parts.append("<details><summary>Full manifest (manifest.json)</summary><pre>"
                 + _e(manifest.to_json().decode()) + "</pre></details>")
    return "\n".join(parts)


SESSION_COLUMNS = [("num_sessions", "sessions"), ("turns_per_session_mean", "turns/session"),
                   ("session_completion_s_median", "session p50 (s)"), ("ttft_s_median", "TTFT p50 (ms)"),
                   ("cache_hit_rate", "cache hit rate")]
TURN_COLUMNS = [("turn", "turn"), ("requests", "requests"), ("input_tokens_mean", "mean input tokens"),
                ("ttft_s_median", "TTFT p50 (ms)"), ("cache_hit_rate", "cache hit rate")]


def sessions_section(manifest: Manifest, requests: pa.Table) -> str:
    """Sessions and the prefix cache of a multi-turn run (`scoville sessions` in the report); "" for single turns."""
    if (not requests.num_rows or "turn" not in requests.column_names
            or not (pc.max(requests.column("turn")).as_py() or 0)):
        return ""
    labels = {p.index: p.label for p in manifest.load_plan.points}
    per_point = [[str(labels.get(r["point"], r["point"])), *[_rate(k, r.get(k)) for k, _ in SESSION_COLUMNS]]
                 for r in points_session_metrics(manifest, requests)]
    per_turn = [[_rate(k, r.get(k)) for k, _ in TURN_COLUMNS] for r in turn_metrics(requests)]
    return ("<h3>Sessions and prefix cache</h3>"
            + _table(["point", *[h for _, h in SESSION_COLUMNS]], per_point, "points")
            + '<p class="note">Per turn, over every load point: later turns carry the conversation so far, so their '
              "prompts grow and more of them should come from the cache.</p>"
            + _table([h for _, h in TURN_COLUMNS], per_turn, "points"))


SERVER_COLUMNS = [("server_requests", "requests", "n"), ("server_ttft_s_mean", "TTFT (ms)", "ms"),
                  ("client_all_ttft_s_mean", "client TTFT (ms)", "ms"),
                  ("client_minus_server_ttft_s", "client − server TTFT (ms)", "ms"),
                  ("server_itl_s_mean", "ITL (ms)", "ms"), ("server_tpot_s_mean", "TPOT (ms)", "ms"),
                  ("client_server_tpot_ratio", "client ÷ server TPOT", "ratio"),
                  ("server_e2e_s_mean", "E2E (s)", "n"), ("server_queue_s_mean", "queue (ms)", "ms"),
                  ("server_running_mean", "running", "n"), ("server_waiting_mean", "waiting", "n"),
                  ("server_kv_usage_mean", "KV use mean", "pct"), ("server_kv_usage_max", "KV use max", "pct"),
                  ("server_prefix_hit_rate", "prefix hit rate", "pct"), ("server_preemptions", "preemptions", "n")]


def _server_cell(kind: str, v: Any) -> str:
    if v is None or isinstance(v, bool) or not isinstance(v, (int, float)):
        return "—" if v is None else str(v)
    return {"ms": f"{v * 1e3:.3g}", "ratio": f"{v:.4f}", "pct": f"{v:.1%}"}.get(kind, fmt_value(float(v)))


def server_section(rows: list[dict[str, Any]]) -> str:
    """The server's own /metrics figures per point beside the client's (docs/server-metrics.md); "" when the
    run scraped none."""
    rows = sorted((r for r in rows if r.get("server_requests") is not None), key=lambda r: r.get("point", 0))
    if not rows:
        return ""
    body = [[str(r.get("label")), *[_server_cell(kind, r.get(k)) for k, _, kind in SERVER_COLUMNS]] for r in rows]
    flagged = [str(r.get("label")) for r in rows if r.get("ttft_gap_large")]
    note = ('<p class="note">Means over each point\'s window, from the scrape just before its first request to the '
            "one after its last, so warm-up requests are included; the client columns use the same requests. "
            "Running, waiting and KV use are read from the scrapes inside the window.</p>")
    warn = (f'<p class="note warn">Client TTFT exceeds the server\'s by more than max(25 ms, 10%) at '
            f'{_e(", ".join(flagged))}: time spent outside the engine (network, HTTP, tokenization, a busy '
            "client).</p>" if flagged else "")
    return ("<h3>Server-side</h3>" + _table(["point", *[h for _, h, _ in SERVER_COLUMNS]], body, "points")
            + note + warn)


def _rate(key: str, v: Any) -> str:
    return "—" if v is None else (f"{v:.0%}" if key == "cache_hit_rate" else _cell(key, v))


def _comparisons(systems: list[System], at: Sequence[float | str]) -> tuple[list[Comparison], list[str]]:
    """Every comparison the runs allow, and why any was left out (no power or no price recorded)."""
    out, left_out = [], []
    for per in ("kW", "accelerator", "dollar"):
        try:
            out.append(compare(systems, at, per=per))
        except UserError as e:
            left_out.append(f"Throughput per {per} is not compared: {e}.")
    return out, left_out


def render(groups: list[list[Path]], *, title: str | None = None, at: Sequence[float | str] = ("common",)) -> str:
    """The report's HTML for systems made of the given groups of run directories."""
    if not groups or not all(groups):
        raise UserError("report needs at least one run")
    systems = load_systems(groups)
    colors = system_colors(systems)
    figures: dict[str, dict[str, Any]] = {}
    frontiers = frontier_charts(systems)
    advantage = ratio_charts(systems)
    for c in advantage + frontiers:
        figures[c.id] = figure(c)
    comparisons, left_out = _comparisons(systems, at)
    decide = decision_grid(systems)
    title = title or "scoville report: " + " vs ".join(s.label for s in systems)
    legend = "".join(f'<span><span class="swatch" style="background:{colors[s.label]}"></span><b>{_e(s.label)}</b>'
                     f' <span class="meta">{_e(s.source)} · power {_e(s.power_basis)} · '
                     f'{_e(", ".join(d.name for d in s.run_dirs))}</span></span>' for s in systems)
    body = [f"<h1>{_e(title)}</h1>",
            f'<div class="meta">generated {datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")} by scoville '
            f"{_e(scoville.__version__)}</div>",
            f'<div class="systems">{legend}</div>',
            comparison_section(comparisons, left_out) if len(systems) > 1 else "",
            decision_html(decide) if decide is not None and len(systems) > 1 else "",
            *(["<h3>Advantage at equal interactivity</h3>",
                '<p class="note">Each contender\'s frontier divided by the baseline\'s at the same tok/s/user, '
                "drawn only where both frontiers reach (the table's iso-interactivity ratios are points on these "
                "curves).</p>", '<div class="grid2">' + "".join(_chart_div(c) for c in advantage) + "</div>"]
              if advantage else []),
            "<h2>Pareto frontiers</h2>",
            '<p class="note">Filled markers lie on a frontier, hollow ones are dominated by another load point or '
            "configuration of the same system; lines are the Steffen interpolation along each frontier. "
            "Hover a marker for its run, load point and configuration.</p>",
            '<div class="grid2">' + "".join(_chart_div(c) for c in frontiers) + "</div>",
            run_summary(comparisons, left_out) if len(systems) == 1 else "",
            decision_html(decide) if decide is not None and len(systems) == 1 else ""]
    for s in systems:
        for d, m in zip(s.run_dirs, s.manifests, strict=True):
            body.append(run_section(s, d, m, colors[s.label], figures))
    data = json.dumps(figures, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")
    decide_data = json.dumps(decide.to_json() if decide else None, separators=(",", ":"), allow_nan=False)
    script = ("const FIGS = " + data + ";\n"
              "const DECIDE = " + decide_data.replace("</", "<\\/") + ";\n"
              "const CONFIG = {displaylogo: false, responsive: true, "
              "toImageButtonOptions: {format: 'png', scale: 2}, "
              # a short toolbar (save, zoom, reset) that clears the chart's title at 800 px
              "modeBarButtonsToRemove: ['pan2d', 'select2d', 'lasso2d', 'zoomIn2d', 'zoomOut2d', 'autoScale2d', "
              "'hoverClosestCartesian', 'hoverCompareCartesian', 'toggleSpikelines', 'sendChartToCloud']};\n"
              + DECISION_SCRIPT + PLOTLY_LOADER
              + "if (typeof DecompressionStream === 'undefined') {\n"
              f"  document.querySelectorAll('.chart').forEach(el => {{ el.textContent = {NO_DECOMPRESSION}; }});\n"
              "} else {\n"
              "  loadPlotly().then(() => Promise.all(Object.entries(FIGS).map(([id, f]) =>\n"
              "    Plotly.newPlot(id, f.data, f.layout, CONFIG))))\n"
              "  .then(() => { if (decideInput) decideLines(+decideInput.value);\n"
              "                document.body.dataset.chartsReady = 'yes'; });\n"
              "}\n")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{_e(title)}</title><style>{CSS}</style>"
            f'<script id="plotly-gz" type="application/gzip;base64">{plotly_js_packed()}</script>'
            "</head><body>\n" + "\n".join(body)
            + f"\n<script>\n{script}</script>\n</body></html>\n")


def write_report_groups(groups: list[list[Path]], out: Path, *, title: str | None = None,
                        at: Sequence[float | str] = ("common",)) -> Path:
    """Write the report for systems that may pool several runs each; returns ``out``.

    The destination is checked before the (slow) rendering, and again when written (see reporting.output).
    """
    out = Path(out)
    check_destination(out)
    return write_file(out, render(groups, title=title, at=at).encode("utf-8"))


def write_report(run_dirs: list[Path], out: Path, *, title: str | None = None) -> Path:
    """One self-contained HTML report comparing ``run_dirs`` (the first is the baseline); returns ``out``."""
    return write_report_groups([[Path(d)] for d in run_dirs], out, title=title)
