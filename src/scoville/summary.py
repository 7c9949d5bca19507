"""The summary of a per-request distribution that every metrics column uses: mean, median, p90, p99.

Its own module, below ``metrics``, ``token_metrics`` and ``session_metrics``: each of them summarises
distributions the same way (``ttft_s_p90`` in a point row, ``ttfot_s_p90`` for reasoning models,
``session_completion_s_p90`` per session), and none has to import another for it.
"""

from __future__ import annotations

import numpy as np

PERCENTILES = {"median": 50, "p90": 90, "p99": 99}


def summarize(values: np.ndarray, prefix: str) -> dict[str, float | None]:
    """mean, median, p90, p99 of a distribution (None when empty)."""
    values = values[np.isfinite(values)] if values.size else values
    out: dict[str, float | None] = {f"{prefix}_mean": float(values.mean()) if values.size else None}
    for name, q in PERCENTILES.items():
        out[f"{prefix}_{name}"] = float(np.percentile(values, q)) if values.size else None
    return out
