"""Chart spec -> plotly.js figure JSON (plain dicts: no plotly.graph_objects import, so reports stay fast)."""

from __future__ import annotations

import math
from typing import Any

from scoville.reporting.charts import Chart

FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif"


def _axis(title: str, log: bool, values: list[float]) -> dict[str, Any]:
    axis: dict[str, Any] = {
        "title": {"text": title, "font": {"size": 15}},
        "type": "log" if log else "linear",
        "showgrid": True, "gridcolor": "#e6e6e6", "zeroline": False,
        "linecolor": "#444", "mirror": True, "ticks": "outside", "tickfont": {"size": 13},
    }
    if log and values:
        ticks = log_ticks(min(values), max(values))
        axis.update(tickvals=ticks, ticktext=[tick_label(t) for t in ticks])
    if values and max(values) - min(values) <= 0.02 * max(values):
        # one point, or all alike: plotly would zoom onto a sliver and tick it "33.1195k"; show the point
        # against a range a reader can place it in
        hi = max(values)
        axis["range"] = [math.log10(hi) - 0.5, math.log10(hi) + 0.5] if log else [0, 2 * hi]
    return axis


def log_ticks(lo: float, hi: float) -> list[float]:
    """1-2-5 ticks per decade (only powers of ten past four decades), labelled in full below."""
    lo_e, hi_e = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    mantissas = (1,) if hi_e - lo_e > 4 else (1, 2, 5)
    ticks = [m * 10.0 ** e for e in range(lo_e, hi_e + 1) for m in mantissas]
    inside = [t for t in ticks if lo / 1.5 <= t <= hi * 1.5]
    return inside if len(inside) >= 2 else ticks


def tick_label(v: float) -> str:
    """100 · 2k · 50k · 1M · 0.05: short enough to stay legible at slide size."""
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if v >= div:
            return f"{v / div:g}{suffix}"
    return f"{v:g}"


def _positive(values: list[float]) -> list[float]:
    return [v for v in values if v is not None and v > 0 and math.isfinite(v)]


def trace(series: Any) -> dict[str, Any]:
    t: dict[str, Any] = {"type": "scatter", "name": series.name, "x": series.x, "y": series.y}
    if series.group:
        t["legendgroup"] = series.group
    if series.kind == "points":
        t.update(mode="markers", marker={"color": series.color, "size": 9, "opacity": 0.8,
                                         "line": {"color": series.color, "width": 1.5}})
        t["showlegend"] = False
        if series.dominated:
            t["marker"]["symbol"] = ["circle-open" if d else "circle" for d in series.dominated]
        for axis, band, values in (("error_x", series.x_band, series.x), ("error_y", series.y_band, series.y)):
            if band:
                t[axis] = {"type": "data", "symmetric": False, "color": series.color, "thickness": 1.3, "width": 3,
                           "array": [b[1] - v if b else 0 for b, v in zip(band, values, strict=True)],
                           "arrayminus": [v - b[0] if b else 0 for b, v in zip(band, values, strict=True)]}
    elif series.kind == "frontier":
        t.update(mode="lines", line={"color": series.color, "width": 3})
    else:
        t.update(mode="lines", line={"color": series.color, "width": 1.5 if series.dash else 2.5 if series.group else 2,
                                     "shape": "hv" if series.step else "linear",
                                     "dash": "dot" if series.dash else "solid"})
    if series.hover:
        t["text"] = series.hover
        t["hovertemplate"] = "%{text}<extra></extra>"
    return t


def figure(chart: Chart) -> dict[str, Any]:
    """``{"data": [...], "layout": {...}}`` ready for Plotly.newPlot."""
    layout: dict[str, Any] = {
        "title": {"text": chart.title + (f"<br><span style='font-size:13px;color:#555'>{chart.subtitle}</span>"
                                         if chart.subtitle else ""),
                  "font": {"size": 18}, "x": 0.02, "xanchor": "left"},
        "xaxis": _axis(chart.x_label, chart.x_log, _positive([v for s in chart.series for v in s.x])),
        "yaxis": _axis(chart.y_label, chart.y_log, _positive([v for s in chart.series for v in s.y])),
        "font": {"family": FONT, "size": 14, "color": "#222"},
        "paper_bgcolor": "white", "plot_bgcolor": "white",
        "margin": {"l": 80, "r": 20, "t": 78 if chart.subtitle else 60, "b": 70},
        "legend": {"orientation": "h", "y": -0.22, "x": 0, "font": {"size": 13}},
        "hovermode": "closest",
        "height": 460,
    }
    if chart.bands:
        layout["shapes"] = [{"type": "rect", "xref": "x", "yref": "paper", "x0": a, "x1": b, "y0": 0, "y1": 1,
                             "fillcolor": "#888", "opacity": 0.08 if i % 2 else 0.16, "line": {"width": 0},
                             "layer": "below"} for i, (a, b, _) in enumerate(chart.bands)]
        layout["annotations"] = [{"x": (a + b) / 2, "y": 1, "xref": "x", "yref": "paper", "text": label,
                                  "showarrow": False, "yanchor": "bottom", "font": {"size": 11, "color": "#555"}}
                                 for a, b, label in chart.bands]
    for x, label in chart.vlines:
        layout.setdefault("shapes", []).append(
            {"type": "line", "xref": "x", "yref": "paper", "x0": x, "x1": x, "y0": 0, "y1": 1,
             "line": {"color": "#555", "width": 1.5, "dash": "dash"}})
        layout.setdefault("annotations", []).append(
            {"x": math.log10(x) if chart.x_log else x, "y": 1, "xref": "x", "yref": "paper", "text": label,
             "showarrow": False, "xanchor": "right" if chart.label_side(x) == "left" else "left",
             "yanchor": "top", "textangle": 0,
             "font": {"size": 12, "color": "#555"}, "bgcolor": "rgba(255,255,255,0.8)"})
    if chart.note:
        layout.setdefault("annotations", []).append(
            {"text": chart.note, "xref": "paper", "yref": "paper", "x": 1, "y": 1.02, "xanchor": "right",
             "yanchor": "bottom", "showarrow": False, "font": {"size": 12, "color": "#a33"}})
    return {"data": [trace(s) for s in chart.series], "layout": layout}
