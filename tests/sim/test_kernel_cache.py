"""The kernel-slice disk cache: hits return what was stored, damage is recomputed, an empty setting turns it off."""

from __future__ import annotations

import numpy as np

from scoville.sim.kernels.cache import cache_dir, cached


def test_a_hit_returns_the_stored_arrays_and_skips_the_work(tmp_path, monkeypatch):
    monkeypatch.setenv("SCOVILLE_CACHE_DIR", str(tmp_path))
    calls = []

    def compute():
        calls.append(1)
        return (np.arange(3.0), np.array([[1.0, 2.0]]))

    first = cached("1.0", "slice|a", compute)
    again = cached("1.0", "slice|a", compute)
    assert len(calls) == 1
    assert all(np.array_equal(x, y) for x, y in zip(first, again, strict=True))
    assert cached("2.0", "slice|a", compute) is not None and len(calls) == 2   # another tables version
    assert cached("1.0", "slice|b", lambda: None) is None                     # nothing to cache


def test_a_damaged_entry_is_recomputed(tmp_path, monkeypatch):
    monkeypatch.setenv("SCOVILLE_CACHE_DIR", str(tmp_path))
    cached("1.0", "k", lambda: (np.ones(2),))
    (entry,) = list((tmp_path / "kernels" / "1.0").glob("*.npz"))
    entry.write_bytes(b"not an npz")
    assert np.array_equal(cached("1.0", "k", lambda: (np.zeros(2),))[0], np.zeros(2))


def test_empty_setting_turns_the_cache_off(tmp_path, monkeypatch):
    monkeypatch.setenv("SCOVILLE_CACHE_DIR", "")
    assert cache_dir("1.0") is None
    calls = []
    for _ in range(2):
        cached("1.0", "k", lambda: calls.append(1) or (np.ones(1),))
    assert len(calls) == 2
