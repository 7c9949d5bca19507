"""The contract between the simulated serving engine and what drives it.

Two drivers use one engine, so that ``scoville simulate`` and the emulator's
measured curve agree by construction:

* the simulator's closed/open-loop driver advances virtual time as fast as it
  can (macro-steps between events) and turns emitted tokens into RequestRecords;
* the emulator advances the same engine in step with the wall clock and streams
  each TokenEvent to its HTTP client when it is due.

Times are seconds on the engine's own clock (virtual for the simulator, the
server's monotonic clock for the emulator).
"""

from __future__ import annotations

from typing import Protocol

import msgspec

from scoville.workload.spec import RequestSpec


class TokenEvent(msgspec.Struct, frozen=True):
    """``count`` output tokens of ``request_id`` became available at ``t``."""

    request_id: str
    t: float
    count: int
    finished: bool = False
    cached_tokens: int = 0      # prompt tokens served from the prefix cache (on the first event)
    error: str | None = None    # set when the engine drops the request (e.g. over capacity)


class EngineStats(msgspec.Struct):
    running: int
    waiting: int
    kv_usage: float            # fraction of KV blocks in use, 0..1
    prompt_tokens_total: int
    generation_tokens_total: int
    prefix_cache_queries: int = 0
    prefix_cache_hits: int = 0
    preemptions_total: int = 0


class ServingEngine(Protocol):
    def submit(self, spec: RequestSpec, now: float) -> None:
        """Queue a request that arrives at ``now``."""

    def cancel(self, request_id: str, now: float) -> None:
        """Drop a request (client went away) and free its KV blocks at once."""

    def next_event_time(self) -> float | None:
        """When the next token event will happen if nothing else arrives; None when idle."""

    def advance(self, until: float) -> list[TokenEvent]:
        """Run the engine up to ``until`` and return every token event with ``t <= until``, in time order."""

    def peek(self, until: float) -> list[TokenEvent]:
        """The events with ``t <= until`` that are already fixed (their step has started), without taking them.

        ``advance(until)`` returns them unless a cancel drops them first; the
        emulator renders their chunks ahead of time.
        """

    def stats(self) -> EngineStats:
        """Gauges and counters for Prometheus ``/metrics``."""
