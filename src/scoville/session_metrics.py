"""Session- and cache-aware metrics: what multi-turn and agentic runs are judged by.

Computed from a run's request table (``scoville.results.store.read_requests``)
using its ``session_id`` and ``turn`` columns, vectorised over Arrow/NumPy, for
measured and simulated runs alike. Warm-up requests (including a replay's
cache-priming requests) are excluded; failed requests are excluded from
latencies and make their session count as failed.

Definitions (beyond docs/architecture.md's per-request TTFT, TPOT, E2E):

* per turn: TTFT/TPOT/E2E distributions of all requests with the same turn index;
* per session: each session's mean TTFT/TPOT/E2E, then their distribution;
* session completion time: last turn's ``t_done`` minus first turn's ``t_sent``
  (think and tool time included), over sessions whose every turn succeeded;
* E2E-normalised interactivity (AgentX's headline):
  ``1 / P90(E2E / output_tokens)`` — tokens/s a user gets, counting the wait for
  the first token, at the 90th-percentile request;
* prefix-cache hit rate: ``sum(cached_tokens) / sum(input_tokens)`` over the
  requests whose server reported ``cached_tokens`` (the fraction reported is
  given beside it; ``None`` when none did);
* throughput per accelerator over the measured window (first send to last
  finish): output, input computed (not from cache), input served from cache,
  and total tokens/s.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from scoville.latency import request_tpot
from scoville.metrics import cache_hit_rate
from scoville.results.manifest import Manifest
from scoville.results.store import read_manifest, read_requests
from scoville.summary import summarize


def _col(table: pa.Table, name: str) -> np.ndarray:
    return table.column(name).to_numpy(zero_copy_only=False).astype(float)


def measured_ok(requests: pa.Table) -> tuple[pa.Table, pa.Table]:
    """(measured requests, the successful ones); measured = not warm-up."""
    measured = requests.filter(pc.invert(pc.fill_null(requests.column("warmup"), False)))
    return measured, measured.filter(pc.fill_null(measured.column("ok"), False))


def with_latencies(ok: pa.Table) -> pa.Table:
    """``ok`` plus session key and per-request ttft_s, tpot_s (null for 1-token replies), e2e_s."""
    t_sent, t_first, t_done = _col(ok, "t_sent"), _col(ok, "t_first_token"), _col(ok, "t_done")
    out_tok = _col(ok, "output_tokens")
    tpot = request_tpot(t_first, t_done, out_tok)
    key = pc.coalesce(ok.column("session_id"), ok.column("request_id"))
    cached = ok.column("cached_tokens")
    return ok.append_column("session_key", key) \
        .append_column("ttft_s", pa.array(t_first - t_sent)) \
        .append_column("tpot_s", pa.array(tpot, mask=np.isnan(tpot))) \
        .append_column("e2e_s", pa.array(t_done - t_sent)) \
        .append_column("cached_known", pc.invert(pc.is_null(cached))) \
        .append_column("cached_or_zero", pc.fill_null(cached, 0))


def turn_metrics(requests: pa.Table) -> list[dict[str, Any]]:
    """One row per turn index: request count, TTFT/TPOT/E2E summaries, mean input, cache hit rate."""
    _, ok = measured_ok(requests)
    if ok.num_rows == 0:
        return []
    t = with_latencies(ok)
    turns = t.column("turn").to_numpy(zero_copy_only=False)
    order = np.argsort(turns, kind="stable")
    uniq, starts = np.unique(turns[order], return_index=True)
    bounds = np.append(starts, order.size)
    cols = {name: _col(t, name)[order] for name in ("ttft_s", "tpot_s", "e2e_s", "input_tokens", "cached_or_zero")}
    known = t.column("cached_known").to_numpy(zero_copy_only=False)[order]
    rows = []
    for turn, lo, hi in zip(uniq.tolist(), bounds[:-1], bounds[1:], strict=True):
        row: dict[str, Any] = {"turn": int(turn), "requests": int(hi - lo)}
        for name in ("ttft_s", "tpot_s", "e2e_s"):
            row.update(summarize(cols[name][lo:hi], name))
        row["input_tokens_mean"] = float(cols["input_tokens"][lo:hi].mean())
        k = known[lo:hi]
        row["cache_hit_rate"] = cache_hit_rate(cols["cached_or_zero"][lo:hi][k], cols["input_tokens"][lo:hi][k]) \
            if k.any() else None
        rows.append(row)
    return rows


def session_table(requests: pa.Table) -> pa.Table:
    """One row per session (measured turns only): turns, start, end, completion, tokens, hit rate, mean latencies."""
    measured, ok = measured_ok(requests)
    if ok.num_rows == 0:
        return pa.table({"session_id": pa.array([], pa.string())})
    t = with_latencies(ok)
    grouped = t.group_by("session_key").aggregate([
        ("turn", "count"), ("t_sent", "min"), ("t_done", "max"), ("input_tokens", "sum"),
        ("output_tokens", "sum"), ("cached_or_zero", "sum"), ("ttft_s", "mean"), ("tpot_s", "mean"),
        ("e2e_s", "mean"),
    ])
    known = t.filter(t.column("cached_known")).group_by("session_key").aggregate(
        [("cached_or_zero", "sum"), ("input_tokens", "sum")])
    failed = measured.filter(pc.invert(pc.fill_null(measured.column("ok"), False)))
    failed_keys = pc.coalesce(failed.column("session_id"), failed.column("request_id"))
    g_keys = grouped.column("session_key")
    k_idx = pc.index_in(g_keys, value_set=known.column("session_key"))
    k_cached = pc.take(known.column("cached_or_zero_sum"), k_idx).to_numpy(zero_copy_only=False).astype(float)
    k_input = pc.take(known.column("input_tokens_sum"), k_idx).to_numpy(zero_copy_only=False).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        hit = np.where(k_input > 0, k_cached / k_input, np.nan)
    start, end = _col(grouped, "t_sent_min"), _col(grouped, "t_done_max")
    return pa.table({
        "session_id": g_keys,
        "turns": grouped.column("turn_count"),
        "t_start": start,
        "t_end": end,
        "completion_s": end - start,
        "input_tokens": grouped.column("input_tokens_sum"),
        "cached_tokens": grouped.column("cached_or_zero_sum"),
        "output_tokens": grouped.column("output_tokens_sum"),
        "cache_hit_rate": pa.array(hit, mask=np.isnan(hit)),
        "ttft_s_mean": grouped.column("ttft_s_mean"),
        "tpot_s_mean": grouped.column("tpot_s_mean"),
        "e2e_s_mean": grouped.column("e2e_s_mean"),
        "failed": pc.is_in(g_keys, value_set=failed_keys),
    })


def session_metrics(requests: pa.Table, *, accelerators: int = 1) -> dict[str, Any]:
    """Every session- and cache-aware metric of one load point (see the module docstring)."""
    measured, ok = measured_ok(requests)
    row: dict[str, Any] = {"num_requests": measured.num_rows, "num_ok": ok.num_rows, "accelerators": accelerators}
    if ok.num_rows == 0:
        return row
    t = with_latencies(ok)
    sessions = session_table(requests)
    complete = sessions.filter(pc.invert(sessions.column("failed")))
    keys = pc.coalesce(measured.column("session_id"), measured.column("request_id"))
    failed = pc.filter(keys, pc.invert(pc.fill_null(measured.column("ok"), False)))
    row["num_sessions"] = len(pc.unique(keys))
    row["num_sessions_failed"] = len(pc.unique(failed))
    row["turns_per_session_mean"] = float(_col(sessions, "turns").mean())
    row.update(summarize(_col(complete, "completion_s"), "session_completion_s"))
    for name in ("ttft_s", "tpot_s", "e2e_s"):
        row.update(summarize(_col(t, name), name))
        row.update(summarize(_col(sessions, f"{name}_mean"), f"session_{name}"))
    out_tok, in_tok = _col(t, "output_tokens"), _col(t, "input_tokens")
    e2e_per_token = _col(t, "e2e_s") / np.maximum(out_tok, 1)
    p90 = float(np.percentile(e2e_per_token, 90))
    row["e2e_per_output_token_p90_s"] = p90
    row["interactivity_e2e"] = 1.0 / p90 if p90 > 0 else None
    row["interactivity_e2e_estimator"] = "1/p90(E2E/output_tokens)"
    known = t.column("cached_known").to_numpy(zero_copy_only=False)
    cached = _col(t, "cached_or_zero")
    row["cached_tokens_reported_fraction"] = float(known.mean())
    row["cached_tokens"] = float(cached[known].sum())
    row["cache_hit_rate"] = cache_hit_rate(cached[known], in_tok[known]) if known.any() else None
    t_start, t_end = float(_col(t, "t_sent").min()), float(_col(t, "t_done").max())
    window = t_end - t_start
    row.update(window_start_s=t_start, window_end_s=t_end, window_s=window)
    if window > 0:
        n = max(accelerators, 1)
        in_cached = float(cached.sum())
        row["output_tok_s_per_accelerator"] = float(out_tok.sum()) / window / n
        row["input_computed_tok_s_per_accelerator"] = (float(in_tok.sum()) - in_cached) / window / n
        row["input_cached_tok_s_per_accelerator"] = in_cached / window / n
        row["total_tok_s_per_accelerator"] = (float(in_tok.sum()) + float(out_tok.sum())) / window / n
    return row


def run_session_metrics(run_dir: Path) -> list[dict[str, Any]]:
    """session_metrics of every load point of a run (see :func:`points_session_metrics`)."""
    return points_session_metrics(read_manifest(run_dir), read_requests(run_dir))


def points_session_metrics(manifest: Manifest, requests: pa.Table) -> list[dict[str, Any]]:
    """session_metrics of every load point in ``requests``, with each point's accelerator count.

    As in ``scoville.metrics``: a point's own count (the simulator's per-point
    winning configuration) wins over the manifest's system size.
    """
    system_size = manifest.system.accelerators or 1
    per_point = {p.index: p.accelerators for p in manifest.load_plan.points}
    rows = []
    for point in sorted(set(requests.column("point").to_pylist())):
        subset = requests.filter(pc.equal(requests.column("point"), point))
        accelerators = int(per_point.get(point) or system_size)
        rows.append({"point": point, **session_metrics(subset, accelerators=accelerators)})
    return rows
