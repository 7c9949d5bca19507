"""The run schema shared by every driver (real client, simulator, Ray workers).

One request record per finished (or failed) request. Measured and simulated runs
write exactly these fields, so nothing downstream can tell them apart except the
manifest's ``source``. Times are seconds on a monotonic clock relative to the
run start (``t = 0`` when the run directory was created).
"""

from __future__ import annotations

from typing import Annotated

import msgspec
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
Count = Annotated[int, msgspec.Meta(ge=0, le=MAX_COUNT)]
Index = Annotated[int, msgspec.Meta(ge=-MAX_COUNT, le=MAX_COUNT)]

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

    point: int
    request_id: str
    t_sent: float
    t_first_token: float | None = None
    t_done: float | None = None
    token_times: list[float] = []
    token_counts: list[Count] = []
    input_tokens: Count = 0
    output_tokens: Count = 0
    cached_tokens: Count | None = None
    ok: bool = True
    error: str | None = None
    http_status: Index | None = None
    session_id: str | None = None
    turn: Index = 0
    warmup: bool = False
    worker: str | None = None
    token_count_source: str = "server"
    attempt: Index = 0
    error_kind: str | None = None
    input_tokens_requested: Count | None = None
    output_tokens_requested: Count | None = None
    t_first_content: float | None = None       # first answer (not reasoning) token; see client.sse
    reasoning_tokens: Count | None = None      # of output_tokens; None where nothing was recorded (old runs, sims)
    input_tokens_local: Count | None = None    # the prompt counted by --tokenizer
    output_tokens_local: Count | None = None   # the streamed text counted by --tokenizer


ARROW_SCHEMA = pa.schema(
    [
        ("point", pa.int32()),
        ("request_id", pa.string()),
        ("session_id", pa.string()),
        ("turn", pa.int32()),
        ("t_sent", pa.float64()),
        ("t_first_token", pa.float64()),
        ("t_done", pa.float64()),
        ("token_times", pa.list_(pa.float64())),
        ("token_counts", pa.list_(pa.int32())),
        ("input_tokens", pa.int64()),
        ("output_tokens", pa.int64()),
        ("cached_tokens", pa.int64()),
        ("ok", pa.bool_()),
        ("error", pa.string()),
        ("http_status", pa.int32()),
        ("warmup", pa.bool_()),
        ("worker", pa.string()),
        ("token_count_source", pa.string()),
    ]
)
# Columns a driver may leave out (the simulator builds ARROW_SCHEMA tables directly): the store
# fills them in (``conform``), so every stored point has RECORD_SCHEMA.
RECORD_SCHEMA = pa.schema([
    *ARROW_SCHEMA,
    pa.field("attempt", pa.int32()),
    pa.field("error_kind", pa.string()),
    pa.field("input_tokens_requested", pa.int64()),
    pa.field("output_tokens_requested", pa.int64()),
    pa.field("t_first_content", pa.float64()),
    pa.field("reasoning_tokens", pa.int64()),
    pa.field("input_tokens_local", pa.int64()),
    pa.field("output_tokens_local", pa.int64()),
])

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
