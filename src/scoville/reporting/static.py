"""The report's charts as PNG/SVG files (matplotlib), for papers and slides.

Same chart specs as the HTML report, so a slide and the interactive page can
never disagree. matplotlib is imported only here (and only when asked for),
keeping ``write_report`` fast.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scoville.analysis.runs import load_systems
from scoville.errors import UserError
from scoville.power.sources import manifest_power_basis
from scoville.reporting.charts import (
    Chart,
    cdf_charts,
    frontier_charts,
    latency_samples,
    power_chart,
    ratio_charts,
    safe_id,
)
from scoville.reporting.output import check_destination, write_file
from scoville.reporting.plotly_fig import log_ticks, tick_label
from scoville.results.catalog import read_power_samples, read_records

FORMATS = ("png", "svg")


def report_charts(groups: list[list[Path]]) -> list[Chart]:
    """Every chart of the report for these systems: frontiers, then each run's CDFs and power."""
    systems = load_systems(groups)
    charts = frontier_charts(systems)
    advantage = ratio_charts(systems)
    charts = advantage + charts
    for s in systems:
        for d, m in zip(s.run_dirs, s.manifests, strict=True):
            plan = m.load_plan.points
            run_id = safe_id(m.run_id or d.name)
            requests = read_records(d)
            compat = m.compat
            samples = latency_samples(requests, compat) if requests.num_rows else {}
            if samples:
                charts.extend(cdf_charts(run_id, plan, samples, s.label, compat))
            pc = power_chart(run_id, read_power_samples(d), plan, samples, s.label, manifest_power_basis(m))
            if pc is not None:
                charts.append(pc)
    return charts


def _apply_log_ticks(axis: Any, values: Sequence[float]) -> None:
    """The same 1-2-5 labelled ticks as the HTML charts (matplotlib's default log labels read 10^k)."""
    from matplotlib.ticker import NullLocator

    vals = [v for v in values if v and v > 0]
    if not vals:
        return
    ticks = log_ticks(min(vals), max(vals))
    axis.set_ticks(ticks)
    axis.set_ticklabels([tick_label(t) for t in ticks])
    axis.set_minor_locator(NullLocator())


def _band_bars(ax: object, s: object) -> None:
    """Error bars on the points that carry a band (a bootstrap interval or the simulator's), on either axis."""
    for i, (x, y) in enumerate(zip(s.x, s.y, strict=True)):  # type: ignore[attr-defined]
        xb = s.x_band[i] if s.x_band else None  # type: ignore[attr-defined]
        yb = s.y_band[i] if s.y_band else None  # type: ignore[attr-defined]
        if xb is None and yb is None:
            continue
        ax.errorbar([x], [y], xerr=[[x - xb[0]], [xb[1] - x]] if xb else None,  # type: ignore[attr-defined]
                    yerr=[[y - yb[0]], [yb[1] - y]] if yb else None, fmt="none", ecolor=s.color,  # type: ignore[attr-defined]
                    elinewidth=1.2, capsize=2.5, zorder=2)


def draw(chart: Chart, path: Path) -> Path:
    """Render one chart to ``path`` (format from its suffix), written as reporting.output writes any report file."""
    check_destination(path)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    wide = chart.id.startswith("power-")
    fig, ax = plt.subplots(figsize=(12, 5) if wide else (8, 5.5), dpi=150, layout="constrained")
    try:
        for a, b, label in chart.bands:
            ax.axvspan(a, b, color="#888", alpha=0.12, lw=0)
            ax.annotate(label, ((a + b) / 2, 1.0), xycoords=("data", "axes fraction"), ha="center", va="bottom",
                        fontsize=9, color="#555")
        for x, label in chart.vlines:
            left = chart.label_side(x) == "left"
            ax.axvline(x, color="#555", lw=1.3, ls="--", zorder=1)
            ax.annotate(label, (x, 0.99), xycoords=("data", "axes fraction"), ha="right" if left else "left",
                        va="top", fontsize=10, color="#555", xytext=(-4 if left else 4, 0),
                        textcoords="offset points")
        for s in chart.series:
            if s.kind == "points":
                on = [i for i, d in enumerate(s.dominated or [False] * len(s.x)) if not d]
                off = [i for i, d in enumerate(s.dominated or [False] * len(s.x)) if d]
                ax.scatter([s.x[i] for i in on], [s.y[i] for i in on], s=42, color=s.color, zorder=3,
                           edgecolors=s.color)
                ax.scatter([s.x[i] for i in off], [s.y[i] for i in off], s=42, facecolors="none",
                           edgecolors=s.color, linewidths=1.4, zorder=3)
                _band_bars(ax, s)
            else:
                ax.plot(s.x, s.y, color=s.color, lw=2.6 if s.kind == "frontier" else 1.2 if s.dash else 1.8,
                        ls=":" if s.dash else "-", drawstyle="steps-post" if s.step else "default", label=s.name)
        short = FuncFormatter(lambda v, _pos: tick_label(v) if v >= 0 else f"{v:g}")
        if chart.x_log:
            ax.set_xscale("log")
            _apply_log_ticks(ax.xaxis, [v for s in chart.series for v in s.x])
        else:
            ax.xaxis.set_major_formatter(short)
        if chart.y_log:
            ax.set_yscale("log")
            _apply_log_ticks(ax.yaxis, [v for s in chart.series for v in s.y])
        else:
            ax.yaxis.set_major_formatter(short)
        title = chart.title + (f"\n{chart.subtitle}" if chart.subtitle else "")
        ax.set_title(title, fontsize=15, loc="left", pad=14 if chart.bands else 6)
        ax.set_xlabel(chart.x_label, fontsize=13)
        ax.set_ylabel(chart.y_label, fontsize=13)
        ax.tick_params(labelsize=11)
        ax.grid(True, color="#e6e6e6", lw=0.8)
        ax.set_axisbelow(True)
        if chart.note:
            ax.text(1.0, 1.01, chart.note, transform=ax.transAxes, ha="right", va="bottom", fontsize=9,
                    color="#a33")
        if any(s.kind != "points" for s in chart.series):
            ax.legend(fontsize=11, frameon=False, loc="best", ncol=2 if len(chart.series) > 8 else 1)
        buf = io.BytesIO()
        fig.savefig(buf, format=path.suffix.lstrip("."))
    finally:
        plt.close(fig)
    return write_file(path, buf.getvalue())


def write_images(groups: list[list[Path]], out_dir: Path, fmt: str) -> list[Path]:
    """Every report chart as ``out_dir/<chart id>.<fmt>``; returns the files written."""
    if fmt not in FORMATS:
        raise UserError(f"image format {fmt!r}: use one of {', '.join(FORMATS)}")
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"{out_dir} exists and is not a folder; give a folder for the {fmt.upper()} files")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"cannot create {out_dir} ({e.strerror or e}); give a folder you can write for the "
                        f"{fmt.upper()} files") from None
    return [draw(c, out_dir / f"{c.id}.{fmt}") for c in report_charts(groups)]
