"""The scoville trace format (JSONL): the simplest file that says everything a replay needs.

An optional first line is a header; every other line is one request::

    {"format": "scoville-trace", "version": 1, "block_size": 64}
    {"session_id": "s1", "t": 0.0, "input_tokens": 1200, "output_tokens": 200, "hash_ids": [7, 8, 9, ...]}
    {"session_id": "s1", "think_s": 2.5, "input_tokens": 1900, "output_tokens": 150, "hash_ids": [7, 8, 9, ...]}
    {"t": 0.7, "input_tokens": 8000, "output_tokens": 1000}

Request fields:

- ``input_tokens``, ``output_tokens`` (required): whole numbers, input >= 1.
- ``session_id`` (optional): lines with the same id are the turns of one
  session, in file order; a line without one is a single-request session.
- ``t`` (optional): arrival in seconds from the trace start (open-loop replay
  starts each session at its first request's ``t``).
- ``think_s`` (optional): seconds between the previous turn's end and this
  request; when absent it is derived from ``t`` gaps (or 0).
- ``hash_ids`` (optional): one id per ``block_size``-token block of the prompt
  (the last may be partial); ids are shared across the whole file, so equal
  ids mean identical tokens. Tokens beyond the listed blocks are unique.

Header fields: ``block_size`` (default 64). ``write_scoville_trace`` writes
this format from any scoville workload, so a generated scenario can be frozen
into a file, edited and replayed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

from scoville.workload.spec import Session
from scoville.workload.traces.common import (
    FieldProblem,
    TraceError,
    TraceSession,
    TraceTurn,
    check_block_size,
    decode_json,
    get_float,
    get_hash_ids,
    get_int,
    lines,
)

FORMAT_TAG = "scoville-trace"
DEFAULT_BLOCK_SIZE = 64


def read_scoville(path: Path, block_size: int | None = None) -> list[TraceSession]:
    bs = block_size or DEFAULT_BLOCK_SIZE
    groups: dict[str, list[TraceTurn]] = {}
    with path.open(encoding="utf-8") as f:
        for lineno, line in lines(f, path):
            if not line.strip():
                continue
            obj = decode_json(line.strip(), path, lineno)
            try:
                if not isinstance(obj, dict):
                    raise FieldProblem(None, "each line must be a JSON object")
                if obj.get("format") == FORMAT_TAG:
                    if lineno != 1 and groups:
                        raise FieldProblem("format", "the header must be the first line")
                    if obj.get("version", 1) != 1:
                        raise FieldProblem("version",
                                           f"unsupported version {obj.get('version')!r}; this scoville reads 1")
                    if block_size is None:
                        bs = check_block_size(obj.get("block_size", DEFAULT_BLOCK_SIZE))
                    continue
                n_in = get_int(obj, "input_tokens", minimum=1)
                n_out = get_int(obj, "output_tokens", minimum=0)
                assert n_in is not None and n_out is not None
                turn = TraceTurn(t=get_float(obj, "t"), input_tokens=n_in, output_tokens=n_out,
                                 hash_ids=get_hash_ids(obj, "hash_ids", n_in, bs),
                                 think_s=get_float(obj, "think_s"))
            except FieldProblem as p:
                raise TraceError(path, lineno, p.field, p.problem) from None
            sid = obj.get("session_id")
            key = str(sid) if sid is not None else f"{path.stem}#{lineno}"
            groups.setdefault(key, []).append(turn)
    return [TraceSession(key=k, turns=tuple(v), block_size=bs, scope="global") for k, v in groups.items()]


def write_scoville_trace(path: Path, sessions: Iterable[Session], arrivals: Iterable[float] | None = None) -> int:
    """Write sessions (e.g. ``workload.sessions(n)``) as a scoville trace; returns the request count.

    All sessions must share one block size. ``arrivals`` (seconds, one per
    session) become each session's first ``t``.
    """
    sessions = list(sessions)
    starts: list[float | None] = list(arrivals) if arrivals is not None else [None] * len(sessions)
    if len(starts) != len(sessions):
        raise TraceError(path, None, "t", f"{len(starts)} arrival times for {len(sessions)} sessions; give one each")
    sizes = {r.block_size for s in sessions for r in s.requests if r.block_hashes}
    if len(sizes) > 1:
        raise TraceError(path, None, "block_size",
                         f"sessions use several block sizes {sorted(sizes)}; write one file each")
    bs = sizes.pop() if sizes else DEFAULT_BLOCK_SIZE
    if path.is_symlink() or (path.exists() and not path.is_file()):  # a device, a pipe, a folder, a link elsewhere
        raise TraceError(path, None, None, "exists and is not a regular file; give a new file name")
    try:
        with path.open("w", encoding="utf-8") as f:
            return _write_rows(f, sessions, starts, bs)
    except OSError as e:  # a missing folder, a read-only one, a full disk
        raise TraceError(path, None, None, f"cannot write the trace ({e.strerror}); give a path in an existing, "
                                           "writable folder with space left") from None


def _write_rows(f: TextIO, sessions: list[Session], starts: list[float | None], bs: int) -> int:
    n = 0
    f.write(json.dumps({"format": FORMAT_TAG, "version": 1, "block_size": bs}) + "\n")
    for session, start in zip(sessions, starts, strict=True):
        for k, r in enumerate(session.requests):
            row: dict[str, object] = {"session_id": session.session_id}
            if k == 0 and start is not None:
                row["t"] = round(float(start), 6)
            if k > 0:
                row["think_s"] = round(r.think_s, 6)
            row.update(input_tokens=r.input_tokens, output_tokens=r.output_tokens)
            if r.block_hashes:
                row["hash_ids"] = list(r.block_hashes)
            f.write(json.dumps(row, separators=(",", ":")) + "\n")
            n += 1
    return n
