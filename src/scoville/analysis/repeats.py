"""The repeats of one load as one point, with bootstrap intervals across the repeats (docs/statistics.md).

``points.parquet`` keeps one row per measured point, so each repeat keeps its
own row (and its intervals over its requests). Frontiers, comparisons and
charts want one point per load: ``aggregate_repeats`` folds the rows that share
a run and a ``load`` into one row whose figures are the mean over the repeats,
each headline figure with a 95 % bootstrap interval that resamples repeats.
Interactivity stays ``1/median(TPOT)``: one over the mean of the repeats'
median TPOTs, with that figure's interval inverted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, TypeGuard

import numpy as np

from scoville.stats import REPEATS_BAND, inverse_interval, mean_interval, new_rng

# Figures that get an interval across repeats (interactivity follows from tpot_s_median).
HEADLINE = (
    "ttft_s_median", "ttft_s_p90", "tpot_s_median", "tpot_s_p90", "e2e_s_median", "e2e_s_p90",
    "output_throughput", "total_throughput", "output_throughput_per_accelerator",
    "total_throughput_per_accelerator", "output_throughput_per_kw", "total_throughput_per_kw",
    "request_throughput", "goodput", "joules_per_output_token", "usd_per_mtok_total", "usd_per_mtok_output",
    "tokens_per_usd_total", "tokens_per_usd_output",
)
SUMMED = ("num_requests", "num_ok", "num_errors", "cached_tokens", "energy_j")   # counts of the whole load
SAME = ("point", "concurrency", "rate", "accelerators")                          # the load itself
DROPPED = ("repeat", "band_kind", "window_start_s", "window_end_s")             # one repeat's, not the load's
VALIDITY = ("valid", "invalid_reasons")    # the load is valid only if every repeat is; it keeps every reason


def _number(v: Any) -> TypeGuard[float]:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def aggregate_repeats(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per load: rows with a ``repeat`` number that share ``run_id`` and ``load`` become one row (at
    the place of the first); every other row is returned as it is."""
    groups: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    order: list[tuple[Any, Any] | dict[str, Any]] = []
    for r in rows:
        if r.get("repeat") is None or r.get("load") is None:
            order.append(r)
            continue
        key = (r.get("run_id"), r["load"])
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(r)
    return [combine_repeats(groups[item]) if isinstance(item, tuple) else item for item in order]


def combine_repeats(repeats: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The row of one load from the rows of its repeats (see the module docstring)."""
    first = repeats[0]
    if len(repeats) == 1:  # one repeat measured so far: its own row, intervals over its requests
        return {**first, "label": first["load"], "repeats": 1, "repeat_points": [first.get("point")]}
    keys = list(dict.fromkeys(k for r in repeats for k in r))
    row: dict[str, Any] = {}
    for key in keys:
        if key in DROPPED or key in VALIDITY or key.endswith(("_lo", "_hi")):
            continue
        values = [r.get(key) for r in repeats]
        numbers = [float(v) for v in values if _number(v)]
        if key in SAME or not any(_number(v) for v in values):
            row[key] = min(numbers) if key == "point" else next((v for v in values if v is not None), None)
        elif key in SUMMED:
            row[key] = sum(numbers)
        else:
            row[key] = float(np.mean(numbers))
    row.update(label=first["load"], repeats=len(repeats), repeat_points=[r.get("point") for r in repeats])
    if any("valid" in r for r in repeats):
        row["valid"] = all(r.get("valid") is not False for r in repeats)
        row["invalid_reasons"] = [reason for r in repeats for reason in (r.get("invalid_reasons") or [])]
    rng = new_rng()
    for key in HEADLINE:
        ci = mean_interval(np.array([r.get(key) if _number(r.get(key)) else np.nan for r in repeats]), rng)
        if ci is not None:
            row[f"{key}_lo"], row[f"{key}_hi"] = ci
    tpot = row.get("tpot_s_median")
    if _number(tpot) and tpot > 0:
        row["interactivity"] = 1.0 / tpot
        row.update(inverse_interval("interactivity", row.get("tpot_s_median_lo"), row.get("tpot_s_median_hi")))
    if any(k.endswith("_lo") for k in row):
        row["band_kind"] = REPEATS_BAND
    return row
