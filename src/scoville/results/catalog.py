"""The run catalog: DuckDB views over every run directory's Parquet and manifests.

Nothing is copied into a database file: each query opens an in-memory DuckDB
whose views (``runs``, ``points``, ``requests``, ``power``) read the run
directories directly, so the catalog can never be stale.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import duckdb

from scoville.errors import UserError
from scoville.results.store import MANIFEST, POINT_METRICS, POINTS_DIR, POWER, RunError, read_manifest


# The run directory's name is the run id; every Parquet file sits at most one folder below it.
_RUN_ID_RE = "([^/]+)/(?:points[.]parquet|power[.]parquet|requests/point-[0-9]+[.]parquet)$"


def run_dirs(runs_root: Path) -> list[Path]:
    if not runs_root.exists():
        return []
    return sorted(p for p in runs_root.iterdir() if (p / MANIFEST).exists())


def resolve_run(runs_root: Path, ref: str) -> Path:
    """A run by path, full id, or unique id prefix/suffix (``latest`` = newest)."""
    path = Path(ref)
    if (path / MANIFEST).exists():
        return path
    dirs = run_dirs(runs_root)
    if ref == "latest" and dirs:
        return dirs[-1]
    matches = [d for d in dirs if d.name == ref] or [d for d in dirs if d.name.startswith(ref) or d.name.endswith(ref)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise UserError(f"no run {ref!r} under {runs_root}/; `scoville ls` lists the runs")
    raise UserError(f"{ref!r} matches {len(matches)} runs; give more of the run id")


def manifest_row(run_dir: Path) -> dict[str, Any]:
    m = read_manifest(run_dir)
    system, model = m.get("system", {}), m.get("model", {})
    return {
        "run_id": m.get("run_id", run_dir.name),
        "created_at": m.get("created_at"),
        "source": m.get("source"),
        "status": m.get("status"),
        "hardware": system.get("hardware"),
        "accelerators": system.get("accelerators"),
        "model": model.get("name"),
        "precision": model.get("precision"),
        "workload": (m.get("workload") or {}).get("name"),
        "power_source": (m.get("power") or {}).get("source"),
        "points": len((m.get("load_plan") or {}).get("points", [])),
        "path": str(run_dir),
        "manifest": json.dumps(m),
    }


def connect(runs_root: Path) -> duckdb.DuckDBPyConnection:
    """In-memory DuckDB with views over all runs under ``runs_root``."""
    con = duckdb.connect(":memory:")
    rows, dirs = [], []
    for d in run_dirs(runs_root):
        try:
            rows.append(manifest_row(d))
        except RunError as e:  # one corrupt run must not hide all the others
            warnings.warn(f"skipping {e}", stacklevel=2)
            continue
        dirs.append(d)
    cols = ["run_id", "created_at", "source", "status", "hardware", "accelerators", "model", "precision",
            "workload", "power_source", "points", "path", "manifest"]
    con.execute("CREATE TABLE runs (" + ", ".join(
        f"{c} {'INTEGER' if c in ('accelerators', 'points') else 'VARCHAR'}" for c in cols) + ")")
    if rows:
        con.executemany(f"INSERT INTO runs VALUES ({', '.join('?' * len(cols))})", [[r[c] for c in cols] for r in rows])

    def view(name: str, files: list[str]) -> None:
        if files:
            listing = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
            con.execute(
                f"CREATE VIEW {name} AS SELECT regexp_extract(filename, '{_RUN_ID_RE}', 1) AS run_id, * "
                f"FROM read_parquet([{listing}], filename=true, union_by_name=true)"
            )

    view("points", [str(d / POINT_METRICS) for d in dirs if (d / POINT_METRICS).exists()])
    view("requests", [str(f) for d in dirs for f in sorted((d / POINTS_DIR).glob("point-*.parquet"))])
    view("power", [str(d / POWER) for d in dirs if (d / POWER).exists()])
    return con


def query(runs_root: Path, sql: str) -> tuple[list[str], list[tuple]]:
    """Columns and rows of ``sql`` over the catalog; any DuckDB error is a one-line UserError.

    Errors can surface while rows are fetched (a failed cast, ``error()``), not
    only while the statement is parsed, so the fetch is guarded too.
    """
    con = connect(runs_root)
    try:
        rel = con.sql(sql)
        return ([], []) if rel is None else (rel.columns, rel.fetchall())
    except duckdb.Error as e:
        raise UserError(f"SQL error: {str(e).splitlines()[0]} (tables: runs, points, requests, power)") from e
    finally:
        con.close()
