"""The run catalog: DuckDB views over every run directory's Parquet and manifests.

Nothing is copied into a database file: each query opens an in-memory DuckDB
whose views (``runs``, ``points``, ``requests``, ``power``) read the run
directories directly, so the catalog can never be stale.

Damaged runs. A run folder can hold anything a crash, a full disk or another
tool left there: a truncated Parquet file, one with a foreign schema or no
columns at all, a manifest that is not UTF-8, not an object, or has a string
where an object belongs. Every run, and every file inside one, is therefore
read behind its own guard: what cannot be read is left out with a
``DamagedRunWarning`` naming the file and why, and the other runs stay
visible to ``ls``, ``sql``, ``show``, ``compare`` and ``report``.

Read-only. ``scoville sql`` runs the user's text, so the connection it runs on
can read the run files behind the views and nothing else: only SELECT-type
statements are accepted (COPY, ATTACH, EXPORT, SET, CREATE... are refused in
one line), and DuckDB's external access is switched off with the views' files
as the only allowed paths and the configuration locked, so no query can open
another file, write one, or undo those settings.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import duckdb
import msgspec
import pyarrow as pa
import pyarrow.parquet as pq

from scoville.errors import UserError
from scoville.results.manifest import Manifest, source_label
from scoville.results.points import PointMetrics
from scoville.results.schema import ARROW_SCHEMA, POWER_SCHEMA
from scoville.results.store import (
    JOURNAL,
    MANIFEST,
    POINT_METRICS,
    POINTS_DIR,
    POWER,
    MalformedManifest,
    RunError,
    finished_points,
    journal_records,
    read_manifest,
    read_point_metrics,
    read_points,
    read_power,
    read_requests,
    writer_alive,
)

# The run directory's name is the run id; every Parquet file sits at most one folder below it.
_RUN_ID_RE = "([^/]+)/(?:points[.]parquet|power[.]parquet|requests/point-[0-9]+[.]parquet)$"
_POINT_NAME = re.compile(r"point-[0-9]+[.]parquet")

T = TypeVar("T")

# What reading a damaged file raises: the store's one-line errors, and whatever the JSON, Arrow and
# Parquet readers raise on bytes that are not what they expect.
READ_ERRORS = (UserError, OSError, ValueError, TypeError, KeyError, pa.ArrowException, msgspec.MsgspecError)


class DamagedRunWarning(UserWarning):
    """A run, or one file of a run, could not be read and was left out; the message names it and why."""


class DamagedFile(RunError):
    """A run file that cannot be read as what its name says; the message names it and why."""

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"{path}: {why}")
        self.path, self.why = path, why


def skip(path: Path, why: str) -> None:
    """Warn that ``path`` is left out, in one line."""
    warnings.warn(f"skipping {path}: {why}", DamagedRunWarning, stacklevel=3)


def describe_error(e: BaseException) -> str:
    """The first line of an exception, with its type unless it is already a user-facing message."""
    text = (str(e).strip().splitlines() or [""])[0][:200]
    return text if isinstance(e, UserError) else f"{type(e).__name__}: {text}"


# ---- manifests ---------------------------------------------------------------------------------

def load_manifest(run_dir: Path) -> Manifest:
    """``run_dir``'s manifest; a missing, unreadable or malformed one is a ``DamagedFile`` naming it."""
    path = run_dir / MANIFEST
    try:
        return read_manifest(run_dir)
    except MalformedManifest as e:
        raise DamagedFile(path, e.why) from None
    except READ_ERRORS as e:
        why = str(e).removeprefix(f"{path}: ") if isinstance(e, RunError) else describe_error(e)
        raise DamagedFile(path, f"unreadable manifest ({why})") from None


# ---- run files ---------------------------------------------------------------------------------

def _integer(t: pa.DataType) -> bool:
    return pa.types.is_integer(t)


def _float(t: pa.DataType) -> bool:
    return pa.types.is_floating(t)


def _string(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


# The columns (and their kinds) without which a file is not what its name says. Columns beyond
# these may come and go between schema versions; DuckDB's union_by_name fills them in.
_POINTS_COLUMNS: dict[str, Callable[[pa.DataType], bool]] = {"point": _integer}
_REQUEST_COLUMNS: dict[str, Callable[[pa.DataType], bool]] = {
    "point": _integer, "request_id": _string, "t_sent": _float, "ok": pa.types.is_boolean}
_POWER_COLUMNS: dict[str, Callable[[pa.DataType], bool]] = {"t": _float, "device": _string, "watts": _float}


def parquet_problem(path: Path, columns: dict[str, Callable[[pa.DataType], bool]]) -> str | None:
    """Why ``path`` is not a readable Parquet file with ``columns``, or None when it is.

    Reads only the footer, so checking every file of a catalog stays cheap; a
    file damaged inside its pages passes and fails when read, in one line.
    """
    try:
        schema = pq.read_schema(path)
    except READ_ERRORS as e:
        return f"not a readable Parquet file ({describe_error(e)})"
    if not schema.names:
        return "a Parquet file with no columns"
    for name, kind in columns.items():
        if schema.get_field_index(name) < 0:
            return f"no column '{name}' (not a file scoville wrote, or from another tool)"
        if not kind(schema.field(name).type):
            return f"column '{name}' has type {schema.field(name).type}"
    return None


def _intact(path: Path, columns: dict[str, Callable[[pa.DataType], bool]]) -> bool:
    """Whether ``path`` can be used; a damaged one is warned about."""
    problem = parquet_problem(path, columns)
    if problem is not None:
        skip(path, problem)
    return problem is None


def _request_files(run_dir: Path) -> list[Path]:
    """The run's intact point files; other names in ``requests/`` (``point-abc.parquet``) are not points."""
    out = []
    for f in sorted((run_dir / POINTS_DIR).glob("point-*.parquet")):
        if not _POINT_NAME.fullmatch(f.name):
            skip(f, "not a point file name (point-NNNN.parquet)")
        elif _intact(f, _REQUEST_COLUMNS):
            out.append(f)
    return out


def _unfinished(run_dir: Path, m: Manifest) -> bool:
    """Whether some planned point of the run has no Parquet file yet (so its records live in the journal only);
    a finished run's journal is then never parsed, which keeps ``ls`` and ``sql`` fast on many runs."""
    planned = {p.index for p in m.load_plan.points}
    return (run_dir / JOURNAL).exists() and bool(planned - finished_points(run_dir))


def _journal_records(dirs: list[Path]) -> pa.Table | None:
    """Records of running or interrupted runs' points that are only in their journal, with ``run_id`` and
    ``filename`` as the Parquet rows carry them (so ``scoville sql`` sees what the metrics see)."""
    tables = []
    for d in dirs:
        try:
            t = journal_records(d)
        except READ_ERRORS as e:
            skip(d / JOURNAL, describe_error(e))
            continue
        if t.num_rows:
            n = t.num_rows
            tables.append(t.append_column("filename", pa.array([str(d / JOURNAL)] * n))
                           .add_column(0, "run_id", pa.array([d.name] * n)))
    return pa.concat_tables(tables) if tables else None


def _stored(run_dir: Path, read: Callable[[Path], list[T]]) -> list[T] | None:
    """``read(run_dir)`` of the stored metrics (points.parquet); None when there is none or it is damaged (warned)."""
    path = run_dir / POINT_METRICS
    if not path.exists() or not _intact(path, _POINTS_COLUMNS):
        return None
    try:
        return read(run_dir)
    except READ_ERRORS as e:
        skip(path, describe_error(e))
        return None


def read_point_rows(run_dir: Path) -> list[dict[str, Any]] | None:
    """The stored metrics rows by column name (``store.read_point_metrics``); None when there is none or it is
    damaged (warned)."""
    return _stored(run_dir, read_point_metrics)


def read_stored_points(run_dir: Path) -> list[PointMetrics] | None:
    """The stored metrics rows typed (``store.read_points``); None when there is none or it is damaged (warned)."""
    return _stored(run_dir, read_points)


def read_records(run_dir: Path) -> pa.Table:
    """Every request record of the run (the store's reader); an empty table, warned, when they cannot be read."""
    try:
        return read_requests(run_dir)
    except READ_ERRORS as e:
        skip(run_dir / POINTS_DIR, f"request records unreadable ({describe_error(e)})")
        return ARROW_SCHEMA.empty_table()


def read_power_samples(run_dir: Path) -> pa.Table:
    """The run's power samples; an empty table, warned, when power.parquet cannot be read."""
    try:
        return read_power(run_dir)
    except READ_ERRORS as e:
        skip(run_dir / POWER, describe_error(e))
        return POWER_SCHEMA.empty_table()


# ---- the catalog -------------------------------------------------------------------------------

def run_dirs(runs_root: Path) -> list[Path]:
    if not runs_root.is_dir():
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


_RUN_COLUMNS = {"run_id": "VARCHAR", "created_at": "VARCHAR", "source": "VARCHAR", "origin": "VARCHAR",
                "status": "VARCHAR", "hardware": "VARCHAR", "accelerators": "INTEGER", "system": "VARCHAR",
                "model": "VARCHAR", "precision": "VARCHAR", "workload": "VARCHAR", "power_source": "VARCHAR",
                "points": "INTEGER", "path": "VARCHAR", "manifest": "VARCHAR"}


def run_status(run_dir: Path, m: Manifest) -> str | None:
    """The manifest's status, except that a run still marked "running" whose writer holds no lock was left by
    a writer that died (kill -9, a crash): it will never finish by itself, and ``--resume`` picks it up."""
    status = m.status
    if status == "running" and not writer_alive(run_dir):
        return "stopped (writer gone)"
    return status


def accelerator_count(m: Manifest, dash: str = "-") -> str:
    """"8"; a searched simulated run, whose points each carry their own deployment, gives the points' sizes
    ("4-66", or the one size they share), not the search's starting configuration."""
    sizes = sorted({p.accelerators for p in m.load_plan.points if p.accelerators})
    if sizes:
        return f"{sizes[0]}{dash}{sizes[-1]}" if len(sizes) > 1 else str(sizes[0])
    return str(m.system.accelerators)


def system_label(m: Manifest) -> str:
    """"h200 x8", "gb300 x4-66" (``accelerator_count``)."""
    return f"{m.system.hardware} x{accelerator_count(m)}"


def manifest_row(run_dir: Path, m: Manifest) -> tuple[object, ...]:
    """The ``runs`` table's row (``_RUN_COLUMNS`` order) of a run whose manifest passed ``load_manifest``."""
    return (m.run_id or run_dir.name, m.created_at, m.source, source_label(m), run_status(run_dir, m),
            m.system.hardware, m.system.accelerators, system_label(m), m.model.name, m.model.precision,
            m.workload_name, m.power.source, len(m.load_plan.points), str(run_dir), msgspec.json.encode(m).decode())


def _sql_list(files: list[str]) -> str:
    return "[" + ", ".join("'" + f.replace("'", "''") + "'" for f in files) + "]"


def connect(runs_root: Path) -> duckdb.DuckDBPyConnection:
    """In-memory DuckDB with views over the intact runs under ``runs_root``, locked to reading them."""
    con = duckdb.connect(":memory:")
    rows, dirs, unfinished = [], [], []
    for d in run_dirs(runs_root):
        try:
            m = load_manifest(d)
            rows.append(manifest_row(d, m))
        except DamagedFile as e:  # one damaged run must not hide all the others
            skip(e.path, e.why)
            continue
        dirs.append(d)
        if _unfinished(d, m):
            unfinished.append(d)
    con.execute("CREATE TABLE runs (" + ", ".join(f"{c} {t}" for c, t in _RUN_COLUMNS.items()) + ")")
    if rows:
        con.executemany(f"INSERT INTO runs VALUES ({', '.join('?' * len(_RUN_COLUMNS))})", rows)
    files = {
        "points": [d / POINT_METRICS for d in dirs if (d / POINT_METRICS).exists()
                   and _intact(d / POINT_METRICS, _POINTS_COLUMNS)],
        "requests": [f for d in dirs for f in _request_files(d)],
        "power": [d / POWER for d in dirs if (d / POWER).exists() and _intact(d / POWER, _POWER_COLUMNS)],
    }
    journal = _journal_records(unfinished)
    if journal is not None:
        con.register("_journal_requests", journal)
    allowed: list[str] = []
    for name, paths in files.items():
        parts = []
        if paths:
            listing = [str(p) for p in paths]
            parts.append(f"SELECT regexp_extract(filename, '{_RUN_ID_RE}', 1) AS run_id, * "
                         f"FROM read_parquet({_sql_list(listing)}, filename=true, union_by_name=true)")
            allowed += listing
        if name == "requests" and journal is not None:
            parts.append("SELECT * FROM _journal_requests")
        if parts:
            con.execute(f"CREATE VIEW {name} AS " + " UNION ALL BY NAME ".join(parts))
    if allowed:
        con.execute(f"SET allowed_paths = {_sql_list(allowed)}")
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    return con


def _refuse_writes(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    """Only queries: any statement that is not SELECT-type (COPY, ATTACH, EXPLAIN ANALYZE COPY, SET...) is refused.

    Needed beside the locked configuration: the run files must stay readable for
    the views, and DuckDB's allowed paths do not tell reading from writing, so a
    ``COPY ... TO`` could otherwise overwrite a run's own Parquet.
    """
    for statement in con.extract_statements(sql):
        if statement.type != duckdb.StatementType.SELECT:
            raise UserError(f"scoville sql only runs queries (SELECT, WITH, FROM, DESCRIBE, SHOW, SUMMARIZE); "
                            f"{statement.type.name} is refused because the catalog is read-only; to export, "
                            "print --json and redirect it to a file")


def query(runs_root: Path, sql: str) -> tuple[list[str], list[tuple]]:
    """Columns and rows of ``sql`` over the catalog; any DuckDB error is a one-line UserError.

    Errors can surface while rows are fetched (a failed cast, ``error()``), not
    only while the statement is parsed, so the fetch is guarded too.
    """
    con = connect(runs_root)
    try:
        _refuse_writes(con, sql)
        rel = con.sql(sql)
        return ([], []) if rel is None else (rel.columns, rel.fetchall())
    except duckdb.Error as e:
        raise UserError(f"SQL error: {str(e).splitlines()[0]} (tables: runs, points, requests, power)") from e
    finally:
        con.close()
