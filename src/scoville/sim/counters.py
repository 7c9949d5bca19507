"""Cumulative counters of one simulated instance, the figures a vLLM server exports (Prometheus-style, never
reset); ``SimEngine.stats`` and ``SimEngine.counters`` sum them over instances."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(slots=True)
class InstanceCounters:
    """What one instance has done so far; the scheduler and its KV manager add to it as they act."""

    prompt_tokens: int = 0
    generation_tokens: int = 0
    prefix_queries: int = 0
    prefix_hits: int = 0
    preemptions: int = 0
    recomputed_tokens: int = 0
    swapped_out_blocks: int = 0
    host_hit_tokens: int = 0
    steps: int = 0

    def as_dict(self) -> dict[str, int]:
        """The counters by name, in declaration order (what the engine sums over instances)."""
        return asdict(self)
