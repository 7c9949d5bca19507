"""What every trace reader produces, and how a malformed trace is reported.

Readers turn a file into ``TraceSession``s: ordered requests with their
recorded arrival time, token counts, prefix block ids and (when the format has
them) think and service times. ``TraceWorkload`` then turns those into the
shared ``Session``/``RequestSpec`` shape. A reader that meets a bad value raises
``TraceError`` naming the file, the line and the field, and saying what a good
value looks like — never a traceback, never a silently skipped request.
"""

from __future__ import annotations

import json
import json.decoder
import json.scanner
import math
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import msgspec

from scoville.workload.spec import MAX_REQUEST_TOKENS
from scoville.workload.synthetic import WorkloadError

# The longest line a JSONL trace may have: a request with a million hash ids is ~10 MB; a file
# without newlines (or a device) is refused instead of read into memory whole.
MAX_LINE_BYTES = 64 << 20


class TraceError(WorkloadError):
    """A trace file cannot be read; the message names file, line and field."""

    def __init__(self, path: Path | str, line: int | None, field: str | None, problem: str) -> None:
        where = f"{path}" + (f":{line}" if line is not None else "")
        what = f" field {field!r}:" if field else ""
        super().__init__(f"{where}:{what} {problem}")
        self.path, self.line, self.field = str(path), line, field


class FieldProblem(Exception):
    """Raised inside a reader before the line is known; ``pointer`` locates the object in a JSON document."""

    def __init__(self, field: str | None, problem: str, pointer: tuple[Any, ...] = ()) -> None:
        super().__init__(problem)
        self.field, self.problem, self.pointer = field, problem, pointer


class TraceTurn(msgspec.Struct, kw_only=True, frozen=True):
    """One recorded request. ``t``: arrival, seconds from the trace start (None when not recorded)."""

    input_tokens: int
    output_tokens: int
    t: float | None = None
    hash_ids: tuple[int, ...] = ()
    think_s: float | None = None   # recorded idle time before this request (tool or user time)
    api_s: float | None = None     # recorded service time of this request
    lane: str = ""                 # "" for a root request, "sa<k>" for subagent k's requests


class TraceSession(msgspec.Struct, kw_only=True, frozen=True):
    """One replayable unit: a conversation, an agent tree (root and subagents) or a single request.

    ``scope`` says how far ``hash_ids`` are shared: ``local`` (one namespace
    per session, AgentX's ``hash_id_scope``) or ``global`` (one namespace per
    file, as in Mooncake traces).
    """

    key: str
    turns: tuple[TraceTurn, ...]
    block_size: int
    scope: str = "global"


# --- field checks (raise FieldProblem; the reader adds file and line) ---------------------------


def get_int(obj: dict[str, Any], key: str, *, minimum: int = 0, required: bool = True,
            pointer: tuple[Any, ...] = (), aliases: tuple[str, ...] = (),
            maximum: int = MAX_REQUEST_TOKENS) -> int | None:
    for k in (key, *aliases):
        if k in obj:
            value = obj[k]
            break
    else:
        if required:
            raise FieldProblem(key, "missing; every request needs it", pointer)
        return None
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or (isinstance(value, float) and not value.is_integer())):
        raise FieldProblem(key, f"must be a whole number of tokens, got {value!r}", pointer)
    if value < minimum:
        raise FieldProblem(key, f"must be >= {minimum}, got {value!r}", pointer)
    if value > maximum:
        raise FieldProblem(key, f"must be <= {maximum:,} tokens, got {value!r}", pointer)
    return int(value)


def get_float(obj: dict[str, Any], key: str, *, required: bool = False, minimum: float | None = 0.0,
              pointer: tuple[Any, ...] = ()) -> float | None:
    if key not in obj or obj[key] is None:
        if required:
            raise FieldProblem(key, "missing; every request needs it", pointer)
        return None
    value = obj[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise FieldProblem(key, f"must be a finite number of seconds, got {value!r}", pointer)
    if minimum is not None and value < minimum:
        raise FieldProblem(key, f"must be >= {minimum:g}, got {value!r}", pointer)
    return float(value)


def get_hash_ids(obj: dict[str, Any], key: str, input_tokens: int, block_size: int,
                 pointer: tuple[Any, ...] = ()) -> tuple[int, ...]:
    value = obj.get(key, [])
    if value is None:
        return ()
    if not isinstance(value, list) or any(isinstance(h, bool) or not isinstance(h, int) or h < 0 for h in value):
        raise FieldProblem(key, "must be a list of non-negative integer block ids", pointer)
    blocks = -(-input_tokens // block_size)
    if len(value) > blocks:
        raise FieldProblem(key, f"has {len(value)} block ids but {input_tokens} input tokens fill only {blocks} "
                                f"blocks of {block_size}; give the trace's real block size (--trace-block-size)",
                           pointer)
    return tuple(value)


def check_block_size(value: Any, field: str = "block_size") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_REQUEST_TOKENS:
        raise FieldProblem(field, f"must be a whole number of tokens from 1 to {MAX_REQUEST_TOKENS:,}, got {value!r}")
    return value


def lines(f: IO[str], path: Path) -> Iterator[tuple[int, str]]:
    """(line number, line) of a text trace, each read with a bound (``MAX_LINE_BYTES``)."""
    lineno = 0
    while line := f.readline(MAX_LINE_BYTES + 1):
        lineno += 1
        if len(line) > MAX_LINE_BYTES:
            raise TraceError(path, lineno, None, f"line longer than {MAX_LINE_BYTES >> 20} MiB; is this a trace?")
        yield lineno, line


# --- locating a JSON value's line (only when reporting an error) --------------------------------


class _PosDict(dict[str, Any]):
    __slots__ = ("pos",)


def _position_decoder() -> json.JSONDecoder:
    """A pure-Python JSON decoder that remembers where each object starts (slow; errors only)."""
    decoder = json.JSONDecoder(object_pairs_hook=_PosDict)
    base = json.decoder.JSONObject  # type: ignore[attr-defined]  # public at runtime, absent from typeshed

    def parse_object(s_and_end: tuple[str, int], *args: Any) -> tuple[Any, int]:
        obj, end = base(s_and_end, *args)
        obj.pos = s_and_end[1] - 1
        return obj, end

    decoder.parse_object = parse_object  # type: ignore[attr-defined]
    decoder.scan_once = json.scanner.py_make_scanner(decoder)  # type: ignore[attr-defined]
    return decoder


def json_line(text: str, pointer: tuple[Any, ...], base_line: int = 1) -> int:
    """Line (1-based, offset by ``base_line - 1``) of the deepest object on ``pointer`` in ``text``."""
    try:
        node: Any = _position_decoder().decode(text)
    except ValueError:
        return base_line
    pos = getattr(node, "pos", 0)
    for step in pointer:
        try:
            node = node[step]
        except (KeyError, IndexError, TypeError):
            break
        pos = getattr(node, "pos", pos)
    return base_line + text.count("\n", 0, pos)


def decode_json(text: str | bytes, path: Path, base_line: int = 1) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise TraceError(path, base_line + e.lineno - 1, None,
                         f"not valid JSON ({e.msg} at column {e.colno})") from None
