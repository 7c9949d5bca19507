"""Run directories: crash-safe writing and reading (docs/architecture.md, "The run directory").

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

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import secrets
import socket
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pyarrow as pa
import pyarrow.parquet as pq

from scoville.errors import UserError
from scoville.results.manifest import Manifest, decode_manifest
from scoville.results.points import PointMetrics, conform_points, points_table, table_points
from scoville.results.schema import (
    COMPAT_MODES,
    POWER_SCHEMA,
    RECORD_SCHEMA,
    SCHEMA_VERSION,
    RequestRecord,
    conform,
    records_to_table,
)

MANIFEST = "manifest.json"
JOURNAL = "requests.jsonl"
POINTS_DIR = "requests"
POWER = "power.parquet"
POINT_METRICS = "points.parquet"
LOCK = "writer.lock"

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(RequestRecord)
# How long a writer waits for the lock: long enough to outlast a reader's probe (writer_alive
# holds it for microseconds), short enough that a second writer is refused at once.
_LOCK_WAIT_S = 1.0
_HELD: set[str] = set()  # run folders whose lock this process holds (write_point_metrics reuses it)


class RunError(UserError):
    """A run directory is missing, malformed or cannot be written; message is user-facing."""


class MalformedManifest(RunError):
    """A manifest that is JSON but not a manifest; ``why`` says what is wrong without the path (the catalog
    names the file itself)."""

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"{path}: {why}")
        self.why = why


def new_run_id(now: datetime | None = None) -> str:
    """UTC time plus a short random hash, e.g. ``20261202T113000Z-3fa9c1``."""
    now = now or datetime.now(UTC)
    return f"{now.strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(3)}"


def point_file(run_dir: Path, point: int) -> Path:
    return run_dir / POINTS_DIR / f"point-{point:04d}.parquet"


def write_failure(path: Path, e: OSError) -> RunError:
    """One line for a failed write (disk full, read-only folder, file size limit): what, where, why."""
    why = e.strerror or str(e)
    hint = {errno.ENOSPC: "the disk is full", errno.EROFS: "the file system is read-only",
            errno.EACCES: "no permission to write there", errno.EPERM: "no permission to write there",
            errno.EFBIG: "the file size limit (ulimit -f) is reached", errno.EDQUOT: "the disk quota is used up",
            }.get(e.errno or 0)
    return RunError(f"cannot write {path}: {why}{' (' + hint + ')' if hint and hint != why else ''}")


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError as e:  # the previous manifest stays whole: replace() is the only step that touches it
        tmp.unlink(missing_ok=True)
        raise write_failure(path, e) from None


def _write_parquet_atomic(table: pa.Table, path: Path) -> None:
    tmp = path.with_suffix(".parquet.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, tmp, compression="zstd")
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise write_failure(path, e) from None


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class RunLock:
    """An exclusive ``flock`` on ``<run>/writer.lock``, held by the one process writing the run.

    Why a lock: two ``--resume`` of one run (or a resume of a run still being
    measured) would measure at once and interleave their records. The kernel
    drops the lock when its holder dies however it dies, so a run whose manifest
    says "running" but whose lock is free was left by a crashed writer
    (``writer_alive``). The file holds the holder's pid, host and start time,
    only to name it in the refusal.
    """

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / LOCK
        self._key = os.path.realpath(run_dir)
        try:
            self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as e:
            raise write_failure(self.path, e) from None
        deadline = time.monotonic() + _LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() < deadline:
                    time.sleep(0.05)
                    continue
                holder = self._holder()
                self.release()
                raise RunError(f"{run_dir} is being written by another scoville process{holder}; "
                               "wait for it to finish (or stop it), then try again") from None
        stamp = json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                            "since": datetime.now(UTC).isoformat()}).encode()
        try:
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, stamp, 0)
        except OSError as e:
            self.release()
            raise write_failure(self.path, e) from None
        _HELD.add(self._key)

    def _holder(self) -> str:
        if self._fd is None:
            return ""
        try:
            info = json.loads(os.pread(self._fd, 4096, 0) or b"{}")
            return f" (pid {int(info['pid'])} on {info['host']}, since {info['since']})"
        except (OSError, ValueError, KeyError, TypeError):
            return ""

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None
            _HELD.discard(self._key)

    @classmethod
    def held_or_taken(cls, run_dir: Path) -> RunLock | None:
        """None when this process already writes ``run_dir``; else the lock, taken now (release it)."""
        return None if os.path.realpath(run_dir) in _HELD else cls(run_dir)


def writer_alive(run_dir: Path) -> bool:
    """Whether a process holds ``run_dir``'s writer lock now.

    A manifest saying "running" while this is False means the writer died
    (kill -9, a crash, a power cut): the run will not finish by itself and can
    be resumed. Works on read-only run folders (``flock`` needs no write access).
    """
    try:
        fd = os.open(run_dir / LOCK, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False  # no lock file: written before locks existed, or never by a writer
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # also drops the shared lock when it was taken
    return False


def _open_journal(path: Path) -> Any:
    """The journal for appending, after ending a torn last line (a writer killed mid-write).

    Without the newline, the first record written after a resume would be glued
    onto the torn line and both would be unreadable. The torn bytes are kept (the
    reader skips them), so nothing is rewritten.
    """
    f = path.open("ab", buffering=0)
    if f.tell() > 0:
        with path.open("rb") as r:
            r.seek(-1, os.SEEK_END)
            torn = r.read(1) != b"\n"
        if torn:
            f.write(b"\n")
    return f


class RunWriter:
    """Writes one run directory; every method leaves the directory readable.

    The monotonic clock origin (``t0``) is fixed at creation: drivers stamp
    records with ``time.perf_counter() - writer.t0`` (the real client) or with
    virtual time (the simulator). The writer holds the run's ``RunLock`` from
    construction to ``finish`` (or ``close``); every failed write is a one-line
    ``RunError`` that leaves what was written before intact.
    """

    def __init__(self, run_dir: Path, manifest: Manifest, *, journal: bool = True,
                 lock: RunLock | None = None) -> None:
        self.run_dir = run_dir
        self.t0 = time.perf_counter()
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise write_failure(run_dir, e) from None
        self._lock: RunLock | None = lock or RunLock(run_dir)
        try:
            self.manifest = manifest
            manifest.run_id = manifest.run_id or run_dir.name
            manifest.created_at = manifest.created_at or datetime.now(UTC).isoformat()
            # Which writer session this is (0 first, then one per resume): stamped on every record.
            self.attempt = len(manifest.resumed_at or [])
            manifest.status = "running"
            self.save_manifest()
            self._journal = None
            if journal:
                try:
                    self._journal = _open_journal(run_dir / JOURNAL)
                except OSError as e:
                    raise write_failure(run_dir / JOURNAL, e) from None
        except BaseException:
            self.close()
            raise

    @classmethod
    def create(cls, runs_root: Path, manifest: Manifest, *, journal: bool = True) -> RunWriter:
        manifest.run_id = manifest.run_id or new_run_id()
        return cls(runs_root / manifest.run_id, manifest, journal=journal)

    @classmethod
    def resume(cls, run_dir: Path, lock: RunLock | None = None) -> RunWriter:
        """Reopen an interrupted run to add or redo points; the manifest is kept.

        The lock is taken before the manifest is read, so a second writer can
        neither read a manifest that is about to change nor touch the run.
        """
        lock = lock or RunLock(run_dir)
        try:
            manifest = read_manifest(run_dir)
            if manifest.schema_version > SCHEMA_VERSION:  # rewriting it here would drop the keys it added
                raise RunError(f"{run_dir} was written by a newer scoville (run schema {manifest.schema_version}; "
                               f"this one knows up to {SCHEMA_VERSION}); resume it with that version")
        except BaseException:
            lock.release()
            raise
        manifest.resumed_at = [*(manifest.resumed_at or []), datetime.now(UTC).isoformat()]
        writer = cls(run_dir, manifest, lock=lock)
        # Continue the clock where the journal left off so times stay monotonic.
        last = max((r.t_done or r.t_sent for r in read_journal(run_dir)), default=0.0)
        writer.t0 = time.perf_counter() - last - 1.0
        return writer

    def now(self) -> float:
        return time.perf_counter() - self.t0

    def save_manifest(self) -> None:
        _write_atomic(self.run_dir / MANIFEST, self.manifest.to_json())

    def record(self, rec: RequestRecord) -> None:
        """Journal one finished request immediately (survives kill -9), stamped with this attempt."""
        if self._journal is None:
            raise RunError("this RunWriter was opened without a journal; use write_point()")
        rec.attempt = self.attempt
        line = memoryview(_encoder.encode(rec) + b"\n")
        try:
            while line:  # an unbuffered write may take part of the line (disk nearly full): write the rest
                line = line[self._journal.write(line):]
        except OSError as e:
            raise write_failure(self.run_dir / JOURNAL, e) from None

    def write_point(self, point: int, records: Iterable[RequestRecord] | pa.Table) -> None:
        """Compact a finished point to Parquet (replacing an earlier attempt)."""
        table = records if isinstance(records, pa.Table) else records_to_table(list(records))
        _write_parquet_atomic(conform(table), point_file(self.run_dir, point))

    def write_power(self, samples: pa.Table) -> None:
        existing = read_power(self.run_dir)
        table = pa.concat_tables([existing, samples.cast(POWER_SCHEMA)]) if existing.num_rows else samples
        _write_parquet_atomic(table.cast(POWER_SCHEMA), self.run_dir / POWER)

    def finish(self, status: str = "complete") -> None:
        """Record the final status and a content hash of each data file, then release the run."""
        try:
            if self._journal is not None:
                self._journal.close()
                self._journal = None
            self.manifest.status = status
            self.manifest.finished_at = datetime.now(UTC).isoformat()
            self.manifest.files = {
                str(p.relative_to(self.run_dir)): file_sha256(p)
                for p in sorted(self.run_dir.rglob("*"))
                if p.is_file() and p.name not in (MANIFEST, LOCK) and not p.name.endswith(".tmp")
            }
            self.save_manifest()
        finally:
            self.close()

    def close(self) -> None:
        """Release the journal and the lock without touching the manifest (after a failed write)."""
        journal = getattr(self, "_journal", None)
        if journal is not None:
            with contextlib.suppress(OSError):  # a full disk can fail the final flush; what was written stays
                journal.close()
            self._journal = None
        if self._lock is not None:
            self._lock.release()
            self._lock = None


def read_manifest(run_dir: Path) -> Manifest:
    """The run's manifest; a missing, unreadable, non-JSON or malformed file is one RunError line, for every
    command that opens a run (``catalog.load_manifest`` says which file of a catalog was damaged)."""
    path = run_dir / MANIFEST
    if not path.exists():
        raise RunError(f"{run_dir}: not a scoville run (no {MANIFEST}); pass a directory under runs/")
    try:
        raw = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise RunError(f"{path}: manifest is not valid JSON ({e}); the run may be corrupt") from e
    except UnicodeDecodeError as e:
        raise RunError(f"{path}: manifest is not UTF-8 text ({e.reason} at byte {e.start}); "
                       "the run may be corrupt") from e
    except OSError as e:
        raise RunError(f"{path}: cannot read the manifest ({e.strerror or e}); "
                       "check the file's type and permissions") from e
    try:
        manifest = decode_manifest(raw)
    except (msgspec.ValidationError, ValueError) as e:  # LoadError (a planned point over the cap) is a ValueError
        raise MalformedManifest(path, f"malformed manifest ({e})") from None
    if manifest.compat not in COMPAT_MODES:
        raise MalformedManifest(path, f"malformed manifest (compat {manifest.compat!r} is none of "
                                      f"{', '.join(COMPAT_MODES)})")
    return manifest


def read_journal(run_dir: Path) -> list[RequestRecord]:
    """Every journaled record; a torn line (killed mid-write) or an out-of-range one is skipped."""
    path = run_dir / JOURNAL
    if not path.exists():
        return []
    if not path.is_file():  # a device such as /dev/zero would be read forever
        raise RunError(f"{path}: not a regular file; a run's journal is a plain file")
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
    """Points with a compacted Parquet file (``point-NNNN.parquet``; other names are not points)."""
    d = run_dir / POINTS_DIR
    if not d.exists():
        return set()
    out = set()
    for p in d.glob("point-*.parquet"):
        number = p.stem.split("-", 1)[1]
        if number.isdigit():
            out.add(int(number))
    return out


def _read_point(run_dir: Path, point: int) -> pa.Table:
    path = point_file(run_dir, point)
    try:
        return conform(pq.read_table(path))
    except (OSError, pa.ArrowException, KeyError) as e:
        raise RunError(f"{path}: not a readable point file ({type(e).__name__}: {str(e)[:120]}); "
                       f"move it away and resume the run to measure that point again") from None


def measured_points(run_dir: Path) -> set[int]:
    """Finished points with at least one successful measured request: what a resume keeps.

    A point whose every request failed (the server was down, every prompt was
    over its context) measured nothing, so ``--resume`` measures it again.
    """
    out = set()
    for p in finished_points(run_dir):
        try:
            table = pq.read_table(point_file(run_dir, p), columns=["ok", "warmup"])
        except (OSError, pa.ArrowException):
            continue  # unreadable: measure it again
        ok = table.column("ok").to_pylist()
        warm = table.column("warmup").to_pylist()
        if any(o and not w for o, w in zip(ok, warm, strict=True)):
            out.add(p)
    return out


def read_requests(run_dir: Path) -> pa.Table:
    """All request records of a run: Parquet per finished point, the journal for the rest.

    A point's records always come from one attempt (one writer session): its
    Parquet file when it finished, else the journal records of the latest
    attempt that reached it. A point killed, resumed and killed again therefore
    shows the second try alone, never two partial tries summed as one.
    """
    done = finished_points(run_dir)
    tables = [_read_point(run_dir, p) for p in sorted(done)]
    pending = journal_records(run_dir, done)
    if pending.num_rows:
        tables.append(pending)
    if not tables:
        return RECORD_SCHEMA.empty_table()
    return pa.concat_tables(tables)


def journal_records(run_dir: Path, done: set[int] | None = None) -> pa.Table:
    """The records of the points not yet compacted (``done``: default, the run's finished points), each point's
    latest attempt only: what a running or interrupted run holds outside its Parquet files."""
    done = finished_points(run_dir) if done is None else done
    pending: dict[int, list[RequestRecord]] = defaultdict(list)
    for rec in read_journal(run_dir):
        if rec.point not in done:
            pending[rec.point].append(rec)
    tables = []
    for _, recs in sorted(pending.items()):
        last = max(r.attempt for r in recs)
        tables.append(records_to_table([r for r in recs if r.attempt == last]))
    return pa.concat_tables(tables) if tables else RECORD_SCHEMA.empty_table()


def read_power(run_dir: Path) -> pa.Table:
    path = run_dir / POWER
    if not path.exists():
        return POWER_SCHEMA.empty_table()
    return pq.read_table(path).cast(POWER_SCHEMA)


def write_point_metrics(run_dir: Path, rows: Sequence[Mapping[str, object]]) -> None:
    """Store the metrics rows, each checked as a ``PointMetrics`` (``points.points_table``); no rows means no
    file (a zero-column Parquet breaks every reader).

    Takes the run's lock unless this process already writes the run, so
    ``scoville recompute`` cannot race a sweep that is still measuring it.
    """
    lock = RunLock.held_or_taken(run_dir)
    try:
        path = run_dir / POINT_METRICS
        if rows:
            _write_parquet_atomic(points_table(rows), path)
        else:
            try:
                path.unlink(missing_ok=True)
            except OSError as e:
                raise write_failure(path, e) from None
    finally:
        if lock is not None:
            lock.release()


def _read_points_table(run_dir: Path) -> pa.Table | None:
    path = run_dir / POINT_METRICS
    return conform_points(pq.read_table(path)) if path.exists() else None


def read_points(run_dir: Path) -> list[PointMetrics]:
    """The stored metrics of each point (``points.parquet``), typed; [] when there is no file.

    An older file's missing columns are None, a column this version does not know is left out
    (``results.points``); a column that cannot be read as its type raises ``pa.ArrowInvalid``.
    """
    table = _read_points_table(run_dir)
    return [] if table is None else table_points(table)


def read_point_metrics(run_dir: Path) -> list[dict[str, Any]]:
    """The same rows by column name (a column the file has is a key, null or not): for the tables and ``--json``
    output that print whatever columns a run has. Columns ``PointMetrics`` does not know (a newer version's, a
    hand-added one) are left out here as in the typed rows; the DuckDB catalog reads the file as it is."""
    table = _read_points_table(run_dir)
    return [] if table is None else table.to_pylist()
