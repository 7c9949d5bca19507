"""Markers every folder shares: Ray and browser tests are slow too, so ``pytest -m "not slow"`` skips them."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("ray") or item.get_closest_marker("browser"):
            item.add_marker(pytest.mark.slow)
