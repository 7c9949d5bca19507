"""Run directories: crash-safe writing and reading (DESIGN.md, "Run directory").

Layout of ``runs/<run_id>/``::

    manifest.json            written first (status "running"), completed last
    requests.jsonl           append-only journal, one line per finished request
    requests/point-0003.parquet   compacted records of each finished point
    power.parquet            power samples (t, device, watts), when measured
    points.parquet           derived metrics per point (recomputable)

Why a journal *and* Parquet: a ``kill -9`` mid-point must lose no finished
request, so each record is appended and flushed the moment it finishes; Parquet
per point (not one rewritten file) lets a sweep append a point, and a resumed
sweep replace an unfinished point, without rewriting what is already there.
The reader trusts a point's Parquet file when it exists and falls back to the
journal for points that never finished.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import time
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

import msgspec
import pyarrow as pa
import pyarrow.parquet as pq

from scoville.errors import UserError
from scoville.results.schema import (
    ARROW_SCHEMA,
    POWER_SCHEMA,
    SCHEMA_VERSION,
    RequestRecord,
    records_to_table,
)

MANIFEST = "manifest.json"
JOURNAL = "requests.jsonl"
POINTS_DIR = "requests"
POWER = "power.parquet"
POINT_METRICS = "points.parquet"

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(RequestRecord)


class RunError(UserError):
    """A run directory is missing, malformed or cannot be written; message is user-facing."""


def new_run_id(now: datetime | None = None) -> str:
    """UTC time plus a short random hash, e.g. ``20261202T113000Z-3fa9c1``."""
    now = now or datetime.now(timezone.utc)
    return f"{now.strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(3)}"


def point_file(run_dir: Path, point: int) -> Path:
    return run_dir / POINTS_DIR / f"point-{point:04d}.parquet"


def _write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
    os.replace(tmp, path)


def _write_parquet_atomic(table: pa.Table, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".parquet.tmp")
    pq.write_table(table, tmp, compression="zstd")
    os.replace(tmp, path)


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class RunWriter:
    """Writes one run directory; every method leaves the directory readable.

    The monotonic clock origin (``t0``) is fixed at creation: drivers stamp
    records with ``time.perf_counter() - writer.t0`` (the real client) or with
    virtual time (the simulator).
    """

    def __init__(self, run_dir: Path, manifest: dict[str, Any], *, journal: bool = True) -> None:
        self.run_dir = run_dir
        self.manifest = manifest
        self.t0 = time.perf_counter()
        run_dir.mkdir(parents=True, exist_ok=True)
        manifest.setdefault("schema_version", SCHEMA_VERSION)
        manifest.setdefault("run_id", run_dir.name)
        manifest.setdefault("created_at", datetime.now(timezone.utc).isoformat())
        manifest["status"] = "running"
        self.save_manifest()
        self._journal = (run_dir / JOURNAL).open("ab", buffering=0) if journal else None

    @classmethod
    def create(cls, runs_root: Path, manifest: dict[str, Any], *, journal: bool = True) -> "RunWriter":
        run_id = manifest.get("run_id") or new_run_id()
        manifest["run_id"] = run_id
        return cls(runs_root / run_id, manifest, journal=journal)

    @classmethod
    def resume(cls, run_dir: Path) -> "RunWriter":
        """Reopen an interrupted run to add or redo points; the manifest is kept."""
        manifest = read_manifest(run_dir)
        manifest.setdefault("resumed_at", []).append(datetime.now(timezone.utc).isoformat())
        writer = cls(run_dir, manifest)
        # Continue the clock where the journal left off so times stay monotonic.
        last = max((r.t_done or r.t_sent for r in read_journal(run_dir)), default=0.0)
        writer.t0 = time.perf_counter() - last - 1.0
        return writer

    def now(self) -> float:
        return time.perf_counter() - self.t0

    def save_manifest(self) -> None:
        _write_json_atomic(self.run_dir / MANIFEST, self.manifest)

    def record(self, rec: RequestRecord) -> None:
        """Journal one finished request immediately (survives kill -9)."""
        if self._journal is None:
            raise RunError("this RunWriter was opened without a journal; use write_point()")
        self._journal.write(_encoder.encode(rec) + b"\n")

    def write_point(self, point: int, records: Iterable[RequestRecord] | pa.Table) -> None:
        """Compact a finished point to Parquet (replacing an earlier attempt)."""
        table = records if isinstance(records, pa.Table) else records_to_table(list(records))
        _write_parquet_atomic(table.cast(ARROW_SCHEMA), point_file(self.run_dir, point))

    def write_power(self, samples: pa.Table) -> None:
        existing = read_power(self.run_dir)
        table = pa.concat_tables([existing, samples.cast(POWER_SCHEMA)]) if existing.num_rows else samples
        _write_parquet_atomic(table.cast(POWER_SCHEMA), self.run_dir / POWER)

    def finish(self, status: str = "complete") -> None:
        """Record the final status and a content hash of each data file."""
        if self._journal is not None:
            self._journal.close()
            self._journal = None
        self.manifest["status"] = status
        self.manifest["finished_at"] = datetime.now(timezone.utc).isoformat()
        self.manifest["files"] = {
            str(p.relative_to(self.run_dir)): file_sha256(p)
            for p in sorted(self.run_dir.rglob("*"))
            if p.is_file() and p.name != MANIFEST and not p.name.endswith(".tmp")
        }
        self.save_manifest()


def read_manifest(run_dir: Path) -> dict[str, Any]:
    path = run_dir / MANIFEST
    if not path.exists():
        raise RunError(f"{run_dir}: not a scoville run (no {MANIFEST}); pass a directory under runs/")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise RunError(f"{path}: manifest is not valid JSON ({e}); the run may be corrupt") from e


def read_journal(run_dir: Path) -> list[RequestRecord]:
    """Every journaled record; a torn last line (killed mid-write) is skipped."""
    path = run_dir / JOURNAL
    if not path.exists():
        return []
    out = []
    for line in path.read_bytes().splitlines():
        if not line.strip():
            continue
        try:
            out.append(_decoder.decode(line))
        except msgspec.DecodeError:
            continue
    return out


def finished_points(run_dir: Path) -> set[int]:
    d = run_dir / POINTS_DIR
    if not d.exists():
        return set()
    return {int(p.stem.split("-")[1]) for p in d.glob("point-*.parquet")}


def read_requests(run_dir: Path) -> pa.Table:
    """All request records of a run: Parquet per finished point, journal for the rest."""
    done = finished_points(run_dir)
    tables = [pq.read_table(point_file(run_dir, p)).cast(ARROW_SCHEMA) for p in sorted(done)]
    pending: dict[int, list[RequestRecord]] = defaultdict(list)
    for rec in read_journal(run_dir):
        if rec.point not in done:
            pending[rec.point].append(rec)
    tables += [records_to_table(recs) for _, recs in sorted(pending.items())]
    if not tables:
        return ARROW_SCHEMA.empty_table()
    return pa.concat_tables(tables)


def read_power(run_dir: Path) -> pa.Table:
    path = run_dir / POWER
    if not path.exists():
        return POWER_SCHEMA.empty_table()
    return pq.read_table(path).cast(POWER_SCHEMA)


def write_point_metrics(run_dir: Path, rows: list[dict[str, Any]]) -> None:
    _write_parquet_atomic(pa.Table.from_pylist(rows), run_dir / POINT_METRICS)


def read_point_metrics(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / POINT_METRICS
    if not path.exists():
        return []
    return pq.read_table(path).to_pylist()
