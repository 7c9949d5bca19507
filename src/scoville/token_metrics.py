"""What a point's output was made of (reasoning or answer) and whether the server counted it as we did.

Two groups of per-point columns, each present only when the records hold what it needs, so a run of a
plain model measured without ``--tokenizer`` gets no empty columns (docs/architecture.md, section 5):

* **Reasoning** (any successful request with ``reasoning_tokens > 0``): ``ttfot_s_*``, the time to the
  first output token of the answer (``t_first_content - t_sent``; TTFT stays the first token of any
  kind), over the requests that got to answer; ``reasoning_tokens_mean`` and ``content_tokens_mean``
  per request.
* **Count check** (any successful request with a local count, ``--tokenizer``): for input and output,
  ``*_tokens_mismatch`` (share of requests whose server count differs from the local one),
  ``*_tokens_diff_mean`` (mean of server minus local) and ``*_tokens_diff_max_abs`` (the largest
  difference either way, in tokens). ``count_check_lines`` says it in words.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from scoville.summary import summarize


def _floats(table: pa.Table, name: str) -> np.ndarray | None:
    """A column as float64 with NaN for nulls; None when the records predate it (schema < 3)."""
    if name not in table.column_names:
        return None
    return table.column(name).to_numpy(zero_copy_only=False).astype(float)


def reasoning_metrics(ok: pa.Table) -> dict[str, Any]:
    """TTFOT and the reasoning/answer split of successful requests; {} when none reasoned."""
    reasoning = _floats(ok, "reasoning_tokens")
    first_content = _floats(ok, "t_first_content")
    if reasoning is None or first_content is None or not np.any(reasoning > 0):
        return {}
    known = ~np.isnan(reasoning)
    out = ok.column("output_tokens").to_numpy(zero_copy_only=False).astype(float)
    row = summarize(first_content - ok.column("t_sent").to_numpy(zero_copy_only=False), "ttfot_s")
    row["reasoning_tokens_mean"] = float(reasoning[known].mean())
    row["content_tokens_mean"] = float((out[known] - reasoning[known]).mean())
    return row


def count_check_metrics(ok: pa.Table) -> dict[str, Any]:
    """Server usage against the ``--tokenizer`` counts, for input and output; {} without local counts."""
    row: dict[str, Any] = {}
    for kind in ("input", "output"):
        local = _floats(ok, f"{kind}_tokens_local")
        if local is None:
            continue
        known = ~np.isnan(local)
        if not known.any():
            continue
        diff = ok.column(f"{kind}_tokens").to_numpy(zero_copy_only=False).astype(float)[known] - local[known]
        row[f"{kind}_tokens_mismatch"] = float(np.mean(diff != 0))
        row[f"{kind}_tokens_diff_mean"] = float(diff.mean())
        row[f"{kind}_tokens_diff_max_abs"] = float(np.abs(diff).max())
    return row


def token_metrics(ok: pa.Table) -> dict[str, Any]:
    """Both groups for ``metrics.point_metrics`` (successful measured requests only)."""
    return {**reasoning_metrics(ok), **count_check_metrics(ok)}


def count_check_lines(rows: list[dict[str, Any]]) -> list[str]:
    """One warning per point and direction whose server counts differ from the local tokenizer's."""
    lines = []
    for r in rows:
        for kind in ("input", "output"):
            share = r.get(f"{kind}_tokens_mismatch")
            if not share:
                continue
            mean, worst = r[f"{kind}_tokens_diff_mean"], r[f"{kind}_tokens_diff_max_abs"]
            lines.append(f"point {r.get('label', r.get('point'))}: the server's {kind} token counts differ from "
                         f"--tokenizer's on {share:.0%} of requests (server minus local: mean {mean:+.3g}, "
                         f"at most {worst:.0f} apart)")
    return lines
