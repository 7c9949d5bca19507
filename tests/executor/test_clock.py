"""Clock offsets: NTP-style estimate from the minimum-round-trip ping."""

from __future__ import annotations

import time

from scoville.executor.clock import estimate_offset, measure_offset


def test_estimate_uses_the_fastest_round_trip():
    true_offset = 100.0
    # (t_a, worker reading, t_b): slow, asymmetric samples and one fast one.
    samples = [
        (0.0, 0.009 + true_offset, 0.010),   # reply delayed on the way back
        (1.0, 1.001 + true_offset, 1.012),   # delayed on the way out
        (2.0, 2.0001 + true_offset, 2.0002),  # fastest: decides
    ]
    sync = estimate_offset(samples)
    assert sync.rtt == samples[2][2] - samples[2][0]
    assert abs(sync.offset - true_offset) <= sync.error_bound
    assert sync.samples == 3


def test_measured_offset_is_within_half_the_round_trip():
    shift = 12345.678
    sync = measure_offset(lambda: time.perf_counter() + shift, pings=5)
    # The remote reading happens between t_a and t_b, so the error bound is exact.
    assert abs(sync.offset - shift) <= sync.error_bound + 1e-9
