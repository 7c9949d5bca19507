"""The comparison the seed publication was judged by (docs/architecture.md, "Reading runs").

Two yardsticks, per system and as a ratio to the first (baseline) system:

1. peaks — peak throughput (per kW, per accelerator or per dollar), highest
   interactivity, lowest TTFT and E2E latency over all load points;
2. iso-interactivity — throughput on each system's frontier at the same
   tok/s/user, interpolated monotonically (Steffen) and never extrapolated,
   so a frontier that ends early reads "beyond reach", not a number.
   ``auto`` is the highest interactivity the baseline reaches: the point where
   the baseline is at its limit and the contender usually is not (the "104×").
   ``common`` (the default) is the highest interactivity every system reaches, so
   the default comparison is never "beyond reach" for a contender a hair slower.

Where the rows carry bootstrap intervals (``scoville.stats``: over requests, or over
``--repeats``), every figure shows its 95 % interval and every ratio an interval from
the two by interval arithmetic; a ratio whose interval holds 1 is marked "not
distinguishable". The simulator's 80 % prediction band is not a confidence
interval and is not used here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from scoville.analysis.frontier import Frontier, frontier
from scoville.analysis.runs import System
from scoville.errors import UserError
from scoville.numbers import MISSING, significant
from scoville.stats import Interval, distinguishable, ratio_interval, row_interval

PER_CHOICES: tuple[str, ...] = ("kW", "accelerator", "dollar")
METRIC_CHOICES: tuple[str, ...] = ("total", "output")
UNITS = {"kW": "tok/s/kW", "accelerator": "tok/s/accelerator", "dollar": "tok/$"}
X_METRIC = "interactivity"
LATENCY_ESTIMATOR = "median over requests, lowest over load points"
INTERVAL_METHOD = ("95% percentile bootstrap (over requests within a point, or over repeats of a load); "
                   "a peak's from the best low to the best high end over the points; at an interactivity, "
                   "the frontiers of every point at the low and at the high corner of its intervals; "
                   "ratio intervals by interval arithmetic [lo/hi', hi/lo']; a ratio interval holding 1 = "
                   "not distinguishable")


def normalise_per(per: str) -> str:
    """``per`` as ``PER_CHOICES`` spells it, whatever its case (``kw``, ``KW`` and ``kW`` are one choice)."""
    for choice in PER_CHOICES:
        if per.lower() == choice.lower():
            return choice
    raise UserError(f"--per {per!r}: use one of {', '.join(PER_CHOICES)}")


def y_metric(per: str, metric: str = "total") -> str:
    """Metrics column of the throughput normalised ``per`` kW / accelerator / dollar."""
    if per not in PER_CHOICES:
        raise UserError(f"--per {per!r}: use one of {', '.join(PER_CHOICES)}")
    if metric not in METRIC_CHOICES:
        raise UserError(f"--metric {metric!r}: use total (input+output, InferenceX's convention) or output")
    return {"kW": f"{metric}_throughput_per_kw", "accelerator": f"{metric}_throughput_per_accelerator",
            "dollar": f"tokens_per_usd_{metric}"}[per]


YARDSTICKS = ("peak", "highest_interactivity", "lowest_ttft_s", "lowest_e2e_s", "lowest_usd_per_mtok")
AUTO_RULES = {"auto": "the baseline's highest", "common": "the highest all reach"}


def parse_interactivities(text: str) -> list[float | str]:
    """``"100,169"``, ``"auto"``, ``"common"`` or a mix such as ``"common,100"``."""
    out: list[float | str] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        if part.lower() in AUTO_RULES:
            out.append(part.lower())
            continue
        try:
            value = float(part)
        except ValueError:
            raise UserError(f"--at-interactivity: {part!r} is not a number of tok/s/user, 'common' or 'auto'") from None
        if not math.isfinite(value) or value <= 0:
            raise UserError(f"--at-interactivity: {part!r} must be a positive tok/s/user")
        out.append(value)
    if not out:
        raise UserError("--at-interactivity: give numbers like 100,169, 'common' or 'auto'")
    return out


def ratio(value: float | None, base: float | None) -> float | None:
    if value is None or base is None or base == 0:
        return None
    return value / base


@dataclass
class AtInteractivity:
    """Throughput of one system at one interactivity, and its ratio to the baseline's.

    ``bound`` is None for a value on the frontier (interpolated), "at least"
    where the interactivity lies below everything the sweep measured (the
    highest-throughput point already serves users faster, so its throughput is a
    lower bound); ``ratio_bound`` is then "at least" or "at most" accordingly.
    """

    interactivity: float
    value: float | None
    why_undefined: str | None
    ratio: float | None
    ratio_why_undefined: str | None
    bound: str | None = None
    ratio_bound: str | None = None
    rule: str | None = None          # AUTO_RULES key when the interactivity was chosen by a rule, not given
    interval: Interval | None = None         # 95% bootstrap interval of value (on the frontier only)
    ratio_interval: Interval | None = None   # of ratio, from the two values' intervals

    @property
    def auto(self) -> bool:
        return self.rule is not None


@dataclass
class SystemResult:
    """One system's yardsticks and their ratios to the baseline."""

    system: System
    frontier: Frontier
    peak: float | None
    highest_interactivity: float | None
    lowest_ttft_s: float | None
    lowest_e2e_s: float | None
    lowest_usd_per_mtok: float | None = None
    at: list[AtInteractivity] = field(default_factory=list)
    ratios: dict[str, float | None] = field(default_factory=dict)
    intervals: dict[str, Interval | None] = field(default_factory=dict)        # of each yardstick (YARDSTICKS)
    ratio_intervals: dict[str, Interval | None] = field(default_factory=dict)  # of each ratio to the baseline

    def source_rows(self) -> list[dict[str, Any]]:
        """The load points a compared value comes from: the frontier (peak, iso-interactivity reads) and the
        points holding the highest interactivity and the lowest latencies and price."""
        rows = [p.row for p in self.frontier.points]
        for key, value in (("interactivity", self.highest_interactivity), ("ttft_s_median", self.lowest_ttft_s),
                           ("e2e_s_median", self.lowest_e2e_s)):
            rows += [r for r in self.system.rows if value is not None and r.get(key) == value]
        if self.lowest_usd_per_mtok is not None:
            rows += [r for r in self.system.rows if self.lowest_usd_per_mtok in
                     (r.get("usd_per_mtok_total"), r.get("usd_per_mtok_output"))]
        return rows

    def invalid_sources(self) -> str | None:
        """A warning naming the invalid points (``scoville.validity``) a compared value of this system comes from."""
        seen: dict[tuple[Any, Any], str] = {}
        for r in self.source_rows():
            if r.get("valid") is False:
                codes = ", ".join(dict.fromkeys(str(x.get("code")) for x in r.get("invalid_reasons") or []))
                seen[(r.get("run_id"), r.get("point"))] = f"{r.get('label') or r.get('point')} ({codes})"
        if not seen:
            return None
        return (f"{self.system.label}: compared values come from invalid points " + ", ".join(seen.values())
                + " (`scoville show` lists the reasons)")

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.system.describe(),
            "power_basis": self.system.power_basis,
            "peak": self.peak,
            "highest_interactivity": self.highest_interactivity,
            "lowest_ttft_s": self.lowest_ttft_s,
            "lowest_e2e_s": self.lowest_e2e_s,
            "lowest_usd_per_mtok": self.lowest_usd_per_mtok,
            "frontier": [{"interactivity": p.x, "value": p.y, "run_id": p.row.get("run_id"),
                          "point": p.row.get("point"), "concurrency": p.row.get("concurrency")}
                         for p in self.frontier.points],
            "at_interactivity": [{"interactivity": a.interactivity, "auto": a.auto, "rule": a.rule, "value": a.value,
                                  "bound": a.bound, "why_undefined": a.why_undefined, "ratio": a.ratio,
                                  "ratio_bound": a.ratio_bound, "ratio_why_undefined": a.ratio_why_undefined,
                                  "interval": json_interval(a.interval),
                                  "ratio_interval": json_interval(a.ratio_interval),
                                  "distinguishable": distinguishable(a.ratio_interval)}
                                 for a in self.at],
            "ratios": dict(self.ratios),
            "intervals": {k: json_interval(v) for k, v in self.intervals.items()},
            "ratio_intervals": {k: json_interval(v) for k, v in self.ratio_intervals.items()},
            "distinguishable": {k: distinguishable(v) for k, v in self.ratio_intervals.items()},
        }


@dataclass
class Comparison:
    """Every system's yardsticks; ``systems[0]`` is the baseline every ratio is taken to."""

    per: str
    metric: str
    y_metric: str
    unit: str
    requested: list[float | str]
    systems: list[SystemResult]

    @property
    def baseline(self) -> SystemResult:
        return self.systems[0]

    def to_dict(self) -> dict[str, Any]:
        return {
            "per": self.per,
            "metric": self.metric,
            "y_metric": self.y_metric,
            "unit": self.unit,
            "x_metric": X_METRIC,
            "interactivity_estimator": "1/median(TPOT)",
            "latency_estimator": LATENCY_ESTIMATOR,
            "interval_method": INTERVAL_METHOD,
            "interpolation": self.baseline.frontier.method,
            "extrapolation": "never (undefined outside a frontier's range)",
            "requested_interactivity": self.requested,
            "baseline": self.baseline.system.label,
            "warnings": self.warnings(),
            "systems": [s.to_dict() for s in self.systems],
        }

    def warnings(self) -> list[str]:
        """Differences between the systems that a reader must weigh before trusting a ratio."""
        out = []
        checks = (("model", "models"), ("precision", "precisions"), ("workload", "workloads"),
                  ("compat", "metric modes (compat)"))
        described = [s.system.describe() for s in self.systems]
        unrecorded = {"precision": "checkpoint precision"}
        for key, what in checks:
            values = list(dict.fromkeys(str(d[key]) if d.get(key) is not None else unrecorded.get(key, "not recorded")
                                        for d in described))
            if len(values) > 1:
                out.append(f"different {what}: " + " vs ".join(values))
        if self.per == "kW":
            bases = list(dict.fromkeys(s.system.power_basis for s in self.systems))
            if len(bases) > 1:
                out.append("per-kW figures use different power bases: " + " vs ".join(bases))
        out += [w for s in self.systems if (w := s.invalid_sources()) is not None]
        return out

    def table(self) -> tuple[list[str], list[list[str]]]:
        """Header and rows (metrics down, systems across, then one ratio column per contender)."""
        base = self.baseline
        contenders = self.systems[1:]
        header = ["", *[s.system.label for s in self.systems],
                  *[f"{s.system.label} / {base.system.label}" for s in contenders]]
        tput = f"{'total' if self.metric == 'total' else 'output'} {self.unit}"

        # A per-kW figure always carries its power basis: in the row label when every
        # system shares it, else in each cell.
        bases = {s.system.power_basis for s in self.systems}
        shared = self.per == "kW" and len(bases) == 1
        if shared:
            tput += f" [{base.system.power_basis}]"

        def with_basis(s: SystemResult, v: float | None, interval: Interval | None = None) -> str:
            text = fmt_value(v) + fmt_interval(interval, fmt_value)
            return f"{text} [{s.system.power_basis}]" if self.per == "kW" and not shared and v is not None else text

        def ratio_cells(key: str) -> list[str]:
            return [fmt_ratio(s.ratios.get(key)) + fmt_ratio_interval(s.ratio_intervals.get(key)) for s in contenders]

        rows: list[list[str]] = [["source", *[s.system.source for s in self.systems], *["" for _ in contenders]]]
        if self.per == "kW":
            rows.append(["power source, boundary", *[f"{s.system.power_source}, {s.system.power_boundary}"
                                                     for s in self.systems], *["" for _ in contenders]])
        rows.append([f"peak {tput}", *[with_basis(s, s.peak, s.intervals.get("peak")) for s in self.systems],
                     *ratio_cells("peak")])
        extremes: list[tuple[str, str, Callable[[float | None], str]]] = [
            ("highest_interactivity", "highest tok/s/user", fmt_value),
            ("lowest_ttft_s", "lowest TTFT p50 (ms)", fmt_ms), ("lowest_e2e_s", "lowest E2E p50 (s)", fmt_seconds)]
        if self.per == "dollar":
            extremes.append(("lowest_usd_per_mtok", f"lowest $ per million {self.metric} tokens", fmt_usd))
        for key, label, fmt in extremes:
            rows.append([label, *[fmt(getattr(s, key)) + fmt_interval(s.intervals.get(key), fmt)
                                  for s in self.systems], *ratio_cells(key)])
        for i, a in enumerate(base.at):
            label = (f"{tput} at {fmt_value(a.interactivity)} tok/s/user"
                     + (f" ({AUTO_RULES[a.rule]})" if a.rule else ""))
            cells = [_bounded(s.at[i].bound, with_basis(s, s.at[i].value, s.at[i].interval))
                     if s.at[i].value is not None else (s.at[i].why_undefined or "—") for s in self.systems]
            ratios = [_bounded(s.at[i].ratio_bound, fmt_ratio(s.at[i].ratio)
                               + fmt_ratio_interval(s.at[i].ratio_interval))
                      if s.at[i].ratio is not None else (s.at[i].ratio_why_undefined or "—") for s in contenders]
            rows.append([label, *cells, *ratios])
        return header, rows

    def to_markdown(self) -> str:
        header, rows = self.table()
        lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
        lines.append("")
        lines += [f"**Note:** {w}." for w in self.warnings()]
        lines.append(f"Interactivity = 1/median(TPOT); latencies: {LATENCY_ESTIMATOR}; throughput at an "
                     f"interactivity by {self.baseline.frontier.method} interpolation along each frontier, "
                     "never extrapolated; ≥ marks a lower bound where every measured point was already faster. "
                     "Ratios are each system over the first. [lo–hi]: 95% bootstrap interval (over requests, "
                     "or over repeats); a ratio's from the two intervals; \"not distinguishable\": it holds 1.")
        return "\n".join(lines) + "\n"


def _bounded(bound: str | None, text: str) -> str:
    return {"at least": f"≥ {text}", "at most": f"≤ {text}"}.get(bound or "", text)


def fmt_value(v: float | None) -> str:
    """Readable throughput-like numbers: 12,258 · 169 · 45.2 · 0.123 (``numbers.significant``)."""
    return MISSING if v is None else significant(v)


def fmt_seconds(v: float | None) -> str:
    return MISSING if v is None else significant(v)


def fmt_ms(seconds: float | None) -> str:
    """A token latency (TTFT, TPOT, ITL) in milliseconds, as every table prints it; E2E stays in seconds."""
    return MISSING if seconds is None else significant(seconds * 1e3)


def fmt_usd(v: float | None) -> str:
    return MISSING if v is None else "$" + significant(v)


def fmt_interval(interval: Interval | None, fmt: Callable[[float | None], str]) -> str:
    """" [lo–hi]" after a figure with a bootstrap interval ("∞" for an open high end); nothing without one."""
    if interval is None:
        return ""
    return f" [{fmt(interval[0])}–{'∞' if math.isinf(interval[1]) else fmt(interval[1])}]"


def fmt_ratio_interval(interval: Interval | None) -> str:
    """" [lo–hi×]" after a ratio, and ", not distinguishable" when the interval holds 1."""
    if interval is None:
        return ""
    same = "" if distinguishable(interval) else ", not distinguishable"
    hi = "∞" if math.isinf(interval[1]) else fmt_ratio(interval[1])
    return f" [{fmt_ratio(interval[0]).rstrip('×')}–{hi}]{same}"


def json_interval(interval: Interval | None) -> list[float | None] | None:
    """An interval for JSON: an open (infinite) end as null."""
    return None if interval is None else [v if math.isfinite(v) else None for v in interval]


def fmt_ratio(v: float | None) -> str:
    """1.90× below ten, 103.9× above: the precision the seed publication quotes."""
    if v is None:
        return "—"
    return f"{v:.1f}×" if abs(v) >= 10 else f"{v:.2f}×"


def _extreme(rows: Sequence[dict[str, Any]], key: str, best: Any) -> tuple[float | None, Interval | None]:
    """The best value of ``key`` over the rows, and its interval: the best of the rows' low ends to the best of
    their high ends (so two points tied within their intervals both count); None unless every row has one."""
    found = [r for r in rows if isinstance(r.get(key), (int, float)) and math.isfinite(r[key])]
    if not found:
        return None, None
    value = best(float(r[key]) for r in found)
    bands = [row_interval(r, key) for r in found]
    if any(b is None for b in bands):
        return value, None
    return value, (best(b[0] for b in bands), best(b[1] for b in bands))  # type: ignore[index]


def _envelope(f: Frontier) -> tuple[Frontier, Frontier] | None:
    """The frontiers of every point moved to the low, and to the high, end of its intervals on both axes;
    None unless every point has both intervals."""
    bands = [(row_interval(p.row, f.x_metric), row_interval(p.row, f.y_metric)) for p in f.points + f.dominated]
    if not bands or any(bx is None or by is None for bx, by in bands):
        return None
    return tuple(frontier([{f.x_metric: bx[end], f.y_metric: by[end]} for bx, by in bands],  # type: ignore
                          f.x_metric, f.y_metric) for end in (0, 1))


def _band_at(f: Frontier, x: float, value: float) -> Interval | None:
    """The frontier's interval at x: the low envelope's value to the high envelope's (``_envelope``).

    Both axes' intervals count: on a steep frontier a small doubt about interactivity is a large one about
    throughput. Where the low envelope does not reach x nothing but 0 bounds the value from below; where
    the high envelope starts past x nothing bounds it from above (``inf``).
    """
    envelope = _envelope(f)
    if envelope is None:
        return None
    low, high = envelope
    lo = low.at(x)
    if lo is None:
        lo = low.at_least(x) or 0.0
    hi = high.at(x)
    return min(lo, value), max(math.inf if hi is None else hi, value)


def _check_normalisation(systems: Sequence[System], per: str, y: str) -> None:
    for s in systems:
        if any(isinstance(r.get(y), (int, float)) for r in s.rows):
            continue
        runs = ", ".join(d.name for d in s.run_dirs)
        if not any(r.get("num_ok") for r in s.rows):
            raise UserError(f"{s.label} ({runs}) has no load point with a successful request yet; nothing to "
                            "compare (`scoville show` lists its points)")
        if per == "kW":
            raise UserError(f"{s.label} ({runs}) has no power figure (power source {s.power_source!r}); "
                            "record power (--power rated|all-in|nvml|csv) or compare --per accelerator")
        if per == "dollar":
            raise UserError(f"{s.label} ({runs}) has no cost_per_accelerator_hour in its manifest; "
                            "compare --per kW or --per accelerator")
        raise UserError(f"{s.label} ({runs}) has no {y} in any load point; nothing to compare")


def compare(systems: Sequence[System], at: Sequence[float | str] = ("common",), *, per: str = "kW",
            metric: str = "total") -> Comparison:
    """Compare systems (the first is the baseline) on peaks and at the requested interactivities."""
    if not systems:
        raise UserError("compare needs at least one run")
    per = normalise_per(per)
    y = y_metric(per, metric)
    _check_normalisation(systems, per, y)
    results = []
    for s in systems:
        f = frontier(s.rows, X_METRIC, y)
        extremes = {"peak": _extreme([p.row for p in f.points + f.dominated], y, max),
                    "highest_interactivity": _extreme(s.rows, X_METRIC, max),
                    "lowest_ttft_s": _extreme(s.rows, "ttft_s_median", min),
                    "lowest_e2e_s": _extreme(s.rows, "e2e_s_median", min),
                    "lowest_usd_per_mtok": _extreme(s.rows, f"usd_per_mtok_{metric}", min)}
        values = {k: v for k, (v, _) in extremes.items()}
        results.append(SystemResult(system=s, frontier=f, peak=values["peak"],
                                    highest_interactivity=values["highest_interactivity"],
                                    lowest_ttft_s=values["lowest_ttft_s"], lowest_e2e_s=values["lowest_e2e_s"],
                                    lowest_usd_per_mtok=values["lowest_usd_per_mtok"],
                                    intervals={k: ci for k, (_, ci) in extremes.items()}))
    base = results[0]
    targets: list[tuple[float, str | None]] = []
    reaches = [r.frontier.reach for r in results if r.frontier.reach is not None]
    for a in at:
        if a == "auto":
            if base.frontier.reach is not None:
                targets.append((base.frontier.reach, "auto"))
        elif a == "common":
            if len(reaches) == len(results):           # every system has a frontier to read
                targets.append((min(reaches), "common"))
        else:
            targets.append((float(a), None))
    for r in results:
        for x, rule in targets:
            r.at.append(_at(r.frontier, base.frontier, x, rule))
        for key in YARDSTICKS:
            r.ratios[key] = ratio(getattr(r, key), getattr(base, key))
            r.ratio_intervals[key] = ratio_interval(r.intervals.get(key), base.intervals.get(key))
    return Comparison(per, metric, y, UNITS[per], list(at), results)


def _read(f: Frontier, x: float) -> tuple[float | None, str | None, str | None]:
    """(value, bound, why undefined) of a frontier at x."""
    value, bound = f.read(x)
    return value, bound, None if value is not None else f.why_undefined(x)


def _at(f: Frontier, base: Frontier, x: float, rule: str | None) -> AtInteractivity:
    value, bound, why = _read(f, x)
    base_value, base_bound, base_why = _read(base, x)
    r, r_bound, r_why = ratio(value, base_value), None, None
    if value is None:
        r_why = why
    elif base_value is None:
        r_why = f"baseline {base_why}"
    elif bound and base_bound:
        r, r_why = None, "both below the measured range"  # two lower bounds bound no ratio
    elif bound:
        r_bound = "at least"
    elif base_bound:
        r_bound = "at most"
    interval = _band_at(f, x, value) if value is not None and bound is None else None
    base_interval = _band_at(base, x, base_value) if base_value is not None and base_bound is None else None
    r_interval = ratio_interval(interval, base_interval) if r is not None and r_bound is None else None
    return AtInteractivity(x, value, why, r, r_why, bound, r_bound, rule, interval, r_interval)
