"""Markers every folder shares: Ray and browser tests are slow too, so ``pytest -m "not slow"`` skips them."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("ray") or item.get_closest_marker("browser"):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def emu():
    """The default emulator (h200, llama-3.1-8b), as `scoville sweep` without --url would start it: one child
    process on a free loopback port for the whole session, shared by tests/emulator and tests/client."""
    from scoville.emulator.launch import spawn_emulator

    with spawn_emulator("h200", "llama-3.1-8b") as handle:
        yield handle
