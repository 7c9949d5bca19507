"""External power meter samples from a CSV file.

Columns: ``t`` (seconds relative to the run start, i.e. on the run clock) *or*
``timestamp`` (unix epoch seconds), then ``watts``, and optionally ``device``
(default ``meter``). Epoch timestamps are mapped onto the run clock with the
manifest's ``clock.segments`` — pairs of (run-clock time, unix time) recorded
when the run started and at every resume — so a meter that logs wall-clock
time needs no coordination with scoville beyond a synchronised host clock.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

import pyarrow as pa

from scoville.power.sources import PowerError
from scoville.results.manifest import ClockSegment
from scoville.results.schema import POWER_SCHEMA


def unix_to_run_clock(u: float, segments: list[ClockSegment]) -> float:
    """Run-clock time of unix time ``u``, by the last clock segment that began at or before it."""
    if not segments:
        raise PowerError("this run has no clock record; give the CSV's times as t (seconds from run start)")
    seg = segments[0]
    for s in segments:
        if s.unix <= u:
            seg = s
    return seg.t + (u - seg.unix)


def _read_rows(path: Path, f: Any, segments: list[ClockSegment]) -> tuple[list[float], list[str], list[float]]:
    """(t on the run clock, device, watts) of every row; PowerError naming the first bad line."""
    reader = csv.DictReader(f)
    fields = [c.strip().lower() for c in reader.fieldnames or []]
    reader.fieldnames = fields
    time_col = "t" if "t" in fields else "timestamp" if "timestamp" in fields else None
    if time_col is None or "watts" not in fields:
        raise PowerError(f"{path}: needs columns t (s from run start) or timestamp (unix s), and watts; "
                         f"found {', '.join(fields) or 'none'}")
    t, dev, w = [], [], []
    for line, row in enumerate(reader, start=2):
        try:
            ts, watts = float(row[time_col]), float(row["watts"])
        except (TypeError, ValueError):
            raise PowerError(f"{path}:{line}: {time_col} and watts must be numbers") from None
        if not (math.isfinite(ts) and math.isfinite(watts) and watts >= 0):  # one NaN would void every J figure
            raise PowerError(f"{path}:{line}: {time_col} must be finite and watts finite and >= 0")
        t.append(unix_to_run_clock(ts, segments) if time_col == "timestamp" else ts)
        w.append(watts)
        dev.append((row.get("device") or "meter").strip())
    return t, dev, w


def read_power_csv(path: str | Path, segments: list[ClockSegment]) -> pa.Table:
    """Samples of ``path`` as a POWER_SCHEMA table on the run clock (PowerError on a bad file)."""
    path = Path(path)
    if not path.is_file():
        raise PowerError(f"--power-csv {path}: no such file")
    try:
        with path.open(newline="", encoding="utf-8") as f:
            t, dev, w = _read_rows(path, f, segments)
    except UnicodeDecodeError:
        raise PowerError(f"{path}: not a UTF-8 text CSV file") from None
    except csv.Error as e:  # a field over the csv module's size limit, an unterminated quote at the end...
        raise PowerError(f"{path}: not a CSV file scoville can read ({e})") from None
    if not t:
        raise PowerError(f"{path}: no samples")
    return pa.Table.from_pydict({"t": t, "device": dev, "watts": w}, schema=POWER_SCHEMA)
