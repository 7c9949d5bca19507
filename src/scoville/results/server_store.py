"""``server_metrics.parquet``: the target server's Prometheus samples, scraped during each load point.

Long form, one row per sample per scrape: ``t`` (run clock, as the request records), ``point``, ``metric``
(the sample name as exposed, e.g. ``vllm:e2e_request_latency_seconds_count``), ``labels`` (sorted JSON) and
``value``. Written per point, atomically, as power.parquet is (the file is rewritten with the point's rows
replaced, so a resumed point never counts twice); ``RunWriter.finish`` hashes it into the manifest with the
other data files. ``scoville.server_metrics`` turns it into per-point columns.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from scoville.results.store import RunError, _write_parquet_atomic

SERVER_METRICS = "server_metrics.parquet"
SERVER_SCHEMA = pa.schema([("t", pa.float64()), ("point", pa.int32()), ("metric", pa.string()),
                          ("labels", pa.string()), ("value", pa.float64())])


def read_server_metrics(run_dir: Path) -> pa.Table:
    """Every stored server sample of a run (an empty table when the run scraped nothing)."""
    path = run_dir / SERVER_METRICS
    if not path.exists():
        return SERVER_SCHEMA.empty_table()
    try:
        return pq.read_table(path).cast(SERVER_SCHEMA)
    except (OSError, pa.ArrowException) as e:
        raise RunError(f"{path}: not a readable server-metrics file ({type(e).__name__}: {str(e)[:120]}); "
                       "move it away and run `scoville recompute` (the server columns will be empty)") from None


def write_server_point(run_dir: Path, point: int, samples: pa.Table) -> None:
    """Store one point's samples, replacing any earlier attempt at that point."""
    existing = read_server_metrics(run_dir)
    if existing.num_rows:
        existing = existing.filter(pc.not_equal(existing.column("point"), point))
    table = pa.concat_tables([existing, samples.cast(SERVER_SCHEMA)])
    _write_parquet_atomic(table, run_dir / SERVER_METRICS)
