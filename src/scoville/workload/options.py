"""What to send, as a typed spec: the one description ``sweep``, ``run``, ``simulate`` and the Python API
share (``--scenario``, ``--isl``/``--osl``, ``--trace`` and its options on the command line).

The spec only validates and carries choices; ``WorkloadSpec.resolve`` calls the same ``resolve_workload``
every command uses, so the CLI and the API cannot drift. Its partner for how hard is ``load.LoadSpec``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from scoville.spec import Spec
from scoville.workload.scenarios import resolve_workload


class WorkloadSpec(Spec):
    """The requests: an InferenceX scenario or custom lengths, a session scenario, or a trace to replay."""

    scenario: str | None = Field(None, description="1k1k, 1k8k, 8k1k or a session scenario (`scoville scenarios`)")
    isl: int | None = Field(None, ge=1, description="input tokens per request (max of the range)")
    osl: int | None = Field(None, ge=1, description="output tokens per request (max of the range)")
    range_ratio: float | None = Field(None, ge=0, le=1, description="lengths uniform on [ratio·L, L]; 0.8 InferenceX")
    trace: Path | None = None
    trace_format: Literal["agentx", "mooncake", "azure", "scoville"] | None = None
    time_scale: float | None = Field(None, gt=0)
    sample: float | None = Field(None, gt=0, le=1)
    max_sessions: int | None = Field(None, ge=1)
    idle_gap_cap: float | None = Field(None, ge=0)
    replay: Literal["timed", "agentx"] | None = None
    trace_block_size: int | None = Field(None, ge=1)
    think_scale: float | None = Field(None, ge=0)

    def trace_kwargs(self) -> dict[str, Any]:
        """The trace and session options that were given, as ``resolve_workload`` keywords (so defaults hold)."""
        options = {"time_scale": self.time_scale, "sample": self.sample, "max_sessions": self.max_sessions,
                   "idle_gap_cap_s": self.idle_gap_cap, "replay": self.replay, "block_size": self.trace_block_size,
                   "think_scale": self.think_scale, "trace": self.trace, "trace_format": self.trace_format}
        return {k: v for k, v in options.items() if v is not None}

    def resolve(self, *, seed: int, default_scenario: str | None = None) -> Any:
        """The workload object; ``default_scenario`` when nothing names one (``simulate``: 8k1k)."""
        named = self.scenario or self.isl or self.osl or self.trace
        return resolve_workload(self.scenario if named else default_scenario, isl=self.isl, osl=self.osl,
                                range_ratio=self.range_ratio, seed=seed, **self.trace_kwargs())
