"""The highest load that meets an SLO, found by bracketing and bisection: pure logic, no HTTP.

Loads are whole **levels**: a concurrency, or a request rate in multiples of a step (``level × step``
req/s). Whether a level meets the SLO is assumed monotone: if it does, every lower level does. Under that
assumption ``LevelSearch`` proposes the next level to measure from the verdicts so far:

* **blind**: start at 1 and double until a level fails or the ceiling is reached;
* **seeded**: start at a predicted knee (``scoville.sim.knee``); each measurement, scaling the prediction
  through itself, hints where the boundary lies, and the next level goes just to its other side (at most
  ``GUIDED_STEPS`` times); otherwise step out by a factor that grows from ``SEED_FACTOR`` (up while levels
  pass, down while they fail) until a pass and a fail bracket the boundary;
* then **bisect** the bracket until the highest passing level and the lowest failing one are adjacent.
  The answer is the highest passing level (0 when level 1 fails; the ceiling when it passes: "at least").

**Repeat until confident, at the boundary.** Every level is measured once on the way. When the highest
passing and the lowest failing level are adjacent, each of the two whose first measurement put a
statistic within ``margin`` (10 %) of its limit, on either side, is measured again with fresh prompts, up
to ``repeats`` attempts in all, and its verdict is the majority: it passes once more than half of
``repeats`` attempts passed, fails once that can no longer happen (a tie fails: the answer must meet the
SLO). A majority that reverses the first verdict moves the bracket, and the bisection goes on.

``SloSearch`` wires a LevelSearch to measured metrics rows and load points, counts the points and the
accelerator time they took, and writes the one-line answer. ``blind_levels`` gives the levels a blind
search would have measured to reach a given answer: pass/fail being monotone, that sequence follows from
where the boundary lies, so a seeded run reports what it saved against a blind one as derived, not measured.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from scoville.load import LoadPoint
from scoville.slo import Slo, SloCheck, format_seconds

SEED_FACTOR = 1.25      # step out of a predicted knee by this factor until bracketed
BLIND_FACTOR = 2.0      # a blind search doubles from level 1
MARGIN = 0.10           # a statistic within 10 % of its limit makes the verdict worth repeating
REPEATS = 3             # attempts at most at such a level
GUIDED_STEPS = 3        # steps at most that follow a hint (the rest bisect or step by the factor)


@dataclass(frozen=True)
class Attempt:
    level: int
    passed: bool
    near: bool


class LevelSearch:
    """Proposes the next level to measure; ``record`` each attempt's verdict; ``answer`` once ``done``.

    ``record`` may carry a ``hint``: the highest level expected to pass judging by that measurement (a
    prediction corrected by it, ``scoville.sim.knee.PredictedCurve.corrected_knee``). The next level then
    goes to the other side of the hinted boundary (one above the hint after a pass, the hint itself after a
    fail) when that lies strictly inside what is still unknown; at most ``GUIDED_STEPS`` levels follow
    hints, so hints that keep landing on the wrong side cost a bounded number of extra levels. Otherwise
    the search steps out (by ``factor``; with ``grow``, seeded searches, by ``factor ** 2**k`` with k one
    less than the levels measured so far clear of every limit, hinted ones included: x1.25, x1.56, x2.44, ...
    without hints, at once x6 after three hints that missed; a seed far from the boundary is left as fast as
    doubling would) or bisects. A level measured near a limit does not grow the step: it says the boundary
    is close, and a noisy fail there must not send the search far below it.
    """

    def __init__(self, max_level: int, *, start: int = 1, factor: float = BLIND_FACTOR,
                 repeats: int = REPEATS, grow: bool = False) -> None:
        if max_level < 1 or repeats < 1 or factor <= 1.0:
            raise ValueError("need max_level >= 1, repeats >= 1 and factor > 1")
        self.max_level = max_level
        self.start = min(max(start, 1), max_level)
        self.factor = factor
        self.repeats = repeats
        self.grow = grow
        self.attempts: list[Attempt] = []
        self._votes: dict[int, list[Attempt]] = {}
        self._hint: int | None = None
        self._guided = 0                 # levels measured because a hint proposed them

    def verdict(self, level: int) -> bool | None:
        """Whether a level meets the SLO by the majority of its attempts (a tie fails); None if unmeasured."""
        votes = self._votes.get(level)
        return None if not votes else 2 * sum(a.passed for a in votes) > len(votes)

    def confirmed(self, level: int) -> bool:
        """A level is settled when its first attempt was clear of every limit or its majority is certain."""
        votes = self._votes.get(level, [])
        if not votes:
            return False
        if not votes[0].near:
            return True
        passes = sum(a.passed for a in votes)
        need = self.repeats // 2 + 1                 # passes for a majority of the attempts allowed
        return passes >= need or len(votes) - passes > self.repeats - need

    @property
    def lo(self) -> int:
        """The highest level that meets the SLO so far (0: none)."""
        return max((lv for lv in self._votes if self.verdict(lv)), default=0)

    @property
    def hi(self) -> int:
        """The lowest level that fails so far (``max_level + 1``: none)."""
        return min((lv for lv in self._votes if not self.verdict(lv)), default=self.max_level + 1)

    @property
    def done(self) -> bool:
        return self.next_level() is None

    @property
    def answer(self) -> int:
        """The highest level that met the SLO (0: not even level 1)."""
        return self.lo

    @property
    def decided(self) -> list[tuple[int, bool]]:
        """Every measured level with its verdict, in level order."""
        return [(lv, bool(self.verdict(lv))) for lv in sorted(self._votes)]

    def next_level(self) -> int | None:
        """The level to measure next, or None when the boundary is found and confirmed."""
        lo, hi = self.lo, self.hi
        if hi - lo <= 1:                 # adjacent: confirm each side measured near a limit, else done
            return next((lv for lv in (lo, hi) if lv in self._votes and not self.confirmed(lv)), None)
        if not self._votes:
            return self.start
        guided = self._guided_level(lo, hi)
        if guided is not None:
            return guided
        clear = sum(1 for votes in self._votes.values() if not votes[0].near)
        factor = self.factor ** (2 ** min(max(clear - 1, 0), 6)) if self.grow else self.factor
        if hi > self.max_level:          # only passes so far: step up
            return min(max(lo + 1, math.ceil(lo * factor)), self.max_level)
        if lo == 0:                      # only fails so far: step down
            return max(min(hi - 1, math.floor(hi / factor)), 1)
        return (lo + hi) // 2

    def _guided_level(self, lo: int, hi: int) -> int | None:
        """The other side of the last hint's boundary, when it is still unknown and hints may still lead."""
        if self._hint is None or self._guided >= GUIDED_STEPS or not self.attempts:
            return None
        level = self._hint + 1 if self.attempts[-1].passed else self._hint
        return level if lo < level < hi and level not in self._votes and level <= self.max_level else None

    def record(self, level: int, passed: bool, near: bool = False, hint: int | None = None) -> None:
        """One measured attempt at ``level`` (which must be the proposed one)."""
        if level != self.next_level():
            raise ValueError(f"level {level} was not proposed (expected {self.next_level()})")
        if self._votes and level == self._guided_level(self.lo, self.hi):
            self._guided += 1
        attempt = Attempt(level, passed, near)
        self.attempts.append(attempt)
        self._votes.setdefault(level, []).append(attempt)
        self._hint = hint


def blind_levels(answer: int, max_level: int) -> list[int]:
    """Levels a blind search measures (one attempt each) to find ``answer``, when pass/fail is monotone."""
    search = LevelSearch(max_level)
    while (level := search.next_level()) is not None:
        search.record(level, level <= answer)
    return [a.level for a in search.attempts]


@dataclass(frozen=True)
class MeasuredPoint:
    """One measured point of a search: its level, verdict and what it cost."""

    point: int                          # index in the run's load plan
    level: int
    load: str                           # "c=37" or "rate=3/s"
    passed: bool
    near: bool                          # some statistic within the margin of its limit
    seconds: float                      # wall time of the point
    errors: int                         # failed requests
    ratios: dict[str, float | None]     # statistic over its limit, by key (None: not measured)
    goodput: float | None


@dataclass(frozen=True)
class BlindEstimate:
    """What a blind search would have needed for the same answer: derived from the answer, not measured."""

    levels: list[int]
    accelerator_minutes: float | None   # None: no prediction to time the levels this run did not measure

    @property
    def points(self) -> int:
        return len(self.levels)


@dataclass(frozen=True)
class SeedInfo:
    """Where a seeded search started and why: the prediction behind the first level."""

    source: str                         # e.g. "h200/llama-3.1-8b" or a config path
    level: int                          # the predicted knee, as a level
    detail: dict[str, Any] = field(default_factory=dict)   # configuration, profile, predicted statistics


@dataclass
class SloSearch:
    """A LevelSearch driven by measured points: proposes LoadPoints, judges their metrics rows against the SLO.

    ``make_point(index, level)`` builds the point of a level (its request counts, its rate or concurrency);
    ``point_seconds(level)``, when given, predicts how long a point of that level takes (for the derived
    accelerator time of a blind search's levels this run did not measure); ``knee_hint(level, check)``,
    when given, is the highest level expected to pass judging by that measurement (``LevelSearch.record``'s
    hint).
    """

    slo: Slo
    levels: LevelSearch
    make_point: Callable[[int, int], LoadPoint]
    mode: str = "concurrency"           # concurrency | rate
    step: float = 1.0                   # req/s per level in rate mode
    accelerators: int = 1
    margin: float = MARGIN
    seed: SeedInfo | None = None
    point_seconds: Callable[[int], float] | None = None
    knee_hint: Callable[[int, SloCheck], int | None] | None = None
    measured: list[MeasuredPoint] = field(default_factory=list)

    @property
    def widest_concurrency(self) -> int:
        """The most requests in flight any proposed point may have (sizes the client's workers)."""
        probe = self.make_point(0, self.levels.max_level)
        return probe.concurrency or 1

    def load_text(self, level: int) -> str:
        return f"c={level}" if self.mode == "concurrency" else f"rate={level * self.step:g}/s"

    def next_point(self, index: int) -> LoadPoint | None:
        level = self.levels.next_level()
        return None if level is None else self.make_point(index, level)

    def level_of(self, point: LoadPoint) -> int:
        if self.mode == "concurrency":
            return int(point.concurrency or 0)
        return round((point.rate or 0.0) / self.step)

    def observe(self, point: LoadPoint, row: Mapping[str, Any] | None, seconds: float) -> SloCheck:
        """Judge a measured point and move the search on."""
        level = self.level_of(point)
        check = self.slo.check(row)
        near = check.near(self.margin)
        hint = self.knee_hint(level, check) if self.knee_hint is not None else None
        self.levels.record(level, check.passed, near, hint)
        self.measured.append(MeasuredPoint(
            point=point.index, level=level, load=self.load_text(level), passed=check.passed, near=near,
            seconds=seconds, errors=check.errors,
            ratios={k: (v if math.isfinite(v) else None) for k, v in check.ratios.items()},
            goodput=(row or {}).get("goodput")))
        return check

    def accelerator_minutes(self, first_only: bool = False) -> float:
        """Accelerator time the measured points took (``first_only``: the first attempt at each level)."""
        seconds = self._first_seconds().values() if first_only else [m.seconds for m in self.measured]
        return sum(seconds) * self.accelerators / 60.0

    @property
    def loads_measured(self) -> int:
        return len({m.level for m in self.measured})

    def _first_seconds(self) -> dict[int, float]:
        first: dict[int, float] = {}
        for m in self.measured:
            first.setdefault(m.level, m.seconds)
        return first

    def blind_estimate(self) -> BlindEstimate | None:
        """What a blind search would have needed for the same answer (derived, not measured); None unless seeded.

        Its levels, one attempt each, and their accelerator time; the confirmations at the boundary are left
        out, as a blind search would repeat the same two levels.
        """
        if self.seed is None or not self.levels.done:
            return None
        blind = blind_levels(self.levels.answer, self.levels.max_level)
        first = self._first_seconds()
        # levels this run measured take their measured time; the others the predicted time, scaled by how
        # this run's measured points compared with their predictions
        scale = 1.0
        if self.point_seconds is not None and first:
            ratios = sorted(s / self.point_seconds(lv) for lv, s in first.items() if self.point_seconds(lv) > 0)
            scale = ratios[len(ratios) // 2] if ratios else 1.0
        seconds = 0.0
        for lv in blind:
            if lv in first:
                seconds += first[lv]
            elif self.point_seconds is not None:
                seconds += self.point_seconds(lv) * scale
            else:
                return BlindEstimate(blind, None)
        return BlindEstimate(blind, seconds * self.accelerators / 60.0)

    def answer_line(self) -> str:
        """The result on one line: the answer, what failed above it, the points measured, what seeding saved."""
        lv = self.levels
        slo = ", ".join(f"{lim.key}<={format_seconds(lim.limit_s)}" for lim in self.slo.statistic_limits)
        what = "concurrency" if self.mode == "concurrency" else "request rate"
        if not lv.done:
            head = f"SLO {slo}: search stopped before the boundary was found (highest passing so far: " \
                   f"{self.load_text(lv.answer) if lv.answer else 'none'})"
        elif lv.answer == 0:
            head = f"SLO {slo}: not met even at {self.load_text(1)}{self._why(1)}"
        elif lv.answer >= lv.max_level:
            head = f"SLO {slo}: met up to the search ceiling {self.load_text(lv.max_level)} (at least; " \
                   "raise --search-max)"
        else:
            head = f"SLO {slo}: highest {what} meeting it {self.load_text(lv.answer)} " \
                   f"({self.load_text(lv.hi)} fails{self._why(lv.hi)})"
        loads = self.loads_measured
        line = f"{head}; {len(self.measured)} points measured ({loads} loads, " \
               f"{self.accelerator_minutes():.2f} accelerator-min)"
        blind = self.blind_estimate()
        if self.seed is not None:
            line += f"; seeded at {self.load_text(self.seed.level)} from {self.seed.source}"
        if blind is not None:
            fewer = blind.points - loads
            line += f"; a blind search needs {blind.points} loads (derived): " \
                    f"{abs(fewer)} {'fewer' if fewer >= 0 else 'more'}"
            if blind.accelerator_minutes is not None:
                saved = blind.accelerator_minutes - self.accelerator_minutes(first_only=True)
                line += f", ~{abs(saved):.2f} accelerator-min {'saved' if saved >= 0 else 'more'}"
        return line

    def _why(self, level: int) -> str:
        fails = [m for m in self.measured if m.level == level and not m.passed]
        if not fails:
            return ""
        m = fails[-1]
        if m.errors:
            return f": {m.errors} failed requests"
        over = [(k, r) for k, r in m.ratios.items() if r is not None and r > 1.0]
        if not over:
            return ": no measured statistic"
        key, ratio = max(over, key=lambda kr: kr[1])
        limit = self.slo.to_dict()[key]
        return f": {key} {format_seconds(ratio * limit, digits=3)}"

    def summary(self) -> dict[str, Any]:
        """The manifest's ``slo_search`` block."""
        lv, blind = self.levels, self.blind_estimate()
        return {
            "slo": self.slo.to_dict(), "mode": self.mode, "step": self.step if self.mode == "rate" else None,
            "max_level": lv.max_level, "margin": self.margin, "repeats": lv.repeats, "factor": lv.factor,
            "grow": lv.grow,
            "done": lv.done, "answer": lv.answer if lv.done else None,
            "answer_load": (lv.answer if self.mode == "concurrency" else lv.answer * self.step) if lv.done else None,
            "at_ceiling": lv.done and lv.answer >= lv.max_level,
            "points_measured": len(self.measured), "loads_measured": self.loads_measured,
            "accelerator_minutes": self.accelerator_minutes(),
            "first_attempt_accelerator_minutes": self.accelerator_minutes(first_only=True),
            "measured": [dataclasses.asdict(m) for m in self.measured],
            "decided": [{"level": level, "passed": passed} for level, passed in lv.decided],
            "seeded_from": None if self.seed is None else
            {"source": self.seed.source, "level": self.seed.level, **self.seed.detail},
            "blind_estimate": None if blind is None else dict(dataclasses.asdict(blind), points=blind.points),
            "line": self.answer_line(),
        }
