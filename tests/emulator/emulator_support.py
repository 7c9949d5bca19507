"""Emulator servers for the tests: real child processes on free loopback ports (spawn_emulator).

The default one, ``emu``, lives in tests/conftest.py: tests/client measures it too, and one child serves both."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from scoville.emulator.launch import EmulatorHandle, spawn_emulator
from scoville.sim.engine_api import EngineStats, TokenEvent
from scoville.workload.spec import RequestSpec

API_KEY = "test-key-123"


@pytest.fixture(scope="session")
def tight_emu() -> Iterator[EmulatorHandle]:
    """One sequence at a time, a queue of one, prefix caching, an API key, a short KV cache."""
    config = {"max_num_seqs": 1, "enable_prefix_caching": True, "kv_capacity_tokens": 4096}
    with spawn_emulator("h200", "llama-3.1-8b", config, api_key=API_KEY, max_queue=1,
                        served_model_name="tiny") as handle:
        yield handle


class ScriptedEngine:
    """Each request yields ``tokens`` tokens, one every ``interval`` seconds after it was submitted."""

    def __init__(self, tokens: int, interval: float) -> None:
        self.tokens, self.interval = tokens, interval
        self.pending: list[TokenEvent] = []

    def submit(self, spec: RequestSpec, now: float) -> None:
        self.pending += [TokenEvent(spec.request_id, now + (i + 1) * self.interval, 1, finished=i == self.tokens - 1)
                         for i in range(self.tokens)]
        self.pending.sort(key=lambda e: e.t)

    def cancel(self, request_id: str, now: float) -> None:
        self.pending = [e for e in self.pending if e.request_id != request_id]

    def next_event_time(self) -> float | None:
        return self.pending[0].t if self.pending else None

    def peek(self, until: float) -> list[TokenEvent]:
        return [e for e in self.pending if e.t <= until]

    def advance(self, until: float) -> list[TokenEvent]:
        due = self.peek(until)
        self.pending = self.pending[len(due):]
        return due

    def stats(self) -> EngineStats:
        return EngineStats(running=0, waiting=0, kv_usage=0.0, prompt_tokens_total=0, generation_tokens_total=0)


def run(coro):
    return asyncio.run(coro)
