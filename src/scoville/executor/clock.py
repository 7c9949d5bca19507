"""Aligning each worker's clock with the coordinator's (NTP-style, min-RTT sample).

Why: ``time.perf_counter`` has an arbitrary origin per machine (and per boot),
so a worker's timestamps mean nothing to the coordinator until the offset
between the two clocks is known. The coordinator sends a ping at ``t_a`` on
its clock, the worker answers with its clock reading ``w``, the answer lands
at ``t_b``; if the reply was read half way, ``offset = w - (t_a + t_b) / 2``
with an error of at most ``(t_b - t_a) / 2``. Of several pings the one with
the smallest round trip bounds the error best, so that is the sample kept.
The worker then stamps records with ``perf_counter() - (t0 + offset)``, which
is the coordinator's run clock directly.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import msgspec


class ClockSync(msgspec.Struct, frozen=True):
    """``offset`` (worker clock minus coordinator clock, s) and its error bound ``rtt / 2``."""

    offset: float
    rtt: float
    samples: int

    @property
    def error_bound(self) -> float:
        return self.rtt / 2


def estimate_offset(samples: list[tuple[float, float, float]]) -> ClockSync:
    """Offset from ``(t_a, w, t_b)`` ping samples, using the minimum-round-trip one."""
    if not samples:
        raise ValueError("clock sync needs at least one ping sample")
    t_a, w, t_b = min(samples, key=lambda s: s[2] - s[0])
    return ClockSync(offset=w - (t_a + t_b) / 2, rtt=t_b - t_a, samples=len(samples))


def measure_offset(read_remote_clock: Callable[[], float], pings: int = 8) -> ClockSync:
    """Ping a worker ``pings`` times through ``read_remote_clock`` (a blocking call) and estimate its offset."""
    perf = time.perf_counter
    samples = []
    for _ in range(pings):
        t_a = perf()
        w = read_remote_clock()
        samples.append((t_a, w, perf()))
    return estimate_offset(samples)
