"""Emulator servers for the tests: real child processes on free loopback ports (spawn_emulator)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from scoville.emulator.launch import EmulatorHandle, spawn_emulator

API_KEY = "test-key-123"


@pytest.fixture(scope="session")
def emu() -> Iterator[EmulatorHandle]:
    """The default system (h200, llama-3.1-8b), as `scoville sweep` without --url would start it."""
    with spawn_emulator("h200", "llama-3.1-8b") as handle:
        yield handle


@pytest.fixture(scope="session")
def tight_emu() -> Iterator[EmulatorHandle]:
    """One sequence at a time, a queue of one, prefix caching, an API key, a short KV cache."""
    config = {"max_num_seqs": 1, "enable_prefix_caching": True, "kv_capacity_tokens": 4096}
    with spawn_emulator("h200", "llama-3.1-8b", config, api_key=API_KEY, max_queue=1,
                        served_model_name="tiny") as handle:
        yield handle


def run(coro):
    return asyncio.run(coro)
