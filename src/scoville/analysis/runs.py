"""Runs as the analysis sees them: systems made of one or more run directories.

Everything here reads only the run schema (manifest + point metrics), so a
measured and a simulated run are handled identically. A "system" is what one
colour on a chart and one column of a comparison stand for; several runs
(e.g. different parallelism configurations of the same hardware) can be
pooled into one system so its frontier spans all of them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scoville.analysis.cost import add_cost_columns
from scoville.analysis.repeats import aggregate_repeats
from scoville.metrics import run_metrics
from scoville.power.sources import power_basis_text
from scoville.results.catalog import (
    READ_ERRORS,
    describe_error,
    load_manifest,
    read_point_rows,
    read_stored_points,
    skip,
)
from scoville.results.manifest import Manifest, source_label
from scoville.results.points import PointMetrics


@dataclass
class System:
    """One compared system: its runs, their manifests, and every load point's metrics row.

    ``rows`` has one row per load (the ``--repeats`` of a load folded into one, with intervals across them:
    ``analysis.repeats``); ``repeat_rows`` has every stored row, one per measured point.
    """

    label: str
    run_dirs: list[Path]
    manifests: list[Manifest]
    rows: list[dict[str, Any]] = field(default_factory=list)
    repeat_rows: list[dict[str, Any]] = field(default_factory=list)

    @property
    def manifest(self) -> Manifest:
        """The first run's manifest (hardware, model, power basis are the system's)."""
        return self.manifests[0]

    def _joined(self, read: Callable[[Manifest], object]) -> str | None:
        """One field of every run's manifest, each value once ("h200 / b200"); None when no run records it."""
        values = list(dict.fromkeys(v for m in self.manifests if (v := read(m)) is not None))
        return " / ".join(str(v) for v in values) if values else None

    @property
    def source(self) -> str:
        return " + ".join(dict.fromkeys(source_label(m) for m in self.manifests))

    @property
    def hardware(self) -> str | None:
        return self._joined(lambda m: m.system.hardware)

    @property
    def power_source(self) -> str:
        return self._joined(lambda m: m.power.source) or "none"

    @property
    def power_boundary(self) -> str:
        return (self._joined(lambda m: m.power.boundary) or self._joined(lambda m: m.system.power_boundary)
                or "unknown")

    @property
    def power_basis(self) -> str:
        """What a per-kW figure of this system means, e.g. "rated, chip boundary"."""
        return power_basis_text(self.power_source, self.power_boundary)

    def describe(self) -> dict[str, Any]:
        """The variables a reader needs to judge a comparison, flat."""
        return {
            "label": self.label,
            "source": self.source,
            "hardware": self.hardware,
            "accelerators": self._joined(lambda m: m.system.accelerators),
            "model": self._joined(lambda m: m.model.name),
            "precision": self._joined(lambda m: m.model.precision),
            "framework": self._joined(lambda m: m.serving.framework),
            "power_source": self.power_source,
            "power_boundary": self.power_boundary,
            "cost_per_accelerator_hour": self._joined(lambda m: m.system.cost_per_accelerator_hour),
            "workload": self.manifest.workload_name,
            "compat": self._joined(lambda m: m.compat),
            "runs": [d.name for d in self.run_dirs],
        }


def _recomputed(run_dir: Path) -> list[dict[str, Any]]:
    """Metrics rebuilt from the raw records; none, with a warning naming the run, when they cannot be read."""
    try:
        return run_metrics(run_dir)
    except READ_ERRORS as e:
        skip(run_dir, f"no stored metrics, and its records cannot be read to recompute them ({describe_error(e)})")
        return []


def run_points(run_dir: Path) -> list[PointMetrics]:
    """The metrics of each point of a run, typed: the stored points.parquet, else recomputed from raw records."""
    return read_stored_points(run_dir) or [PointMetrics.of(r) for r in _recomputed(run_dir)]


def point_rows(run_dir: Path, manifest: Manifest | None = None) -> list[dict[str, Any]]:
    """Metrics rows of a run by column name, as the analysis reads them: the stored points.parquet (its columns,
    ``store.read_point_metrics``), else recomputed from raw records; with the run id and the price per token.

    Rows, not ``PointMetrics``: frontiers and comparisons pick their metrics by name at run time
    (``frontier(rows, x, y)``), and the analysis adds columns of its own (``run_id``, ``system``,
    ``tokens_per_usd_*``, what ``aggregate_repeats`` folds), which the stored record does not have."""
    manifest = manifest or load_manifest(run_dir)
    rows = read_point_rows(run_dir) or _recomputed(run_dir)
    cost = manifest.system.cost_per_accelerator_hour
    out = []
    for r in rows:
        r = dict(r)
        r["run_id"] = manifest.run_id or run_dir.name
        r.update(add_cost_columns(r, cost))
        out.append(r)
    return out


def _base_label(manifests: list[Manifest], run_dirs: list[Path]) -> str:
    system = manifests[0].system
    name = system.hardware or run_dirs[0].name
    n = system.accelerators
    named = n and re.search(rf"(?<!\d){n}(?!\d)", str(name))  # "GB300 NVL72" already says 72
    label = f"{name} ×{n}" if n and n > 1 and not named else str(name)
    origins = {source_label(x) for x in manifests}
    if "simulated" in origins:
        label += " (sim)"
    elif "emulated" in origins:
        label += " (emulated)"
    return label


def load_system(run_dirs: list[Path], label: str | None = None) -> System:
    """Pool one or more run directories into one system."""
    manifests = [load_manifest(d) for d in run_dirs]
    rows: list[dict[str, Any]] = []
    for d, m in zip(run_dirs, manifests, strict=True):
        rows.extend(point_rows(d, m))
    sys_ = System(label or _base_label(manifests, run_dirs), list(run_dirs), manifests, aggregate_repeats(rows),
                  rows)
    for r in sys_.rows + sys_.repeat_rows:
        r["system"] = sys_.label
    return sys_


def load_systems(groups: list[list[Path]]) -> list[System]:
    """Systems for each group of runs, with labels made unique (precision, then run id, disambiguate)."""
    systems = [load_system(g) for g in groups]
    seen: dict[str, int] = {}
    for s in systems:
        seen[s.label] = seen.get(s.label, 0) + 1
    for s in systems:
        if seen[s.label] > 1:
            precision = s.describe()["precision"]
            s.label = f"{s.label} {precision} · {s.run_dirs[0].name[-6:]}" if precision else \
                f"{s.label} · {s.run_dirs[0].name[-6:]}"
            for r in s.rows + s.repeat_rows:
                r["system"] = s.label
    return systems
