"""Single-turn synthetic scenarios (InferenceX's 1k1k, 1k8k, 8k1k and custom ISL/OSL).

InferenceX draws each request's input and output length uniformly from
``[range_ratio * L, L]`` with ``range_ratio = 0.8``, so "8k1k" averages about
7.4k input and 0.92k output tokens. ``range_ratio = 1`` gives fixed lengths.
"""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np

from scoville.errors import UserError
from scoville.workload.spec import MAX_REQUEST_TOKENS, RequestSpec, Session


class WorkloadError(UserError, ValueError):
    """A workload the user asked for cannot be built; message is user-facing."""


NAMED_SCENARIOS: dict[str, tuple[int, int]] = {
    "1k1k": (1024, 1024),
    "1k8k": (1024, 8192),
    "8k1k": (8192, 1024),
}
INFERENCEX_RANGE_RATIO = 0.8


class SyntheticWorkload(msgspec.Struct, kw_only=True, frozen=True):
    """Independent single-turn requests with random lengths, reproducible from ``seed``."""

    isl: int
    osl: int
    range_ratio: float = INFERENCEX_RANGE_RATIO
    seed: int = 0
    name: str = "custom"
    kind: str = "synthetic"

    def __post_init__(self) -> None:
        if self.isl < 1 or self.osl < 1:
            raise WorkloadError(f"input and output lengths must be >= 1 token (got isl={self.isl}, osl={self.osl})")
        if max(self.isl, self.osl) > MAX_REQUEST_TOKENS:
            raise WorkloadError(f"--isl and --osl must be <= {MAX_REQUEST_TOKENS:,} tokens "
                                f"(got isl={self.isl}, osl={self.osl})")
        if not 0 < self.range_ratio <= 1:
            raise WorkloadError(f"--range-ratio must be in (0, 1] (got {self.range_ratio})")

    def to_dict(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)

    @property
    def reuses_prefixes(self) -> bool:
        """Every prompt is unique: a server reporting cached tokens had seen them before this run."""
        return False

    def fit_context(self, limit: int) -> SyntheticWorkload:
        """This workload when every request fits ``limit`` tokens (input plus output), else a one-line error."""
        if self.isl + self.osl > limit:
            raise WorkloadError(f"--isl {self.isl} plus --osl {self.osl} exceed the server's {limit}-token context "
                                "window (max_model_len); lower them, or pass --max-model-len if the server's is larger")
        return self

    def lengths(self, count: int, stream: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """Input and output lengths of ``count`` requests, uniform on [ratio·L, L]."""
        rng = np.random.default_rng([self.seed, stream])
        isl = rng.integers(int(np.ceil(self.range_ratio * self.isl)), self.isl + 1, size=count)
        osl = rng.integers(int(np.ceil(self.range_ratio * self.osl)), self.osl + 1, size=count)
        return isl, osl

    def sessions(self, count: int, stream: int = 0) -> list[Session]:
        """``count`` one-turn sessions; ``stream`` separates points (each point its own draw)."""
        isl, osl = self.lengths(count, stream)
        out = []
        for i in range(count):
            rid = f"p{stream}-r{i}"
            spec = RequestSpec(
                request_id=rid,
                input_tokens=int(isl[i]),
                output_tokens=int(osl[i]),
                prompt_seed=(self.seed << 32) ^ (stream << 20) ^ i,
            )
            out.append(Session(session_id=rid, requests=(spec,)))
        return out


def scenario(name: str | None, *, isl: int | None = None, osl: int | None = None,
             range_ratio: float | None = None, seed: int = 0) -> SyntheticWorkload:
    """A named scenario, or a custom one from ``isl``/``osl``."""
    if name is not None and name not in NAMED_SCENARIOS:
        choices = ", ".join(NAMED_SCENARIOS)
        raise WorkloadError(f"unknown scenario {name!r}; choose one of {choices} or give --isl and --osl")
    if name is not None:
        base_isl, base_osl = NAMED_SCENARIOS[name]
        isl, osl = isl or base_isl, osl or base_osl
    elif isl is None or osl is None:
        raise WorkloadError("give --scenario (e.g. 8k1k) or both --isl and --osl")
    ratio = INFERENCEX_RANGE_RATIO if range_ratio is None else range_ratio
    return SyntheticWorkload(isl=isl, osl=osl, range_ratio=ratio, seed=seed, name=name or f"{isl}/{osl}")
