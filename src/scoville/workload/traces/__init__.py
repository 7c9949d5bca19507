"""Trace readers: AgentX session traces, Mooncake JSONL, Azure CSV and the scoville JSONL format.

``load_trace(path)`` picks the reader from the file (or ``fmt``), parses and
validates every request (a bad one fails with file, line and field) and
returns a ``TraceWorkload`` the drivers replay like any other workload. Real
corpora are read from a local path; nothing is downloaded.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scoville.workload.traces.agentx import read_agentx
from scoville.workload.traces.azure import read_azure
from scoville.workload.traces.common import TraceError, TraceSession, TraceTurn, lines
from scoville.workload.traces.mooncake import read_mooncake
from scoville.workload.traces.native import FORMAT_TAG, read_scoville, write_scoville_trace
from scoville.workload.traces.workload import REPLAY_MODES, TraceOptions, TraceWorkload

READERS: dict[str, Callable[[Path, int | None], list[TraceSession]]] = {
    "agentx": read_agentx,
    "mooncake": read_mooncake,
    "azure": read_azure,
    "scoville": read_scoville,
}
FORMATS = tuple(READERS)

__all__ = ["FORMATS", "REPLAY_MODES", "TraceError", "TraceOptions", "TraceSession", "TraceTurn", "TraceWorkload",
           "detect_format", "load_trace", "write_scoville_trace"]


def detect_format(path: Path) -> str:
    """The trace format of ``path`` from its suffix and, for JSONL, its first record's fields."""
    if path.is_dir() or path.suffix == ".json":
        return "agentx"
    if path.suffix == ".csv":
        return "azure"
    with path.open(encoding="utf-8") as f:
        first = next((line for _, line in lines(f, path) if line.strip()), "")
    try:
        obj = json.loads(first)
    except json.JSONDecodeError:
        obj = None
    if isinstance(obj, dict):
        if obj.get("format") == FORMAT_TAG or "input_tokens" in obj:
            return "scoville"
        if "input_length" in obj:
            return "mooncake"
        if "requests" in obj:
            return "agentx"
    raise TraceError(path, 1, None, f"cannot tell the trace format; pass --trace-format ({', '.join(FORMATS)})")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    files = sorted(p for p in path.iterdir() if p.is_file()) if path.is_dir() else [path]
    for p in files:
        h.update(p.name.encode())
        with p.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def load_trace(path: Path | str, fmt: str | None = None, **options: Any) -> TraceWorkload:
    """Read and validate a trace; ``options`` are TraceOptions fields (time_scale, sample, ...)."""
    path = Path(path)
    if not path.exists():
        raise TraceError(path, None, None, "no such file or folder; give the path of a local trace")
    if not (path.is_file() or path.is_dir()):  # a device or a pipe: /dev/zero would be read forever
        raise TraceError(path, None, None, "not a regular file or folder; give the path of a trace file")
    if fmt is not None and fmt not in READERS:
        raise TraceError(path, None, None, f"unknown trace format {fmt!r}; use one of {', '.join(FORMATS)}")
    unknown = sorted(set(options) - set(TraceOptions.__struct_fields__))
    if unknown:
        raise TraceError(path, None, None, f"unknown trace option(s) {', '.join(unknown)}; "
                                           f"valid: {', '.join(TraceOptions.__struct_fields__)}")
    opts = TraceOptions(**options)
    try:
        fmt = fmt or detect_format(path)
        sessions = READERS[fmt](path, opts.block_size)
    except UnicodeDecodeError:
        kind = f"{fmt} " if fmt else ""
        raise TraceError(path, None, None, f"not a text file; is it really a {kind}trace?") from None
    return TraceWorkload(path, fmt, sessions, opts, _sha256(path))
