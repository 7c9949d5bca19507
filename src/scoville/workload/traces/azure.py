"""Azure LLM inference traces (CSV), as published by Azure for 2023 and 2024.

A header row, then one request per row::

    TIMESTAMP,ContextTokens,GeneratedTokens
    2023-11-16 18:15:46.6805900,374,44

``TIMESTAMP`` is the arrival time (ISO-like date and time; up to 7 fractional
digits), ``ContextTokens`` the input and ``GeneratedTokens`` the output length.
The traces carry no prefix or session information, so each row is a single
request with a unique prompt.
"""

from __future__ import annotations

import csv
from datetime import datetime
from pathlib import Path
from typing import Any

from scoville.workload.spec import MAX_REQUEST_TOKENS
from scoville.workload.traces.common import TraceError, TraceSession, TraceTurn, lines

COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")


def _timestamp(text: str) -> datetime:
    text = text.strip()
    date, _, frac = text.partition(".")
    if frac:  # datetime reads at most 6 fractional digits; the traces carry 7
        digits = frac[:len(frac) - len(frac.lstrip("0123456789"))]  # the leading digits; a zone may follow
        rest = frac[len(digits):]
        text = f"{date}.{digits[:6].ljust(6, '0')}{rest}"
    return datetime.fromisoformat(text)


def read_azure(path: Path, block_size: int | None = None) -> list[TraceSession]:
    bs = block_size or 64
    with path.open(encoding="utf-8", newline="") as f:
        reader = csv.reader(line for _, line in lines(f, path))
        try:
            return _rows(path, reader, bs)
        except csv.Error as e:  # a NUL byte, a field over the csv module's limit
            raise TraceError(path, reader.line_num, None, f"not a readable CSV ({e})") from None


def _columns(path: Path, header: list[str]) -> list[int]:
    """Where TIMESTAMP, ContextTokens and GeneratedTokens are in each row."""
    names = {h.strip().lower(): i for i, h in enumerate(header)}
    missing = [c for c in COLUMNS if c.lower() not in names]
    if missing:
        raise TraceError(path, 1, missing[0], f"column missing from the header {header}; an Azure trace has "
                                              f"columns {', '.join(COLUMNS)}")
    return [names[c.lower()] for c in COLUMNS]


def _count(path: Path, lineno: int, column: str, cell: str, minimum: int) -> int:
    try:
        value = int(cell.strip())
    except ValueError:
        value = -1
    if not minimum <= value <= MAX_REQUEST_TOKENS:
        raise TraceError(path, lineno, column, f"must be a whole number of tokens from {minimum} to "
                                               f"{MAX_REQUEST_TOKENS:,}, got {cell.strip()!r}")
    return value


def _rows(path: Path, reader: Any, bs: int) -> list[TraceSession]:
    header: list[str] | None = next(reader, None)
    if header is None:
        raise TraceError(path, 1, None, "empty file; expected a header TIMESTAMP,ContextTokens,GeneratedTokens")
    idx = _columns(path, header)
    sessions: list[TraceSession] = []
    t0: datetime | None = None
    for row in reader:
        lineno = reader.line_num
        if not row or not any(cell.strip() for cell in row):
            continue
        if len(row) <= max(idx):
            raise TraceError(path, lineno, None, f"row has {len(row)} cells; expected {len(header)}")
        try:
            ts = _timestamp(row[idx[0]])
        except ValueError:
            raise TraceError(path, lineno, "TIMESTAMP", f"cannot read {row[idx[0]]!r} as a date and time, "
                                                        "e.g. 2023-11-16 18:15:46.6805900") from None
        n_in = _count(path, lineno, COLUMNS[1], row[idx[1]], 1)
        n_out = _count(path, lineno, COLUMNS[2], row[idx[2]], 0)
        t0 = ts if t0 is None else t0
        if (ts.tzinfo is None) != (t0.tzinfo is None):  # subtracting them would raise a TypeError
            raise TraceError(path, lineno, "TIMESTAMP",
                             f"{row[idx[0]].strip()!r} {'has no' if ts.tzinfo is None else 'has a'} time zone "
                             f"but the first row's {'has one' if t0.tzinfo is not None else 'has none'}; "
                             "give every TIMESTAMP a zone (e.g. +00:00) or none")
        turn = TraceTurn(t=(ts - t0).total_seconds(), input_tokens=n_in, output_tokens=n_out)
        sessions.append(TraceSession(key=f"{path.stem}#{lineno}", turns=(turn,), block_size=bs))
    return sessions
