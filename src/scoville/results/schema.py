"""The run schema shared by every driver (real client, simulator, Ray workers).

One request record per finished (or failed) request. Measured and simulated runs
write exactly these fields, so nothing downstream can tell them apart except the
manifest's ``source``. Times are seconds on a monotonic clock relative to the
run start (``t = 0`` when the run directory was created).
"""

from __future__ import annotations

from typing import Annotated

import msgspec
import msgspec.inspect
import pyarrow as pa

# 2: records carry ``attempt`` (which writer session measured them) and ``error_kind``.
# 3: ``t_first_content`` and ``reasoning_tokens`` (reasoning models), ``output_tokens_requested``, and the
#    local tokenizer's counts ``input_tokens_local`` / ``output_tokens_local`` (``--tokenizer``).
SCHEMA_VERSION = 3

# How a run's metrics are defined (its manifest's ``compat``; scoville.metrics has both definitions): the run
# schema's own vocabulary, so the catalog can check a manifest without importing the metrics.
COMPAT_MODES = ("inferencex", "clean")

# The largest count a record stores: token and chunk counts go to int32 Arrow columns, so a
# server reporting 2**64 - 1 tokens must be refused when parsed, not crash compaction later.
MAX_COUNT = 2**31 - 1
_INT32 = {"arrow": "int32"}  # Meta.extra: the column is int32 on disk (every other int column is int64)
Count = Annotated[int, msgspec.Meta(ge=0, le=MAX_COUNT)]
ChunkTokens = Annotated[int, msgspec.Meta(ge=0, le=MAX_COUNT, extra=_INT32)]
Index = Annotated[int, msgspec.Meta(ge=-MAX_COUNT, le=MAX_COUNT, extra=_INT32)]

# ``error_kind`` says what failed, for summaries and stop rules (``error`` keeps the server's words):
# connect (nothing answered), timeout, disconnect (the connection broke mid-response),
# http (a non-200 status), protocol (not HTTP), stream (bad SSE, an error event, an
# unfinished stream), client (this client failed on this request).


class RequestRecord(msgspec.Struct, kw_only=True):
    """What happened to one request.

    ``token_times[i]`` is the arrival time of the i-th streamed chunk and
    ``token_counts[i]`` how many tokens it carried, so a chunk of k tokens counts as
    k tokens at its arrival (docs/architecture.md, ITL). ``warmup`` records are kept on disk
    but excluded from every metric.
    """

    # Field order is column order on disk (``RECORD_SCHEMA`` is derived from this class).
    point: Index
    request_id: str
    session_id: str | None = None
    turn: Index = 0
    t_sent: float
    t_first_token: float | None = None
    t_done: float | None = None
    token_times: list[float] = []
    token_counts: list[ChunkTokens] = []
    input_tokens: Count = 0
    output_tokens: Count = 0
    cached_tokens: Count | None = None
    ok: bool = True
    error: str | None = None
    http_status: Index | None = None
    warmup: bool = False
    worker: str | None = None
    token_count_source: str = "server"
    # schema 2
    attempt: Index = 0
    error_kind: str | None = None
    # schema 3
    input_tokens_requested: Count | None = None
    output_tokens_requested: Count | None = None
    t_first_content: float | None = None       # first answer (not reasoning) token; see client.sse
    reasoning_tokens: Count | None = None      # of output_tokens; None where nothing was recorded (old runs, sims)
    input_tokens_local: Count | None = None    # the prompt counted by --tokenizer
    output_tokens_local: Count | None = None   # the streamed text counted by --tokenizer


def _arrow_type(t: msgspec.inspect.Type) -> pa.DataType:
    """The Arrow column type of one field type: optional fields are nullable columns of their type, a nested
    record (``PointMetrics.invalid_reasons``) a struct column."""
    if isinstance(t, msgspec.inspect.UnionType):
        (inner,) = [u for u in t.types if not isinstance(u, msgspec.inspect.NoneType)]
        return _arrow_type(inner)
    if isinstance(t, msgspec.inspect.Metadata):
        return pa.int32() if (t.extra or {}).get("arrow") == "int32" else _arrow_type(t.type)
    if isinstance(t, msgspec.inspect.ListType):
        return pa.list_(_arrow_type(t.item_type))
    if isinstance(t, msgspec.inspect.StructType):
        return pa.struct([(f.encode_name, _arrow_type(f.type)) for f in t.fields])
    simple = {msgspec.inspect.IntType: pa.int64(), msgspec.inspect.FloatType: pa.float64(),
              msgspec.inspect.StrType: pa.string(), msgspec.inspect.BoolType: pa.bool_()}
    if type(t) not in simple:
        raise TypeError(f"no Arrow column type for {t!r}")
    return simple[type(t)]


def arrow_schema(struct: type[msgspec.Struct]) -> pa.Schema:
    """The Arrow schema of a record type, one column per field in field order: the Parquet files and the
    record type cannot drift apart, because the one is computed from the other."""
    info = msgspec.inspect.type_info(struct)
    if not isinstance(info, msgspec.inspect.StructType):
        raise TypeError(f"{struct!r} is not a msgspec Struct")
    return pa.schema([(f.encode_name, _arrow_type(f.type)) for f in info.fields])


# Every stored point has RECORD_SCHEMA (``conform`` fills in what an older run or a driver lacks).
RECORD_SCHEMA = arrow_schema(RequestRecord)
# The columns every driver writes, schema 1's (the simulator builds these directly); those from ``attempt`` on
# came with schemas 2 and 3.
ARROW_SCHEMA = pa.schema(list(RECORD_SCHEMA)[: RECORD_SCHEMA.get_field_index("attempt")])

class PointOutcome(msgspec.Struct, kw_only=True):
    """What one attempt at a load point came to: the manifest's ``point_results[str(point)]``.

    Written when the point ends, so the summary can say how many requests
    failed and why, and readers (``scoville ls``, reports) can flag a point
    that measured nothing or one whose prompts the server had cached.
    """

    point: int
    attempt: int
    t_start: float                                # when the point started, on the run clock
    requests: int                                 # records of this attempt, warm-up included
    ok: int                                       # successful measured (non-warm-up) requests
    failed: int                                   # failed requests, warm-up included
    errors: dict[str, int] = {}                   # failed requests by error_kind
    top_error: str | None = None                  # the most frequent error message
    cached_tokens: int = 0                        # prompt tokens the server reported as cached
    input_tokens: int = 0
    unexpected_cache_hits: bool = False           # cached tokens on a workload whose prompts are all new
    client_cpu_share: float | None = None         # busiest client process's CPU time / wall time (1 = one core)
    steal_share: float | None = None              # host CPU time stolen by the hypervisor over the point

    @property
    def measured_nothing(self) -> bool:
        return self.requests > 0 and self.ok == 0

    @property
    def server_unreachable(self) -> bool:
        """Every request failed to connect: the server is gone, and later points would measure nothing."""
        return self.requests > 0 and self.failed == self.requests and set(self.errors) == {"connect"}


POWER_SCHEMA = pa.schema([("t", pa.float64()), ("device", pa.string()), ("watts", pa.float64())])


def records_to_table(records: list[RequestRecord]) -> pa.Table:
    """Columnar form of records, in RECORD_SCHEMA order."""
    columns = {name: [getattr(r, name) for r in records] for name in RECORD_SCHEMA.names}
    return pa.Table.from_pydict(columns, schema=RECORD_SCHEMA)


def conform(table: pa.Table) -> pa.Table:
    """``table`` in RECORD_SCHEMA: columns an older run or a driver lacks are added as nulls (attempt as 0).

    Raises ``pa.ArrowInvalid``/``pa.ArrowTypeError``/``KeyError`` when a column cannot be
    read as its schema type; callers name the file.
    """
    n = table.num_rows
    columns = []
    for f in RECORD_SCHEMA:
        if f.name in table.column_names:
            columns.append(table.column(f.name).cast(f.type))
        elif f.name == "attempt":
            columns.append(pa.array([0] * n, f.type))
        else:
            columns.append(pa.nulls(n, f.type))
    return pa.Table.from_arrays(columns, schema=RECORD_SCHEMA)


def table_to_records(table: pa.Table) -> list[RequestRecord]:
    """Inverse of records_to_table (tolerates missing optional columns from older runs)."""
    rows = table.to_pylist()
    fields = set(RequestRecord.__struct_fields__)
    return [RequestRecord(**{k: v for k, v in row.items() if k in fields and v is not None}) for row in rows]
