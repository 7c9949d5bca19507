"""The run schema shared by every driver (real client, simulator, Ray workers).

One request record per finished (or failed) request. Measured and simulated runs
write exactly these fields, so nothing downstream can tell them apart except the
manifest's ``source``. Times are seconds on a monotonic clock relative to the
run start (``t = 0`` when the run directory was created).
"""

from __future__ import annotations

import msgspec
import pyarrow as pa

SCHEMA_VERSION = 1


class RequestRecord(msgspec.Struct, kw_only=True):
    """What happened to one request.

    ``token_times[i]`` is the arrival time of the i-th streamed chunk and
    ``token_counts[i]`` how many tokens it carried, so a chunk of k tokens counts as
    k tokens at its arrival (DESIGN.md, ITL). ``warmup`` records are kept on disk
    but excluded from every metric.
    """

    point: int
    request_id: str
    t_sent: float
    t_first_token: float | None = None
    t_done: float | None = None
    token_times: list[float] = []
    token_counts: list[int] = []
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int | None = None
    ok: bool = True
    error: str | None = None
    http_status: int | None = None
    session_id: str | None = None
    turn: int = 0
    warmup: bool = False
    worker: str | None = None
    token_count_source: str = "server"


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

POWER_SCHEMA = pa.schema([("t", pa.float64()), ("device", pa.string()), ("watts", pa.float64())])


def records_to_table(records: list[RequestRecord]) -> pa.Table:
    """Columnar form of records, in ARROW_SCHEMA order."""
    columns = {name: [getattr(r, name) for r in records] for name in ARROW_SCHEMA.names}
    return pa.Table.from_pydict(columns, schema=ARROW_SCHEMA)


def table_to_records(table: pa.Table) -> list[RequestRecord]:
    """Inverse of records_to_table (tolerates missing optional columns from older runs)."""
    rows = table.to_pylist()
    fields = set(RequestRecord.__struct_fields__)
    return [RequestRecord(**{k: v for k, v in row.items() if k in fields and v is not None}) for row in rows]
