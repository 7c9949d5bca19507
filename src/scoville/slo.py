"""Service-level objectives: the one parser, for goodput and for the load search alike.

An SLO is a comma-separated list of limits, in two forms that mix freely:

* **statistic limits**, ``METRIC_STAT=LIMIT`` (``ttft_p90=2s``, ``tpot_p90=50ms``, ``e2e_p99=10s``,
  ``itl_median=20ms``, ``ttft_mean=1``): a load point meets one when that statistic of its metrics row
  (``ttft_s_p90``, the column ``scoville.summary.summarize`` writes) is at most the limit. METRIC is
  ttft, tpot, e2e or itl; STAT is one the rows carry: mean, median, p90, p99.
* **per-request limits**, ``METRIC_s=SECONDS`` (``ttft_s=2``, the older form): a request is good when
  its own TTFT, TPOT or E2E is at most the limit; goodput counts good requests per second.

LIMIT is a positive number of seconds, or of milliseconds with ``ms``. Goodput needs per-request
thresholds, so a statistic limit on TTFT, TPOT or E2E also serves as one (the tightest, when a metric has
several limits: a request is good when it meets each of them on its own); ITL has no per-request value and
is left out of goodput.

A point whose requests did not all succeed does not meet any SLO: a failed request has no latency, and
leaving it out would let a server that drops requests under load look fast.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scoville.errors import UserError

METRICS = ("ttft", "tpot", "e2e", "itl")
STATS = ("mean", "median", "p90", "p99")          # the summaries every metrics row carries
PER_REQUEST = ("ttft", "tpot", "e2e")             # metrics a single request has a value of
_VALUE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(ms|s)?\s*$")
_FORMS = ("write METRIC_STAT=LIMIT such as ttft_p90=2s or tpot_median=50ms (METRIC: ttft, tpot, e2e, itl; "
          "STAT: mean, median, p90, p99), or METRIC_s=SECONDS for a per-request goodput limit")


class SloError(UserError, ValueError):
    """An SLO text that cannot be read; the message names the bad part and the fix."""


@dataclass(frozen=True)
class SloLimit:
    """One limit: ``stat`` of ``metric`` at most ``limit_s`` seconds (``stat`` None: every request's own value)."""

    metric: str
    stat: str | None
    limit_s: float

    @property
    def key(self) -> str:
        return f"{self.metric}_{self.stat}" if self.stat else f"{self.metric}_s"

    @property
    def column(self) -> str:
        """The metrics-row column this limit is checked against (statistic limits only)."""
        return f"{self.metric}_s_{self.stat}"


@dataclass(frozen=True)
class SloCheck:
    """How one metrics row fared against an SLO: the verdict, and each statistic's value over its limit."""

    passed: bool
    ratios: dict[str, float]            # key -> value / limit (inf where the row lacks the statistic)
    errors: int                         # failed requests of the point (any fails the SLO)

    def near(self, margin: float) -> bool:
        """Whether some statistic lies within ``margin`` (relative) of its limit, on either side."""
        return any(abs(r - 1.0) <= margin for r in self.ratios.values() if math.isfinite(r))


@dataclass(frozen=True)
class Slo:
    limits: tuple[SloLimit, ...]

    @classmethod
    def parse(cls, text: str) -> Slo:
        """``"ttft_p90=2s,tpot_p90=50ms"`` -> an Slo; a one-line SloError names any bad part."""
        limits: list[SloLimit] = []
        for part in filter(None, (p.strip() for p in text.split(","))):
            key, sep, value = part.partition("=")
            metric, _, stat = key.strip().lower().rpartition("_")
            if not sep or metric not in METRICS:
                raise SloError(f"bad SLO {part!r}: {_FORMS}")
            if stat == "s":
                if metric not in PER_REQUEST:
                    raise SloError(f"bad SLO {part!r}: ITL has no per-request value; "
                                   "limit a statistic instead, e.g. itl_p90=50ms")
                limit = SloLimit(metric, None, _seconds(part, value))
            elif stat in STATS:
                limit = SloLimit(metric, stat, _seconds(part, value))
            else:
                raise SloError(f"bad SLO {part!r}: {stat!r} is not a statistic the metrics rows carry; "
                               f"use one of {', '.join(STATS)} (e.g. {metric}_p90=...)")
            if any(old.key == limit.key for old in limits):
                raise SloError(f"bad SLO {part!r}: {limit.key} is given twice; keep one limit per key")
            limits.append(limit)
        if not limits:
            raise SloError(f"empty SLO {text!r}: {_FORMS}")
        return cls(tuple(limits))

    def to_dict(self) -> dict[str, float]:
        return {lim.key: lim.limit_s for lim in self.limits}

    @property
    def statistic_limits(self) -> tuple[SloLimit, ...]:
        return tuple(lim for lim in self.limits if lim.stat is not None)

    def per_request(self) -> dict[str, float]:
        """Goodput thresholds (``metrics.PointContext.slo``): per metric the tightest limit; ITL left out."""
        out: dict[str, float] = {}
        for lim in self.limits:
            if lim.metric in PER_REQUEST:
                key = f"{lim.metric}_s"
                out[key] = min(out.get(key, math.inf), lim.limit_s)
        return out

    def check(self, row: Mapping[str, Any] | None) -> SloCheck:
        """Whether a metrics row meets every statistic limit (a missing row or statistic fails)."""
        ratios: dict[str, float] = {}
        for lim in self.statistic_limits:
            value = (row or {}).get(lim.column)
            ratios[lim.key] = value / lim.limit_s if isinstance(value, (int, float)) and math.isfinite(value) \
                else math.inf
        errors = int((row or {}).get("num_errors") or 0)
        passed = row is not None and errors == 0 and all(r <= 1.0 for r in ratios.values())
        return SloCheck(passed=passed, ratios=ratios, errors=errors)


def format_seconds(s: float, digits: int = 6) -> str:
    """2.0 -> "2s", 0.05 -> "50ms" (to ``digits`` significant digits): the form the parser reads back."""
    return f"{s * 1e3:.{digits}g}ms" if s < 1.0 else f"{s:.{digits}g}s"


def _seconds(part: str, value: str) -> float:
    m = _VALUE.match(value)
    if m is None:
        raise SloError(f"bad SLO {part!r}: {value.strip()!r} is not a duration; write seconds (2, 2s) or "
                       "milliseconds (50ms)")
    seconds = float(m.group(1)) * (1e-3 if m.group(2) == "ms" else 1.0)
    if not seconds > 0:
        raise SloError(f"bad SLO {part!r}: the limit must be a positive duration")
    return seconds
