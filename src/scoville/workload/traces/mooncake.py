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

from scoville.workload.traces.common import (
    FieldProblem,
    TraceError,
    TraceSession,
    TraceTurn,
    decode_json,
    get_float,
    get_hash_ids,
    get_int,
)

DEFAULT_BLOCK_SIZE = 512


def read_mooncake(path: Path, block_size: int | None = None) -> list[TraceSession]:
    bs = block_size or DEFAULT_BLOCK_SIZE
    groups: dict[str, list[TraceTurn]] = {}
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
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
