"""Speculative decoding (MTP / draft models) as the scheduler sees it: how many tokens a decode step verifies
and how many of them the target model accepts.

Acceptance is geometric (each draft accepted with probability ``accept``, stopping at the first miss), drawn
from the instance's own generator, so a run is reproducible from its seed whatever else happens in the engine.
"""

from __future__ import annotations

import math

import numpy as np

from scoville.sim.request import Req


class Drafts:
    """Draft tokens per decode step and their acceptance; ``drafts == 0`` means plain decoding."""

    def __init__(self, drafts: int, accept: float, rng: np.random.Generator) -> None:
        self.drafts = drafts
        self.accept = accept
        self.rng = rng

    def tokens(self, r: Req) -> int:
        """Tokens a decode step of ``r`` feeds: the last sampled token plus the drafts its remaining output needs."""
        return 1 + min(self.drafts, max(r.target - r.generated - 1, 0))

    def accepted(self, drafts: int) -> int:
        """Tokens one verify step yields: 1 + accepted drafts (each accepted with prob a, stop at first miss)."""
        u = self.rng.random()  # drawn even when the outcome is certain, so the stream does not depend on ``accept``
        if self.accept <= 0.0:
            return 1
        if self.accept >= 1.0:
            return 1 + drafts
        return 1 + min(int(math.log(u) / math.log(self.accept)) if u > 0 else drafts, drafts)

    def accepted_steps(self, steps: int, seqs: int) -> np.ndarray:
        """Tokens each of ``seqs`` sequences yields in each of ``steps`` verify steps (a span's draws at once)."""
        u = self.rng.random((steps, seqs))
        a = self.accept
        if a <= 0.0:
            return np.ones((steps, seqs), dtype=np.int64)
        if a >= 1.0:
            return np.full((steps, seqs), 1 + self.drafts, dtype=np.int64)
        g = np.floor(np.log(np.maximum(u, 1e-300)) / math.log(a)).astype(np.int64)
        return 1 + np.minimum(g, self.drafts)
