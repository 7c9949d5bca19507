"""The report's decision control: pick a tok/s/user, read every system's throughput, cost and energy there.

The seeds' second yardstick (throughput per kW at equal per-user speed) as a control a person drags, offline.
Every value is read off that system's own Pareto frontier of the measure against interactivity, exactly as
``compare --at-interactivity`` reads it (Steffen interpolation, never extrapolated), on a fixed grid computed
here in Python: the page only looks values up, so what the slider shows cannot drift from what ``compare``
prints. Where an interactivity lies below everything a system measured, its highest-throughput point is a
measured bound ("at least", or "at most" for a lower-better measure); past its fastest point there is no value.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from scoville.analysis.frontier import Direction, frontier
from scoville.analysis.runs import System
from scoville.power.sources import CATALOG_BASES, catalog_watts

GRID_POINTS = 161


@dataclass(frozen=True)
class Measure:
    """A column the control reads, how it is named on the page, and which way is better."""

    key: str
    name: str
    unit: str
    better: Direction


MEASURES = (
    Measure("total_throughput_per_accelerator", "throughput per accelerator", "tok/s", "higher"),
    Measure("total_throughput_per_kw", "throughput per kW, each run's power basis", "tok/s/kW", "higher"),
    Measure("usd_per_mtok_total", "cost per million tokens", "$/Mtok", "lower"),
    Measure("joules_per_output_token", "energy per output token", "J/tok", "lower"),
)


@dataclass(frozen=True)
class Reading:
    """One system's value of one measure at one interactivity; ``bound`` says when it is a measured bound."""

    value: float | None
    bound: str | None = None    # "at least" | "at most"


@dataclass(frozen=True)
class DecisionGrid:
    """Everything the control shows, precomputed: ``readings[measure][system][i]`` at ``xs[i]``."""

    xs: list[float]
    start: int                     # the initial position: the highest interactivity every system reaches
    systems: list[str]
    measures: list[Measure]
    readings: dict[str, list[list[Reading]]]

    def to_json(self) -> dict[str, object]:
        return {"xs": self.xs, "start": self.start, "systems": self.systems,
                "measures": [{"key": m.key, "name": m.name, "unit": m.unit, "better": m.better,
                              "cells": [[[r.value, r.bound] for r in per_x] for per_x in self.readings[m.key]]}
                             for m in self.measures]}


def decision_grid(systems: Sequence[System], points: int = GRID_POINTS) -> DecisionGrid | None:
    """The grid over every interactivity some system reaches (log-spaced), or None when no system has a frontier."""
    speed = [frontier(s.rows, "interactivity", MEASURES[0].key) for s in systems]
    reached = [f for f in speed if f.points]
    if not reached:
        return None
    lo, hi = min(f.xs[0] for f in reached), max(f.xs[-1] for f in reached)
    common = min(f.xs[-1] for f in reached) if len(reached) == len(systems) else hi
    grid = np.geomspace(lo, hi, points) if hi > lo > 0 else np.array([lo])
    xs = sorted({float(x) for x in grid} | {common})
    measures = [m for m in MEASURES if any(math.isfinite(r.get(m.key) or math.nan) for s in systems for r in s.rows)]
    readings = {}
    for m in measures:
        fronts = [frontier(s.rows, "interactivity", m.key, y_dir=m.better) for s in systems]
        readings[m.key] = [[Reading(*f.read(x)) for x in xs] for f in fronts]
    after_per_kw = next((i + 1 for i, m in enumerate(measures) if m.key == "total_throughput_per_kw"), 1)
    measures[after_per_kw:after_per_kw] = _catalog_basis_measures(systems, readings[MEASURES[0].key], readings)
    return DecisionGrid(xs, xs.index(common), [s.label for s in systems], measures, readings)


def _catalog_basis_measures(systems: Sequence[System], per_accelerator: list[list[Reading]],
                            readings: dict[str, list[list[Reading]]]) -> list[Measure]:
    """Throughput per kW of every system on one catalog power basis (rated chip, all-in rack), so a reader sees
    how much of a per-kW ratio is the power boundary (the seeds compared a rated chip with an all-in rack).

    Per accelerator ÷ kW per accelerator: the same frontier scaled, so bounds carry over. A system not in the
    catalog has no figure on that basis (a dash), never a guessed one.
    """
    watts = [catalog_watts(s.hardware) for s in systems]
    added = []
    for basis, label in CATALOG_BASES.items():
        if not any(basis in w for w in watts):
            continue
        m = Measure(f"per_kw_{basis}", f"throughput per kW, {label} (catalog)", "tok/s/kW", "higher")
        readings[m.key] = [[Reading(r.value * 1000.0 / w[basis] if r.value is not None and basis in w else None,
                                    r.bound if basis in w else None) for r in per_x]
                           for per_x, w in zip(per_accelerator, watts, strict=True)]
        added.append(m)
    return added


def decision_html(grid: DecisionGrid) -> str:
    """The control's section: a slider over ``grid.xs`` and the table the script fills."""
    contenders = grid.systems[1:]
    ratio_heads = "".join(f"<th>{html.escape(c)}<br>vs {html.escape(grid.systems[0])}</th>" for c in contenders)
    heads = "".join(f"<th>{html.escape(s)}</th>" for s in grid.systems)
    ratios_note = (" The last columns are each system's figure over the first's, as in the comparison tables: "
                   "above 1 is better for throughput, below 1 for cost and energy." if contenders else "")
    return (
        '<section id="decide"><h2>Read off at an interactivity</h2>'
        '<p class="note">Drag to choose a speed per user; each figure is read off that system\'s own frontier '
        "(Steffen interpolation, never extrapolated, as <code>scoville compare --at-interactivity</code> reads it). "
        "\u2265 or \u2264 marks a measured bound: every point of that system already serves users faster, and its "
        f"best one is at least that good. A dash: the system does not reach that speed.{ratios_note}</p>"
        '<div class="decide-control"><label for="decide-x">interactivity</label> '
        f'<input type="range" id="decide-x" min="0" max="{len(grid.xs) - 1}" step="1" value="{grid.start}"> '
        '<output id="decide-value" for="decide-x"></output> tok/s/user</div>'
        f'<div class="scroll"><table class="decide"><thead><tr><th>measure</th>{heads}{ratio_heads}</tr></thead>'
        '<tbody id="decide-body"></tbody></table></div></section>')


# Fills the table for the slider's position and draws a dotted line there on every interactivity chart.
DECISION_SCRIPT = """function fmtNum(v) {
  if (v === null) return '\\u2014';
  if (Math.abs(v) >= 100) return Math.round(v).toLocaleString('en-US');
  return Number(v.toPrecision(3)).toLocaleString('en-US', {maximumFractionDigits: 3});
}
function decideAt(i) {
  const x = DECIDE.xs[i];
  document.getElementById('decide-value').textContent = fmtNum(x);
  const body = document.getElementById('decide-body');
  body.replaceChildren(...DECIDE.measures.map(m => {
    const tr = document.createElement('tr');
    const cell = (text, cls) => { const td = document.createElement('td'); td.textContent = text;
      if (cls) td.className = cls; tr.appendChild(td); };
    cell(m.name + ' (' + m.unit + (m.better === 'lower' ? ', lower is better' : '') + ')');
    m.cells.forEach(perX => { const [v, bound] = perX[i];
      cell((bound === 'at least' ? '\\u2265 ' : bound === 'at most' ? '\\u2264 ' : '') + fmtNum(v),
           v === null ? 'undef' : ''); });
    const base = m.cells[0][i][0];
    m.cells.slice(1).forEach(perX => { const v = perX[i][0];
      const r = (v === null || base === null || base === 0) ? null : v / base;
      cell(r === null ? '\\u2014' : fmtNum(r) + '\\u00d7', r === null ? 'undef' : ''); });
    return tr;
  }));
  document.body.dataset.decideX = String(x);
}
function decideLines(i) {
  const x = DECIDE.xs[i];
  Object.entries(FIGS).filter(([id]) => id.endsWith('-interactivity')).forEach(([id, f]) => {
    const line = {type: 'line', xref: 'x', yref: 'paper', x0: x, x1: x, y0: 0, y1: 1,
                  line: {color: '#555', width: 1.5, dash: 'dot'}};
    Plotly.relayout(id, {shapes: (f.layout.shapes || []).concat([line])});
  });
}
const decideInput = document.getElementById('decide-x');
if (decideInput) {
  decideInput.addEventListener('input', () => {
    decideAt(+decideInput.value);
    if (window.Plotly) decideLines(+decideInput.value);
  });
  decideAt(+decideInput.value);
}
"""
