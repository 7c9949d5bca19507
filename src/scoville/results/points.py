"""One row of ``points.parquet``: the metrics of one load point, as a typed record.

``PointMetrics`` names every column any writer puts in ``points.parquet`` (``metrics.point_metrics`` and
``metrics.run_metrics`` for measured and replayed runs, ``sim.analytic.point_row`` for analytic predictions,
``server_metrics.point_server_columns``, ``validity``), so the file's Arrow types are computed from it
(``POINTS_SCHEMA``, as ``RECORD_SCHEMA`` is from ``RequestRecord``) instead of being guessed from the values.

What is on disk did not change with the type: a file holds the columns its rows set, in the order they set them
(a run without server samples has no ``server_*`` columns; a steady-state estimate writes its empty tails), each
column in its ``POINTS_SCHEMA`` type. Older files (fewer columns) read with the missing ones as None; a column
this version does not know (written by a newer scoville, or added by hand) is left out of the typed rows: the
file keeps it, and the DuckDB catalog, which reads the files as they are, still shows it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec
import numpy as np
import pyarrow as pa

from scoville.results.schema import arrow_schema


class InvalidReason(msgspec.Struct, kw_only=True):
    """Why a measured point is not to be trusted (``validity.Reason``): a short code and the evidence."""

    code: str
    detail: str


class PointMetrics(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The metrics of one load point (docs/architecture.md, section 5); a column a point lacks is None.

    Latency summaries come as ``<name>_mean`` / ``_median`` / ``_p90`` / ``_p99`` (seconds; ``tok_s_user`` in
    tokens per second per user); ``<figure>_lo`` / ``_hi`` bound a figure, ``band_kind`` says how (bootstrap over
    requests, or the simulator's prediction band). ``forbid_unknown_fields``: a writer cannot put a column in the
    file that is not declared here, so the schema and the writers cannot drift apart.
    """

    # Field order is POINTS_SCHEMA's column order; a file orders its columns as its writer set them.
    # The load
    point: int | None = None
    label: str | None = None
    concurrency: int | None = None
    rate: float | None = None
    repeat: int | None = None                  # --repeats: the repeat's number, and the load it repeats ("c=4")
    load: str | None = None
    config: str | None = None                  # simulated: the deployment of this point, as sorted JSON
    fidelity: str | None = None                # "analytic" for a steady-state estimate
    # How it was counted
    compat: str | None = None
    num_requests: int | None = None
    num_ok: int | None = None
    num_errors: int | None = None
    accelerators: int | None = None
    power_source: str | None = None
    power_boundary: str | None = None
    # Latency, per request
    ttft_s_mean: float | None = None
    ttft_s_median: float | None = None
    ttft_s_p90: float | None = None
    ttft_s_p99: float | None = None
    tpot_s_mean: float | None = None
    tpot_s_median: float | None = None
    tpot_s_p90: float | None = None
    tpot_s_p99: float | None = None
    itl_s_mean: float | None = None
    itl_s_median: float | None = None
    itl_s_p90: float | None = None
    itl_s_p99: float | None = None
    e2e_s_mean: float | None = None
    e2e_s_median: float | None = None
    e2e_s_p90: float | None = None
    e2e_s_p99: float | None = None
    tok_s_user_mean: float | None = None
    tok_s_user_median: float | None = None
    tok_s_user_p90: float | None = None
    tok_s_user_p99: float | None = None
    interactivity: float | None = None
    interactivity_estimator: str | None = None
    # Bands: bootstrap intervals over requests (measured), the prediction band (analytic)
    ttft_s_median_lo: float | None = None
    ttft_s_median_hi: float | None = None
    ttft_s_p90_lo: float | None = None
    ttft_s_p90_hi: float | None = None
    tpot_s_median_lo: float | None = None
    tpot_s_median_hi: float | None = None
    tpot_s_p90_lo: float | None = None
    tpot_s_p90_hi: float | None = None
    e2e_s_median_lo: float | None = None
    e2e_s_median_hi: float | None = None
    e2e_s_p90_lo: float | None = None
    e2e_s_p90_hi: float | None = None
    interactivity_lo: float | None = None
    interactivity_hi: float | None = None
    total_throughput_per_accelerator_lo: float | None = None
    total_throughput_per_accelerator_hi: float | None = None
    output_throughput_per_accelerator_lo: float | None = None
    output_throughput_per_accelerator_hi: float | None = None
    total_throughput_per_kw_lo: float | None = None
    total_throughput_per_kw_hi: float | None = None
    output_throughput_per_kw_lo: float | None = None
    output_throughput_per_kw_hi: float | None = None
    ttft_s_lo: float | None = None
    ttft_s_hi: float | None = None
    sigma: float | None = None                 # analytic: the estimate's log-space spread
    band_kind: str | None = None
    # Prompt cache
    cached_tokens: float | None = None
    cache_hit_rate: float | None = None
    # Reasoning models (token_metrics): time to the first answer token, and the split of the output
    ttfot_s_mean: float | None = None
    ttfot_s_median: float | None = None
    ttfot_s_p90: float | None = None
    ttfot_s_p99: float | None = None
    reasoning_tokens_mean: float | None = None
    content_tokens_mean: float | None = None
    # --tokenizer: the server's token counts against the local ones
    input_tokens_mismatch: float | None = None
    input_tokens_diff_mean: float | None = None
    input_tokens_diff_max_abs: float | None = None
    output_tokens_mismatch: float | None = None
    output_tokens_diff_mean: float | None = None
    output_tokens_diff_max_abs: float | None = None
    # Throughput, power and price
    window_start_s: float | None = None
    window_end_s: float | None = None
    window_s: float | None = None
    request_throughput: float | None = None
    energy_j: float | None = None
    output_throughput: float | None = None
    total_throughput: float | None = None
    output_throughput_per_accelerator: float | None = None
    total_throughput_per_accelerator: float | None = None
    power_w: float | None = None
    output_throughput_per_kw: float | None = None
    total_throughput_per_kw: float | None = None
    joules_per_output_token: float | None = None
    usd_per_mtok_total: float | None = None
    usd_per_mtok_output: float | None = None
    # SLOs (--slo)
    goodput: float | None = None
    slo_attainment: float | None = None
    # The server's own view (its Prometheus /metrics over the point) and the client's beside it
    server_engine: str | None = None
    server_scrapes: int | None = None
    server_window_s: float | None = None
    server_requests: int | None = None
    server_ttft_s_mean: float | None = None
    server_itl_s_mean: float | None = None
    server_tpot_s_mean: float | None = None
    server_e2e_s_mean: float | None = None
    server_queue_s_mean: float | None = None
    server_prefill_s_mean: float | None = None
    server_running_mean: float | None = None
    server_waiting_mean: float | None = None
    server_kv_usage_mean: float | None = None
    server_kv_usage_max: float | None = None
    server_prefix_hit_rate: float | None = None
    server_preemptions: float | None = None
    server_prompt_tokens: float | None = None
    server_generation_tokens: float | None = None
    client_all_requests: int | None = None
    client_all_ttft_s_mean: float | None = None
    client_all_tpot_s_mean: float | None = None
    client_minus_server_ttft_s: float | None = None
    ttft_gap_large: bool | None = None
    client_server_tpot_ratio: float | None = None
    # Validity (scoville.validity)
    valid: bool | None = None
    invalid_reasons: list[InvalidReason] | None = None
    validity_basis: str | None = None

    @classmethod
    def of(cls, row: Mapping[str, object]) -> PointMetrics:
        """A metrics row as the writers build it, checked against the declared columns and their types.

        NumPy scalars become Python numbers first (msgspec accepts only the built-in types); an undeclared
        column or a value of the wrong type is a ``msgspec.ValidationError`` naming it.
        """
        return msgspec.convert({k: v.item() if isinstance(v, np.generic) else v for k, v in row.items()}, cls)


POINTS_SCHEMA = arrow_schema(PointMetrics)


def points_table(rows: Sequence[Mapping[str, object]]) -> pa.Table:
    """The rows as ``points.parquet`` stores them: the columns any row sets, in the order the rows set them
    (a column only some points have, e.g. no successful request, is null in the others), typed by
    POINTS_SCHEMA. Each row is checked as a ``PointMetrics`` first (``PointMetrics.of``)."""
    points = [msgspec.to_builtins(PointMetrics.of(r)) for r in rows]
    names = list(dict.fromkeys(k for r in rows for k in r))
    return pa.Table.from_pydict({k: [p[k] for p in points] for k in names},
                                schema=pa.schema([POINTS_SCHEMA.field(k) for k in names]))


def conform_points(table: pa.Table) -> pa.Table:
    """A stored points table with its known columns cast to their POINTS_SCHEMA types and unknown ones left out
    (see the module docstring). Raises ``pa.ArrowInvalid``/``pa.ArrowTypeError`` when a column cannot be read
    as its type (a damaged or foreign file); callers name the file."""
    known = [name for name in table.column_names if name in POINTS_SCHEMA.names]
    return pa.Table.from_arrays([table.column(k).cast(POINTS_SCHEMA.field(k).type) for k in known],
                                schema=pa.schema([POINTS_SCHEMA.field(k) for k in known]))


def table_points(table: pa.Table) -> list[PointMetrics]:
    """The typed rows of a conformed points table (``conform_points``)."""
    return [msgspec.convert(r, PointMetrics) for r in table.to_pylist()]
