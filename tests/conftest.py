"""Markers and fixtures every folder shares.

``pytest -m "not slow"`` is the fast lane for TDD; ``pytest`` runs everything (CI). A test is marked ``slow``
where it says why, and only for what costs seconds by nature: whole-CLI subprocess runs, a fresh interpreter for an
import check, worker processes that import scoville, full calibration fits and the calibration bench, whole
reports, and the full damaged-run matrix (the fast lane keeps ten cases across the damaged files and kinds of damage).
Ray and browser tests are slow too: this hook marks them, so their own modules need only ``ray`` / ``browser``.
"""

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
