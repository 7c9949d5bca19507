"""Cyclic garbage collection in the pacing loop's slack, instead of whenever an allocation count trips.

CPython starts a collection when tracked allocations outnumber deallocations
by a threshold, i.e. at whatever allocation happens next. On the loop that
releases tokens that is usually in the middle of a step's socket writes: a
young collection costs 0.1-0.3 ms there, and a full one 15-25 ms on a warmed-up
server's heap (measured on the emulator serving 64 streams), which stalls every
stream at once and alone decides the p99 of the release lag.

So while the loop runs, automatic collection is off and the loop calls
:meth:`SlackCollector.collect` between events with the time it has to spare:

* young and middle generations are collected by CPython's own thresholds, but
  only when their expected cost (the slowest recent collection of that
  generation) fits in the slack; a backlog of ten thresholds is collected
  regardless, so garbage cannot pile up on a loop that never has slack;
* the full collection runs only when the server is idle (no request in flight)
  and ``full_interval_s`` has passed since the last one, or, on a server that
  is never idle, every ``max_full_interval_s``. After an idle full collection
  the survivors are frozen (``gc.freeze``): with nothing in flight they are the
  server's long-lived state, and the next full collection need not scan them
  again.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

# Backlog (in multiples of a generation's threshold) collected even without slack.
_BACKLOG = 10
# A measured collection sets the expected cost; it then decays by this factor per collection.
_COST_DECAY = 0.9


class SlackCollector:
    """Decides when the pacing loop may spend time on the cyclic garbage collector."""

    def __init__(self, *, full_interval_s: float = 30.0, max_full_interval_s: float = 600.0,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.full_interval_s = full_interval_s
        self.max_full_interval_s = max_full_interval_s
        self._clock = clock
        self._was_enabled = False
        self._last_full = clock()
        # Expected seconds per collection of generation 0, 1, 2 (the slowest recent one, decaying).
        self.expected_s = [0.0002, 0.001, 0.025]
        self.collections = [0, 0, 0]
        self.seconds = [0.0, 0.0, 0.0]

    def start(self) -> None:
        """Take collection over from CPython's allocation trigger."""
        self._was_enabled = gc.isenabled()
        gc.disable()
        self._last_full = self._clock()

    def stop(self) -> None:
        """Hand collection back as it was."""
        if self._was_enabled:
            gc.enable()

    def collect(self, slack_s: float, idle: bool) -> None:
        """Collect what is due and fits in ``slack_s`` seconds; ``idle``: no request is in flight."""
        now = self._clock()
        since_full = now - self._last_full
        if idle and since_full >= self.full_interval_s or since_full >= self.max_full_interval_s:
            self._run(2)
            if idle:
                gc.freeze()
            return
        counts, thresholds = gc.get_count(), gc.get_threshold()
        gen = 1 if counts[1] >= thresholds[1] else 0
        if counts[gen] < thresholds[gen]:
            return
        if self.expected_s[gen] <= slack_s or counts[gen] >= _BACKLOG * thresholds[gen]:
            self._run(gen)
        elif gen == 1 and self.expected_s[0] <= slack_s and counts[0] >= thresholds[0]:
            self._run(0)

    def _run(self, generation: int) -> None:
        t = self._clock()
        gc.collect(generation)
        took = self._clock() - t
        self.expected_s[generation] = max(took, self.expected_s[generation] * _COST_DECAY)
        self.collections[generation] += 1
        self.seconds[generation] += took
        if generation == 2:
            self._last_full = self._clock()
