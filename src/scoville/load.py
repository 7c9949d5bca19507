"""Load plans: how hard to push, independent of what is sent or who sends it.

A plan is a list of load points. A point is either closed loop (``concurrency``
requests in flight, a new one sent when one finishes) or open loop (arrivals at
``rate`` requests/s, Poisson when ``burstiness`` is 1, gamma otherwise, as
vLLM's benchmark does). Each point is bounded by a request count and/or a
duration, and its first ``warmup_requests`` are sent but excluded from metrics.
"""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np
from pydantic import Field

from scoville.errors import UserError
from scoville.spec import Spec


class LoadError(UserError, ValueError):
    """A load plan the user asked for cannot be built; message is user-facing."""


# Requests of one point: drivers draw a point's sessions up front, so a typo (1e12) must be a
# one-line error, not an allocation that takes the machine down. Longer points use --duration.
MAX_POINT_REQUESTS = 1_000_000


class LoadPoint(msgspec.Struct, kw_only=True, frozen=True):
    index: int
    concurrency: int | None = None
    rate: float | None = None
    burstiness: float = 1.0
    num_requests: int = 0
    warmup_requests: int = 0
    duration_s: float | None = None
    # Sessions the point draws; None: one per request (or a large pool when only a duration bounds it).
    # A timed trace replayed once sets it to the trace's sessions, so no recycled session takes a turn's slot.
    sessions: int | None = None
    # Which repeat of its load this point is (1..N) when the plan repeats every load (--repeats); None otherwise.
    repeat: int | None = None

    def __post_init__(self) -> None:
        if self.num_requests + self.warmup_requests > MAX_POINT_REQUESTS:
            raise LoadError(f"a point of {self.num_requests + self.warmup_requests:,} requests is over the "
                            f"{MAX_POINT_REQUESTS:,} one point may send; give --duration for longer points")

    @property
    def mode(self) -> str:
        return "rate" if self.rate is not None else "concurrency"

    @property
    def total_requests(self) -> int:
        return self.num_requests + self.warmup_requests

    def load_label(self) -> str:
        """The load alone ("c=4", "rate=2/s"): what the repeats of one load share."""
        if self.rate is not None:
            return f"rate={self.rate:g}/s"
        return f"c={self.concurrency}"

    def describe(self) -> str:
        """The load and, in a repeated plan, which repeat ("c=4 #2")."""
        return self.load_label() + (f" #{self.repeat}" if self.repeat is not None else "")

    def to_dict(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)


def parse_int_list(text: str) -> list[int]:
    """``"1,2,4"`` or ``"1-64"`` (doubling) into a list of ints."""
    text = text.strip()
    try:
        if "-" in text and "," not in text:
            lo, hi = (int(x) for x in text.split("-", 1))
            if lo < 1 or hi < lo:
                raise ValueError
            out, c = [], lo
            while c <= hi:
                out.append(c)
                c *= 2
            return out
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise LoadError(f"cannot read {text!r} as a list of positive integers; use e.g. 1,2,4,8 or 1-64") from None
    if not values or min(values) < 1:
        raise LoadError(f"{text!r}: values must be positive integers, e.g. 1,2,4,8")
    return values


def parse_float_list(text: str) -> list[float]:
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise LoadError(f"cannot read {text!r} as a list of rates; use e.g. 0.5,1,2") from None
    if not values or not all(v > 0 for v in values):  # nan is no rate; inf (all at once) is one, as in vLLM
        raise LoadError(f"{text!r}: request rates must be positive numbers of requests per second")
    return values


def concurrency_sweep(
    concurrencies: list[int],
    *,
    num_requests: int | None = None,
    warmup_requests: int | None = None,
    duration_s: float | None = None,
    requests_per_concurrency: int = 10,
    warmup_per_concurrency: int = 2,
) -> list[LoadPoint]:
    """Closed-loop sweep; by default InferenceX's 10·C measured after 2·C warm-up."""
    points = []
    for i, c in enumerate(concurrencies):
        n = num_requests if num_requests is not None else requests_per_concurrency * c
        w = warmup_requests if warmup_requests is not None else warmup_per_concurrency * c
        if n < 1 and duration_s is None:
            raise LoadError("each point needs --num-requests >= 1 or a --duration")
        points.append(LoadPoint(index=i, concurrency=c, num_requests=n, warmup_requests=w, duration_s=duration_s))
    return points


def rate_sweep(
    rates: list[float],
    *,
    num_requests: int,
    warmup_requests: int = 0,
    burstiness: float = 1.0,
    duration_s: float | None = None,
    max_concurrency: int | None = None,
) -> list[LoadPoint]:
    """Open-loop sweep at the given arrival rates (requests/s)."""
    if burstiness <= 0:
        raise LoadError("--burstiness must be > 0 (1 = Poisson, <1 burstier, >1 smoother)")
    return [
        LoadPoint(
            index=i,
            rate=r,
            burstiness=burstiness,
            concurrency=max_concurrency,
            num_requests=num_requests,
            warmup_requests=warmup_requests,
            duration_s=duration_s,
        )
        for i, r in enumerate(rates)
    ]


def replay_point(workload: Any) -> LoadPoint:
    """One open-loop point that replays a timed trace once, at its recorded arrival times.

    The trace's arrivals are already multiplied by its ``time_scale``; the point's
    rate is the trace's own mean rate, so ``session_start_offsets`` keeps every
    arrival exactly where the (scaled) trace put it.
    """
    summary = workload.summary()
    sessions, requests = int(summary["sessions"]), int(summary["requests"])
    starts = np.asarray(workload.arrivals(sessions, 0), dtype=float)
    span = float(starts[-1] - starts[0]) if sessions > 1 else 0.0
    rate = (sessions - 1) / span if span > 0 else float("inf")
    return LoadPoint(index=0, rate=rate, num_requests=requests, sessions=sessions)


DEFAULT_CONCURRENCY = "1,2,4,8,16,32,64"
MAX_REPEATS = 100
DEFAULT_RATE_REQUESTS = 100   # measured requests of a --rate point when --num-requests is not given


def load_plan(concurrency: str | None, rate: str | None, *, num_requests: int | None = None,
              warmup_requests: int | None = None, duration: float | None = None, burstiness: float = 1.0,
              max_concurrency: int | None = None, default_concurrency: str = DEFAULT_CONCURRENCY,
              workload: Any = None, single: bool = False, repeats: int = 1) -> list[LoadPoint]:
    """The load points of a command line, the same for ``sweep``, ``run`` and ``simulate``: closed-loop
    ``concurrency`` levels or open-loop ``rate`` points with their defaults; a timed trace with neither replays
    once at its own (scaled) times. ``single`` (``run``) allows one load only; ``repeats`` measures every
    load that many times (``repeat_plan``)."""
    return repeat_plan(_single_pass(concurrency, rate, num_requests=num_requests, warmup_requests=warmup_requests,
                                    duration=duration, burstiness=burstiness, max_concurrency=max_concurrency,
                                    default_concurrency=default_concurrency, workload=workload, single=single),
                       repeats)


def repeat_plan(points: list[LoadPoint], repeats: int) -> list[LoadPoint]:
    """The plan measured ``repeats`` times over, pass after pass (every load once, then every load again).

    Passes rather than back-to-back repeats, so a slow drift of the server (clocks, heat, a neighbour)
    spreads over every load instead of biasing one. Repeat k of point i becomes point ``(k-1)·len + i``
    with ``repeat = k``: pass 1 keeps the indices (and so the prompts) an unrepeated plan has, and every
    later point draws its own sessions (``stream = index``), so a repeat sends prompts the server has not
    cached. ``repeats == 1`` returns the plan unchanged (no ``repeat`` numbers, labels as before).
    """
    if not 1 <= repeats <= MAX_REPEATS:
        raise LoadError(f"--repeats must be between 1 and {MAX_REPEATS} (got {repeats})")
    if repeats == 1:
        return points
    n = len(points)
    return [msgspec.structs.replace(p, index=k * n + p.index, repeat=k + 1) for k in range(repeats) for p in points]


def repeat_columns(point: LoadPoint) -> dict[str, Any]:
    """A load-plan point's ``repeat`` number and the ``load`` it repeats ("c=4"), for its metrics row (how the
    analysis groups repeats); empty for a plan without repeats."""
    if point.repeat is None:
        return {}
    return {"repeat": point.repeat, "load": point.load_label()}


def _single_pass(concurrency: str | None, rate: str | None, *, num_requests: int | None,
                 warmup_requests: int | None, duration: float | None, burstiness: float,
                 max_concurrency: int | None, default_concurrency: str, workload: Any,
                 single: bool) -> list[LoadPoint]:
    """``load_plan`` before repeats: each load once."""
    if concurrency and rate:
        raise LoadError("give --concurrency or --rate, not both")
    if not (concurrency or rate) and getattr(workload, "has_arrivals", False):
        point = replay_point(workload)
        if num_requests is not None or warmup_requests or duration is not None:
            point = msgspec.structs.replace(point, num_requests=point.num_requests if num_requests is None
                                            else num_requests, warmup_requests=warmup_requests or 0,
                                            duration_s=duration)
        return [point]
    if rate:
        rates = parse_float_list(rate)
        if single and len(rates) != 1:
            raise LoadError("`scoville run` measures one point: give one --rate (use `scoville sweep` for several)")
        return rate_sweep(rates, num_requests=DEFAULT_RATE_REQUESTS if num_requests is None else num_requests,
                          warmup_requests=warmup_requests or 0, burstiness=burstiness, duration_s=duration,
                          max_concurrency=max_concurrency)
    levels = parse_int_list(concurrency or ("1" if single else default_concurrency))
    if single and len(levels) != 1:
        raise LoadError("`scoville run` measures one point: give one --concurrency (use `scoville sweep` for several)")
    return concurrency_sweep(levels, num_requests=num_requests, warmup_requests=warmup_requests, duration_s=duration)


def arrival_offsets(point: LoadPoint, count: int, seed: int) -> np.ndarray:
    """Send times (s from point start) for an open-loop point.

    Gamma inter-arrival gaps with shape ``burstiness`` and mean ``1/rate``;
    shape 1 is exactly Poisson. Seeded per point so a rerun sends at the same times.
    """
    if point.rate is None:
        raise LoadError("arrival offsets exist only for rate points")
    rng = np.random.default_rng([seed, point.index])
    shape = point.burstiness
    gaps = rng.gamma(shape, 1.0 / (point.rate * shape), size=count)
    gaps[0] = 0.0
    return np.cumsum(gaps)


def session_start_offsets(point: LoadPoint, count: int, seed: int, workload: object = None) -> np.ndarray:
    """Open-loop start times (s from point start) of ``count`` sessions, for every driver alike.

    A workload that carries its own arrival times (a timed trace: ``has_arrivals``
    and ``arrivals(count, stream)``) keeps their shape — bursts and lulls — and is
    time-scaled so its mean rate is the point's ``rate``; otherwise the arrivals are
    drawn from the point's gamma/Poisson process.
    """
    if point.rate is None:
        raise LoadError("arrival offsets exist only for rate points")
    arrivals = getattr(workload, "arrivals", None) if getattr(workload, "has_arrivals", False) else None
    if arrivals is None:
        return arrival_offsets(point, count, seed)
    starts = np.asarray(arrivals(count, point.index), dtype=np.float64)
    starts = starts - starts[0] if starts.size else starts
    span = float(starts[-1]) if starts.size > 1 else 0.0
    if span <= 0:
        return starts
    trace_rate = (starts.size - 1) / span
    return starts * (trace_rate / point.rate)


class LoadSpec(Spec):
    """How hard, as a typed spec (``--concurrency``/``--rate`` and their options): closed-loop levels or
    open-loop rates, request counts, a duration, repeats. ``plan`` is ``load_plan`` of these choices, the plan
    ``sweep``, ``run``, ``simulate`` and the Python API all build."""

    concurrency: str | None = Field(None, description="levels: '1,2,4' or '1-64' (doubling)")
    rate: str | None = Field(None, description="open-loop requests per second: '1,2,4'")
    burstiness: float = Field(1.0, gt=0, description="gamma shape of arrivals (1 = Poisson)")
    max_concurrency: int | None = Field(None, ge=1)
    num_requests: int | None = Field(None, ge=1)
    warmup_requests: int | None = Field(None, ge=0)
    duration: float | None = Field(None, gt=0)
    repeats: int = Field(1, ge=1)

    def plan(self, *, workload: Any = None, default_concurrency: str = DEFAULT_CONCURRENCY,
             single: bool = False) -> list[LoadPoint]:
        """``load.load_plan`` of these choices: the plan every command builds from the same flags."""
        return load_plan(self.concurrency, self.rate, num_requests=self.num_requests,
                         warmup_requests=self.warmup_requests, duration=self.duration, burstiness=self.burstiness,
                         max_concurrency=self.max_concurrency, default_concurrency=default_concurrency,
                         workload=workload, single=single, repeats=self.repeats)
