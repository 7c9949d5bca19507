"""AgentX / InferenceX agentic session traces (the "weka" trace format AIPerf replays).

One JSON document per session::

    {"id": "...", "models": [...], "block_size": 64, "hash_id_scope": "local",
     "requests": [
       {"t": 0.0, "type": "n", "model": "...", "in": 8192, "out": 16,
        "hash_ids": [1, 2, ...], "api_time": 0.1, "think_time": 0.0, ...},
       {"t": 5.0, "type": "subagent", "agent_id": "a", "requests": [ ...same shape, may nest... ]},
       ...]}

``t`` is the request's start in seconds from the session start, ``in``/``out``
its input and output token counts, ``hash_ids`` one id per ``block_size``-token
block of the prompt (``local`` scope: ids mean the same tokens only within one
session, parent and subagents included). Corpora come as one ``.json`` file per
session, a ``.jsonl`` file with one session per line, or a folder of either.

A session tree (root plus subagents) becomes one ``TraceSession`` whose turns
are all its requests in start-time order, each labelled with its lane: the
tree holds one concurrency slot, as AgentX counts it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
    json_line,
    lines,
)

NORMAL_TYPES = ("n", "s", "normal")
DEFAULT_BLOCK_SIZE = 64
MAX_JSON_BYTES = 256 << 20  # one session document; a corpus this large belongs in a .jsonl


def _walk(requests: Any, pointer: tuple[Any, ...], block_size: int, lane: str, counter: list[int],
          out: list[tuple[float, int, TraceTurn]]) -> None:
    if not isinstance(requests, list):
        raise FieldProblem("requests", "must be a list of request objects", pointer[:-1])
    for i, req in enumerate(requests):
        here = (*pointer, i)
        if not isinstance(req, dict):
            raise FieldProblem("requests", f"entry {i} must be an object, got {type(req).__name__}", pointer)
        kind = req.get("type", "n")
        if kind == "subagent":
            counter[0] += 1
            _walk(req.get("requests"), (*here, "requests"), block_size, f"sa{counter[0]}", counter, out)
            continue
        if kind not in NORMAL_TYPES:
            raise FieldProblem("type", f"unknown request type {kind!r}; expected 'n' or 'subagent'", here)
        t = get_float(req, "t", required=True, pointer=here)
        n_in = get_int(req, "in", minimum=1, pointer=here)
        n_out = get_int(req, "out", minimum=0, pointer=here)
        assert t is not None and n_in is not None and n_out is not None
        turn = TraceTurn(
            t=t, input_tokens=n_in, output_tokens=n_out,
            hash_ids=get_hash_ids(req, "hash_ids", n_in, block_size, here),
            think_s=get_float(req, "think_time", pointer=here),
            api_s=get_float(req, "api_time", pointer=here),
            lane=lane,
        )
        out.append((t, len(out), turn))


def parse_session(doc: Any, key: str, block_size: int | None = None) -> TraceSession:
    """One session document into a TraceSession (raises FieldProblem)."""
    if not isinstance(doc, dict) or "requests" not in doc:
        raise FieldProblem("requests", "missing; an AgentX session is an object with a 'requests' list")
    bs = check_block_size(doc.get("block_size", block_size or DEFAULT_BLOCK_SIZE))
    if block_size is not None:
        bs = block_size
    scope = doc.get("hash_id_scope", "local")
    if scope not in ("local", "global"):
        raise FieldProblem("hash_id_scope", f"must be 'local' or 'global', got {scope!r}")
    rows: list[tuple[float, int, TraceTurn]] = []
    _walk(doc["requests"], ("requests",), bs, "", [0], rows)
    rows.sort(key=lambda r: (r[0], r[1]))
    return TraceSession(key=str(doc.get("id") or key), turns=tuple(r[2] for r in rows), block_size=bs, scope=scope)


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix in (".json", ".jsonl") and p.is_file())
        if not files:
            raise TraceError(path, None, None, "folder holds no .json or .jsonl AgentX session files")
        return files
    return [path]


def read_agentx(path: Path, block_size: int | None = None) -> list[TraceSession]:
    """Every session in ``path`` (a .json session, a .jsonl of sessions, or a folder of them)."""
    sessions: list[TraceSession] = []
    for file in _files(path):
        if file.suffix == ".jsonl":
            with file.open(encoding="utf-8") as f:
                for lineno, line in lines(f, file):
                    if not line.strip():
                        continue
                    doc = decode_json(line, file, lineno)
                    try:
                        sessions.append(parse_session(doc, f"{file.stem}#{lineno}", block_size))
                    except FieldProblem as p:
                        raise TraceError(file, lineno, p.field, p.problem) from None
        else:
            if file.stat().st_size > MAX_JSON_BYTES:
                raise TraceError(file, None, None, f"over {MAX_JSON_BYTES >> 20} MiB; write a corpus as .jsonl "
                                                   "(one session per line)")
            text = file.read_text(encoding="utf-8")
            doc = decode_json(text, file)
            try:
                sessions.append(parse_session(doc, file.stem, block_size))
            except FieldProblem as p:
                raise TraceError(file, json_line(text, p.pointer), p.field, p.problem) from None
    return sessions
