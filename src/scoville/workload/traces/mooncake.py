"""Mooncake-style request traces (JSONL), as published with Mooncake and replayed by AIPerf.

One request per line::

    {"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, ...]}

``timestamp`` is the arrival in milliseconds from the trace start,
``hash_ids`` one id per 512-token block of the prompt, shared across the whole
file (equal ids = identical tokens, so requests that share leading ids share a
prefix). A line may carry ``session_id``; lines of one session form its turns in
file order, and a session without one is a single request.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import msgspec

from scoville.workload.spec import MAX_REQUEST_TOKENS
from scoville.workload.traces.common import (
    FieldProblem,
    TraceError,
    TraceSession,
    TraceTurn,
    decode_json,
    get_float,
    get_hash_ids,
    get_int,
    lines,
)

DEFAULT_BLOCK_SIZE = 512


class _Line(msgspec.Struct):
    """The fast path: a well-formed line decodes straight into this (public traces have millions)."""

    input_length: Annotated[int, msgspec.Meta(ge=1, le=MAX_REQUEST_TOKENS)]
    output_length: Annotated[int, msgspec.Meta(ge=0, le=MAX_REQUEST_TOKENS)]
    timestamp: Annotated[float, msgspec.Meta(ge=0)] | None = None
    hash_ids: list[Annotated[int, msgspec.Meta(ge=0)]] = []
    session_id: str | int | None = None


_fast = msgspec.json.Decoder(_Line)


def read_mooncake(path: Path, block_size: int | None = None) -> list[TraceSession]:
    bs = block_size or DEFAULT_BLOCK_SIZE
    groups: dict[str, list[TraceTurn]] = {}
    with path.open(encoding="utf-8") as f:
        for lineno, line in lines(f, path):
            if not line.strip():
                continue
            try:
                row = _fast.decode(line)
            except (msgspec.DecodeError, msgspec.ValidationError):
                row = None
            if row is not None and len(row.hash_ids) * bs < row.input_length + bs:
                key = str(row.session_id) if row.session_id is not None else f"{path.stem}#{lineno}"
                groups.setdefault(key, []).append(TraceTurn(
                    t=None if row.timestamp is None else row.timestamp / 1000.0, input_tokens=row.input_length,
                    output_tokens=row.output_length, hash_ids=tuple(row.hash_ids)))
                continue
            # The slow path finds and names exactly what is wrong with the line.
            obj = decode_json(line.strip(), path, lineno)
            try:
                if not isinstance(obj, dict):
                    raise FieldProblem(None, "each line must be a JSON object with input_length and output_length")
                n_in = get_int(obj, "input_length", minimum=1)
                n_out = get_int(obj, "output_length", minimum=0)
                assert n_in is not None and n_out is not None
                ts = get_float(obj, "timestamp")
                turn = TraceTurn(t=None if ts is None else ts / 1000.0, input_tokens=n_in, output_tokens=n_out,
                                 hash_ids=get_hash_ids(obj, "hash_ids", n_in, bs))
            except FieldProblem as p:
                raise TraceError(path, lineno, p.field, p.problem) from None
            key = str(obj["session_id"]) if obj.get("session_id") is not None else f"{path.stem}#{lineno}"
            groups.setdefault(key, []).append(turn)
    return [TraceSession(key=k, turns=tuple(v), block_size=bs, scope="global") for k, v in groups.items()]
