"""Renderer-neutral chart specifications: the same charts feed plotly (HTML) and matplotlib (PNG/SVG).

A chart is a list of series with axis titles (always with units) and a log
flag per axis, chosen from the data: an axis goes logarithmic when its values
span more than ``LOG_SPAN`` (a frontier from 118 to 85,400 tok/s/kW is
unreadable on a linear axis). Each system keeps one colour on every chart.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from scoville.analysis.compare import UNITS
from scoville.analysis.frontier import frontier
from scoville.analysis.runs import System
from scoville.latency import request_tpot
from scoville.metrics import itl_gaps  # the one definition of ITL
from scoville.results.manifest import PlannedPoint
from scoville.stats import PREDICTION_BAND

LOG_SPAN = 30.0
# Okabe–Ito: distinguishable with every common colour-vision deficiency.
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442")
CDF_LEVELS = 201


@dataclass
class Series:
    """One trace: ``kind`` is "frontier" (line), "points" (markers) or "line"."""

    name: str
    x: list[float]
    y: list[float]
    kind: str
    color: str
    group: str = ""
    hover: list[str] | None = None
    step: bool = False
    dominated: list[bool] | None = None  # per marker: off the frontier (drawn hollow)
    dash: bool = False  # a reference line (parity), not data
    # per marker: (low, high) of its ``<metric>_lo``/``_hi`` (a bootstrap interval or the simulator's band), or None
    x_band: list[tuple[float, float] | None] | None = None
    y_band: list[tuple[float, float] | None] | None = None


@dataclass
class Chart:
    """A chart as data; ``id`` is stable (used as the HTML element id and the image file name)."""

    id: str
    title: str
    x_label: str
    y_label: str
    series: list[Series] = field(default_factory=list)
    x_log: bool = False
    y_log: bool = False
    note: str | None = None
    subtitle: str | None = None  # e.g. the power basis every per-kW value on the chart shares
    bands: list[tuple[float, float, str]] = field(default_factory=list)  # shaded x-ranges with labels
    vlines: list[tuple[float, str]] = field(default_factory=list)  # dashed markers at x, with labels

    def label_side(self, x: float) -> str:
        """Where a marker's label goes so it stays inside the plot: "left" of x in the right half, else "right"."""
        xs = [v for s in self.series for v in s.x if v is not None and math.isfinite(v) and (v > 0 or not self.x_log)]
        if not xs:
            return "left"
        lo, hi = min(xs), max(xs)
        if self.x_log:
            lo, hi, x = math.log10(lo), math.log10(hi), math.log10(x)
        return "left" if hi == lo or (x - lo) / (hi - lo) > 0.5 else "right"

    def autoscale(self) -> Chart:
        """Log axes where the plotted values span decades."""
        self.x_log = _spans_decades([v for s in self.series for v in s.x])
        self.y_log = _spans_decades([v for s in self.series for v in s.y])
        return self


def _spans_decades(values: Sequence[float]) -> bool:
    vals = [v for v in values if v is not None and math.isfinite(v)]
    if not vals or min(vals) <= 0:
        return False
    return max(vals) / min(vals) > LOG_SPAN


def system_colors(systems: Sequence[System]) -> dict[str, str]:
    return {s.label: PALETTE[i % len(PALETTE)] for i, s in enumerate(systems)}


X_AXES = {
    "interactivity": ("interactivity", "interactivity (tok/s/user, 1/median TPOT)", "vs interactivity"),
    "e2e": ("e2e_s_median", "end-to-end latency, median (s)", "vs E2E latency"),
    "ttft": ("ttft_s_median", "time to first token, median (s)", "vs TTFT"),
}


def _hover(row: dict[str, Any], x_label: str, y_label: str, x: float, y: float) -> str:
    parts = [f"{row.get('system', '')}", f"run {row.get('run_id', '')} · point {row.get('label') or row.get('point')}"]
    if row.get("concurrency") is not None:
        parts.append(f"concurrency {row['concurrency']}")
    if row.get("rate") is not None:
        parts.append(f"rate {row['rate']:.4g} req/s")
    parts.append(f"{x_label}: {x:.4g}")
    parts.append(f"{y_label}: {y:,.4g}")
    if row.get("config"):
        parts.append("config " + config_summary(row["config"]))
    return "<br>".join(parts)


# The configuration fields that decide where a point sits on a frontier, shown first in hovers.
_CONFIG_KEYS = ("parallel", "disaggregation", "replicas", "precision", "max_num_seqs", "max_num_batched_tokens",
                "speculative", "host_offload")


def _compact(v: Any) -> str:
    """{"tp": 8, "dp": 1} -> "tp8 dp1"; nested dicts in parentheses."""
    if not isinstance(v, dict):
        return str(v)

    def item(k: str, x: Any) -> str:
        if isinstance(x, dict):
            return f"{k}({_compact(x)})"
        return f"{k}{x}" if isinstance(x, (int, float)) and not isinstance(x, bool) else f"{k}={x}"

    return " ".join(item(k, x) for k, x in v.items() if x is not None)


def config_summary(config: str | Mapping[str, object], limit: int = 160) -> str:
    """A point's (simulator) configuration in one short hover line, e.g. "parallel tp8 dp1 ep1 · replicas 2"."""
    try:
        data = json.loads(config) if isinstance(config, str) else config
    except json.JSONDecodeError:
        return str(config)[:limit]
    if not isinstance(data, dict):
        return str(data)[:limit]
    keys = ([k for k in _CONFIG_KEYS if data.get(k) not in (None, {}, [])]
            or [k for k, v in data.items() if v is not None])
    text = " · ".join(f"{k} {_compact(data[k])}" for k in keys)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def frontier_chart(systems: Sequence[System], x_key: str, per: str, metric: str = "total") -> Chart:
    """Each system's load points and its Pareto frontier (Steffen-interpolated line)."""
    x_metric, x_label, x_title = X_AXES[x_key]
    y_metric = {"kW": f"{metric}_throughput_per_kw", "accelerator": f"{metric}_throughput_per_accelerator"}[per]
    colors = system_colors(systems)
    with_y = [s for s in systems if any(isinstance(r.get(y_metric), (int, float)) for r in s.rows)]
    missing = [s.label for s in systems if s not in with_y]
    bases = {s.power_basis for s in with_y}
    y_label = f"{metric} throughput ({UNITS[per]})"
    chart = Chart(id=f"frontier-{per.lower()}-{x_key}", title=f"Throughput per {per} {x_title}",
                  x_label=x_label, y_label=y_label)
    if per == "kW" and len(bases) == 1:
        chart.subtitle = f"power: {next(iter(bases))}"
    if missing:
        chart.note = "no power figure, not shown: " + ", ".join(missing)
    kinds: dict[str, None] = {}
    for s in with_y:
        f = frontier(s.rows, x_metric, y_metric)
        name = s.label if per != "kW" or len(bases) == 1 else f"{s.label} [{s.power_basis}]"
        pts = sorted([(p, False) for p in f.points] + [(p, True) for p in f.dominated], key=lambda q: q[0].x)
        chart.series.append(Series(f"{name} points", [p.x for p, _ in pts], [p.y for p, _ in pts], "points",
                                   colors[s.label], s.label,
                                   [_hover(p.row, x_label, y_label, p.x, p.y) + ("<br>(dominated)" if d else "")
                                    for p, d in pts], dominated=[d for _, d in pts],
                                   x_band=_bands([p.row for p, _ in pts], x_metric),
                                   y_band=_bands([p.row for p, _ in pts], y_metric)))
        if chart.series[-1].y_band or chart.series[-1].x_band:
            kinds.update(dict.fromkeys(band_kinds([p.row for p, _ in pts])))
        chart.series.append(Series(name, [], [], "frontier", colors[s.label], s.label))
    if kinds:
        chart.note = "; ".join(filter(None, [chart.note, "bars: " + " · ".join(kinds)]))
    chart.autoscale()  # from the measured points only; the lines are drawn on the chosen scale
    for s, series in zip(with_y, chart.series[1::2], strict=True):
        f = frontier(s.rows, x_metric, y_metric)
        series.x, series.y = f.curve(80, log_x=chart.x_log)
    return chart


def band_kinds(rows: Sequence[dict[str, Any]]) -> list[str]:
    """What the bands of these rows are (``band_kind``; an analytic run written before the column: its band)."""
    kinds = [str(r.get("band_kind") or PREDICTION_BAND) for r in rows
             if any(k.endswith("_lo") and r[k] is not None for k in r)]
    return list(dict.fromkeys(kinds))


def _bands(rows: Sequence[dict[str, Any]], metric: str) -> list[tuple[float, float] | None] | None:
    """Each row's (low, high) of ``metric`` (``<metric>_lo`` / ``_hi``: a bootstrap interval of a measured or
    replayed point, or the band of an analytic prediction, as its ``band_kind`` says); None when no row has one."""
    out: list[tuple[float, float] | None] = []
    for r in rows:
        lo, hi = r.get(f"{metric}_lo"), r.get(f"{metric}_hi")
        out.append((float(lo), float(hi)) if isinstance(lo, (int, float)) and isinstance(hi, (int, float)) else None)
    return out if any(b is not None for b in out) else None


def frontier_charts(systems: Sequence[System], metric: str = "total") -> list[Chart]:
    """Throughput per accelerator and per kW against interactivity, E2E latency and TTFT."""
    has_power = any(isinstance(r.get(f"{metric}_throughput_per_kw"), (int, float)) for s in systems for r in s.rows)
    pers = ("accelerator", "kW") if has_power else ("accelerator",)
    charts = [frontier_chart(systems, x_key, per, metric) for x_key in X_AXES for per in pers]
    if len(systems) > 1:
        for c in charts:
            _mark_baseline_reach(c, systems[0].label)
    return charts


def ratio_chart(systems: Sequence[System], per: str, metric: str = "total") -> Chart | None:
    """Each contender's frontier over the baseline's at equal interactivity, where both frontiers reach.

    The curve behind the iso-interactivity figures of the comparison table: a
    ratio is drawn only where both frontiers are defined (never extrapolated).
    """
    if len(systems) < 2:
        return None
    y_metric = {"kW": f"{metric}_throughput_per_kw", "accelerator": f"{metric}_throughput_per_accelerator"}[per]
    colors = system_colors(systems)
    base = systems[0]
    fb = frontier(base.rows, "interactivity", y_metric)
    if not fb.points:
        return None
    chart = Chart(id=f"ratio-{per.lower()}-interactivity", title=f"Throughput per {per} relative to {base.label}, "
                  "at equal interactivity", x_label=X_AXES["interactivity"][1],
                  y_label=f"ratio to {base.label} ({metric} {UNITS[per]})")
    skipped = []
    for s in systems[1:]:
        fc = frontier(s.rows, "interactivity", y_metric)
        lo, hi = (max(fb.xs[0], fc.xs[0]), min(fb.xs[-1], fc.xs[-1])) if fc.points else (1.0, 0.0)
        if hi <= lo:
            skipped.append(s.label)
            continue
        grid = np.geomspace(lo, hi, 120) if lo > 0 else np.linspace(lo, hi, 120)
        knots = [x for x in fb.xs + fc.xs if lo <= x <= hi]  # exact ratios at every measured frontier point
        xs = np.unique(np.concatenate([grid, knots]))
        pairs = [(float(x), fc.at(float(x)), fb.at(float(x))) for x in xs]
        pts = [(x, c / b) for x, c, b in pairs if c is not None and b]
        chart.series.append(Series(f"{s.label} / {base.label}", [p[0] for p in pts], [p[1] for p in pts], "line",
                                   colors[s.label], s.label))
    if skipped:
        chart.note = "frontiers do not overlap in interactivity: " + ", ".join(skipped)
    if not chart.series:
        return None
    chart.autoscale()
    xs_all = [x for se in chart.series for x in se.x]
    chart.series.insert(0, Series("parity (1×)", [min(xs_all), max(xs_all)], [1.0, 1.0], "line", "#999999",
                                  dash=True))
    return chart


def ratio_charts(systems: Sequence[System], metric: str = "total") -> list[Chart]:
    """The advantage curves per kW (when every system has power) and per accelerator."""
    has_power = all(any(isinstance(r.get(f"{metric}_throughput_per_kw"), (int, float)) for r in s.rows)
                    for s in systems)
    charts = [ratio_chart(systems, per, metric) for per in (("kW", "accelerator") if has_power else ("accelerator",))]
    out = [c for c in charts if c is not None]
    for c in out:
        _mark_baseline_reach_at(c, systems[0])
    return out


def _mark_baseline_reach_at(chart: Chart, baseline: System) -> None:
    reach = frontier(baseline.rows, "interactivity", "total_throughput_per_accelerator").reach
    if reach is not None:
        chart.vlines.append((reach, f"{baseline.label} reach: {reach:.4g} tok/s/user"))


def _mark_baseline_reach(chart: Chart, baseline: str) -> None:
    """On interactivity charts, a dashed line where the baseline's frontier ends (the ``auto`` comparison)."""
    if not chart.id.endswith("-interactivity"):
        return
    base = next((s for s in chart.series if s.kind == "points" and s.group == baseline), None)
    if base is not None and base.x:
        reach = max(base.x)
        chart.vlines.append((reach, f"{baseline} reach: {reach:.4g} tok/s/user"))


def _quantile_curve(values: np.ndarray) -> tuple[list[float], list[float]]:
    """An empirical CDF reduced to CDF_LEVELS quantiles (millions of ITL samples stay small)."""
    values = values[np.isfinite(values)]
    if values.size == 0:
        return [], []
    levels = np.linspace(0.0, 1.0, CDF_LEVELS)
    if values.size <= CDF_LEVELS:
        xs = np.sort(values)
        return xs.tolist(), (np.arange(1, xs.size + 1) / xs.size).tolist()
    return np.quantile(values, levels).tolist(), levels.tolist()


# viridis at 0, .25, .5, .75, 1 (hard-coded: importing matplotlib here would slow every report)
_VIRIDIS = ((0x44, 0x01, 0x54), (0x3b, 0x52, 0x8b), (0x21, 0x91, 0x8c), (0x5e, 0xc9, 0x62), (0xfd, 0xe7, 0x25))


def point_colors(n: int) -> list[str]:
    """Dark-to-light sequence for load points (low to high load), perceptually ordered."""
    out = []
    for i in range(n):
        pos = 0.9 * (i / max(n - 1, 1)) * (len(_VIRIDIS) - 1)
        lo = int(pos)
        hi = min(lo + 1, len(_VIRIDIS) - 1)
        frac = pos - lo
        rgb = [round(a + (b - a) * frac) for a, b in zip(_VIRIDIS[lo], _VIRIDIS[hi], strict=True)]
        out.append("#" + "".join(f"{c:02x}" for c in rgb))
    return out


def latency_samples(requests: pa.Table, compat: str = "inferencex") -> dict[int, dict[str, np.ndarray]]:
    """Per point: TTFT, TPOT and ITL samples (s) of measured, successful requests.

    ``compat`` is the run's metrics mode, so the ITL CDF shows the same gaps as
    the run's ITL percentiles (chunk gaps, or per-token gaps in ``clean``).
    """
    keep = pc.and_(pc.invert(requests.column("warmup")), requests.column("ok"))
    ok = requests.filter(keep)
    out: dict[int, dict[str, np.ndarray]] = {}
    points = ok.column("point").to_numpy()
    for idx in sorted(set(points.tolist())):
        sub = ok.filter(pc.equal(ok.column("point"), idx))

        def col(name: str, sub: pa.Table = sub) -> np.ndarray:
            return sub.column(name).to_numpy(zero_copy_only=False).astype(float)

        sent, first, done, n_out = col("t_sent"), col("t_first_token"), col("t_done"), col("output_tokens")
        multi = n_out > 1
        out[idx] = {
            "ttft": first - sent,
            "tpot": request_tpot(first, done, n_out)[multi],
            "itl": itl_gaps(sub.column("token_times"), sub.column("token_counts"), compat),
            "window": np.array([sent.min(), done.max()]),
        }
    return out


CDF_KINDS = (("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"))
ITL_TITLES = {"inferencex": "ITL (chunk gaps)", "clean": "ITL (per token)"}


def safe_id(run_id: str) -> str:
    """A run id usable as an HTML id and a file name."""
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in run_id)


def point_legend_labels(plan: list[PlannedPoint]) -> dict[int, str]:
    """Legend name of each load point, unique within the run.

    A searched simulation replays several deployments at the same concurrency, so "c=1" alone would repeat in a
    legend beside a near-identical colour: a repeated label gets its deployment (or, without one, its index).
    """
    base = {p.index: p.label or f"point {p.index}" for p in plan}
    counts = Counter(base.values())
    labels = {}
    for p in plan:
        name = base[p.index]
        if counts[name] > 1:
            name += f" · {config_summary(p.config, limit=48)}" if p.config else f" #{p.index}"
        labels[p.index] = name
    again = Counter(labels.values())   # the same deployment twice at one load: the index tells them apart
    return {i: (f"{n} #{i}" if again[n] > 1 else n) for i, n in labels.items()}


def cdf_charts(run_id: str, plan: list[PlannedPoint], samples: dict[int, dict[str, np.ndarray]],
               label: str = "", compat: str = "inferencex") -> list[Chart]:
    """TTFT / TPOT / ITL CDFs of one run, one line per load point (``label`` names the system in titles).

    ``compat`` must be the mode ``samples`` were taken in; it only names the ITL chart.
    """
    labels = point_legend_labels(plan)
    colors = point_colors(len(samples))
    charts = []
    for kind, title in CDF_KINDS:
        title = ITL_TITLES.get(compat, title) if kind == "itl" else title
        chart = Chart(id=f"cdf-{kind}-{run_id}", title=f"{label}: {title} CDF" if label else f"{title} CDF",
                      x_label=f"{kind.upper()} (s)",
                      y_label="fraction of requests" if kind != "itl" else "fraction of gaps")
        for color, (idx, s) in zip(colors, samples.items(), strict=True):
            xs, ys = _quantile_curve(s[kind])
            if xs:
                chart.series.append(Series(str(labels.get(idx, idx)), xs, ys, "line", color, step=True))
        chart.x_log = _spans_decades([v for se in chart.series for v in se.x])
        charts.append(chart)
    return charts


MAX_POWER_SAMPLES = 3000


def power_chart(run_id: str, power: pa.Table, plan: list[PlannedPoint],
                samples: dict[int, dict[str, np.ndarray]], label: str = "", basis: str = "") -> Chart | None:
    """Recorded power per device over the run (``basis`` says whose: nvml, csv, model), load points shaded."""
    if power.num_rows == 0:
        return None
    chart = Chart(id=f"power-{run_id}", title=f"{label + ': ' if label else ''}Power over time",
                  x_label="time since run start (s)", y_label="power (W)",
                  subtitle=(f"power: {basis} · " if basis else "") + "shaded: each load point's measured window "
                           "(warm-up excluded)")
    t = power.column("t").to_numpy(zero_copy_only=False).astype(float)
    w = power.column("watts").to_numpy(zero_copy_only=False).astype(float)
    devices = np.asarray(power.column("device").to_pylist(), dtype=object)
    finite = np.isfinite(t) & np.isfinite(w)  # a dropped sample must not break the page's JSON
    t, w, devices = t[finite], w[finite], devices[finite]
    if t.size == 0:
        return None
    names = sorted(set(devices.tolist()))
    for i, dev in enumerate(names):
        mask = devices == dev
        order = np.argsort(t[mask])
        td, wd = t[mask][order], w[mask][order]
        stride = max(1, td.size // MAX_POWER_SAMPLES)
        chart.series.append(Series(str(dev), td[::stride].tolist(), wd[::stride].tolist(), "line",
                                   PALETTE[i % len(PALETTE)]))
    labels = {p.index: p.label or f"point {p.index}" for p in plan}
    chart.bands = [(float(s["window"][0]), float(s["window"][1]), str(labels.get(i, i))) for i, s in samples.items()]
    return chart
