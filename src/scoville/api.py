"""scoville's Python API: what the CLI does, as calls a notebook, a CI job or a service makes.

    import scoville
    run = scoville.simulate("gb300", "deepseek-r1", scenario="8k1k")
    run.frontier()                       # throughput per accelerator against interactivity (per="kW" too)
    with scoville.serve("h200", "llama-3.1-8b") as url: ...      # the emulator, on a free loopback port
    measured = scoville.sweep(url=url, isl=1024, osl=128, concurrency="1,4")
    table = scoville.compare(measured, run, per="kW")
    scoville.report(measured, run, out="report.html")
    scoville.runs("runs").df()                                  # the catalog as a DuckDB relation

Every function takes the options its command takes, by the same names (``scoville simulate --help``), and
returns typed objects. docs/python-api.md shows each of them, and tests/test_api_docs.py runs that page.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the imports below load their stacks only when a function runs
    import duckdb
    import pyarrow as pa

    from scoville.analysis.compare import Comparison
    from scoville.analysis.frontier import Frontier
    from scoville.results.manifest import Manifest
    from scoville.results.points import PointMetrics


@dataclass(frozen=True)
class Run:
    """One run directory: measured, emulated or simulated, read through the same code as ``scoville show``."""

    path: Path

    @cached_property
    def manifest(self) -> Manifest:
        """Provenance: system, model, workload, load plan, power basis, versions (docs/architecture.md, 4), typed
        (``scoville.results.manifest.Manifest``: ``run.manifest.system.hardware``, ``run.manifest.load_plan``)."""
        from scoville.results.catalog import load_manifest

        return load_manifest(self.path)

    @property
    def id(self) -> str:
        return self.manifest.run_id or self.path.name

    @property
    def source(self) -> str:
        """measured, emulated or simulated."""
        from scoville.results.manifest import source_label

        return source_label(self.manifest)

    @cached_property
    def points(self) -> list[PointMetrics]:
        """The metrics of each load point (points.parquet; recomputed in memory when missing), typed
        (``scoville.results.points.PointMetrics``: ``p.interactivity``, ``p.total_throughput_per_kw``; None where
        a point has no such figure)."""
        from scoville.analysis.runs import run_points

        return run_points(self.path)

    def frontier(self, per: str = "accelerator", metric: str = "total") -> Frontier:
        """The run's latency-throughput frontier: throughput ``per`` accelerator / kW / dollar (``metric``: total
        = input+output, InferenceX's convention, or output) against interactivity (tok/s/user), as ``compare``
        and the report read it. ``frontier.points`` are the kept points (each with its metrics ``row``),
        ``frontier.at(x)`` the throughput at an interactivity."""
        from scoville.analysis.compare import normalise_per, y_metric
        from scoville.analysis.frontier import frontier
        from scoville.analysis.runs import point_rows

        return frontier(point_rows(self.path, self.manifest), "interactivity", y_metric(normalise_per(per), metric))

    def requests(self) -> pa.Table:
        """Every request record (Arrow, ``results.schema.RECORD_SCHEMA``); empty for an analytic prediction."""
        from scoville.results.catalog import read_records

        return read_records(self.path)

    def report(self, out: str | Path | None = None) -> Path:
        """This run's HTML report (default: ``report.html`` in the run's folder, where ``sweep`` writes it)."""
        return report(self, out=out if out is not None else self.path / "report.html")


def open_run(path: str | Path) -> Run:
    """A run directory as a ``Run``; a missing or damaged manifest is a one-line ``UserError``."""
    run = Run(Path(path))
    _ = run.manifest  # read now, so a bad path fails here and not on first use
    return run


def runs(root: str | Path = "runs", table: str = "runs") -> duckdb.DuckDBPyRelation:
    """The catalog of every run under ``root`` (``runs``, ``points``, ``requests`` or ``power``) as a DuckDB
    relation: ``.df()`` for pandas, ``.arrow()`` for Arrow, ``.pl()`` for polars, ``.filter(...)`` in SQL."""
    from scoville.errors import UserError
    from scoville.results.catalog import connect

    if table not in ("runs", "points", "requests", "power"):
        raise UserError(f"unknown catalog table {table!r}; use runs, points, requests or power")
    con = connect(Path(root))
    views = {name for (name,) in con.execute("SELECT view_name FROM duckdb_views()").fetchall()}
    if table != "runs" and table not in views:
        raise UserError(f"no run under {root} has {table} yet")
    return con.table(table)


def _dirs(ref: Run | str | Path | Sequence[Run | str | Path]) -> list[Path]:
    """The run directories of one system: a run, a path, or a list of them pooled into one system."""
    if isinstance(ref, (Run, str, Path)):
        ref = [ref]
    return [r.path if isinstance(r, Run) else Path(r) for r in ref]


def compare(*systems: Run | str | Path | Sequence[Run | str | Path], per: str = "kW", metric: str = "total",
            at: Sequence[float | str] = ("common",)) -> Comparison:
    """The seeds' two yardsticks (peaks, and throughput at equal interactivity) of each system against the first.

    A system is a run, a path, or a list of runs pooled into one (the CLI's ``A+B``); ``result.table()`` is the
    header and rows ``scoville compare`` prints, ``result.to_dict()`` its ``--json``.
    """
    from scoville.analysis.compare import compare as compare_systems
    from scoville.analysis.runs import load_systems

    return compare_systems(load_systems([_dirs(s) for s in systems]), at, per=per, metric=metric)


def report(*systems: Run | str | Path | Sequence[Run | str | Path], out: str | Path = "report.html",
           title: str | None = None) -> Path:
    """One self-contained HTML report of the systems (the first is the baseline); returns its path."""
    from scoville.reporting.html import write_report_groups

    return write_report_groups([_dirs(s) for s in systems], Path(out), title=title)


def simulate(hardware: str | None = None, model: str | None = None, **options: Any) -> Run:
    """Predict a frontier, as ``scoville simulate``: ``options`` are its options by name (``scenario``, ``isl``,
    ``concurrency``, ``precision``, ``fidelity``, ``runs`` ...); workload and load options may be given flat."""
    from scoville.simulation import SimulateSpec
    from scoville.simulation import simulate as run_simulation

    spec = SimulateSpec.of_flat(hardware=hardware, model=model, **options)
    return Run(run_simulation(spec).run_dir)


def sweep(url: str | None = None, **options: Any) -> Run:
    """Measure a server (``url``; None: the built-in emulator), as ``scoville sweep``: ``options`` are its options
    by name (``isl``, ``osl``, ``concurrency``, ``hardware``, ``slo``, ``search``, ``repeats``, ``runs`` ...)."""
    from scoville.measurement import SweepSpec
    from scoville.measurement import sweep as measure

    return Run(measure(SweepSpec.of_flat(url=url, **options)).run_dir)


@contextmanager
def serve(hardware: str = "h200", model: str = "llama-3.1-8b", *, config: dict[str, Any] | None = None,
          framework: str | None = None, profile: str | Path | None = None, **options: Any) -> Iterator[str]:
    """The emulator (a simulated ``hardware`` serving ``model``) behind a real OpenAI API on a free loopback port,
    for the ``with`` block; yields its base URL. ``config`` pins a SimConfig (a mapping), ``framework`` whose
    kernels and host costs to use, ``profile`` a calibration profile, as ``scoville serve`` takes them; other
    ``options``: ``api_key``, ``max_queue``, ``served_model_name``, ``reasoning_tokens``."""
    from scoville.emulator.launch import spawn_emulator

    pinned = dict(config or {})
    if framework is not None:
        pinned["framework"] = framework
    if profile is not None:
        pinned["profile"] = str(Path(profile).resolve())
    with spawn_emulator(hardware, model, pinned or None, **options) as handle:
        yield handle.base_url
