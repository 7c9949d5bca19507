"""Per-request latencies from a request's timestamps: the one definition the metrics rows, the session and
convention tables, the server comparison and the CDF charts share (docs/architecture.md, section 5)."""

from __future__ import annotations

import numpy as np


def request_tpot(t_first: np.ndarray, t_done: np.ndarray, output_tokens: np.ndarray) -> np.ndarray:
    """Each request's TPOT: (last token − first token) / (output tokens − 1); NaN for a reply of fewer than two
    tokens, which has no time between tokens."""
    return np.where(output_tokens > 1, (t_done - t_first) / np.maximum(output_tokens - 1, 1), np.nan)
