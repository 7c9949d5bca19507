"""Where the simulator expects an SLO's knee: the seed of ``sweep --search --predict``.

The steady-state estimator (``steady.estimate``) predicts TTFT, TPOT and E2E of one deployment at every
closed-loop concurrency in milliseconds, so a load search can start where the SLO's boundary should lie
instead of doubling up from 1. A steady state has means and no tail: every statistic of a limit (mean,
median, p90, p99) is predicted by the estimate itself, as the analytic run's medians are, and ITL by TPOT.
A tail limit is therefore placed optimistically; the first measurement corrects it (``corrected_knee``
scales each predicted curve through the measured value, keeping the predicted shape), and the search goes to
the other side of that corrected knee (``slo_search.LevelSearch``'s hints).

For a request-rate search the knee is the request rate the deployment completes at the knee concurrency
(the closed loop's throughput there), a seed only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from scoville.sim.config import SimConfig, SimConfigError, pinned_config
from scoville.sim.steady import Protocol, estimate
from scoville.slo import Slo, SloLimit


@dataclass(frozen=True)
class PredictedCurve:
    """Predicted statistics of one deployment at concurrency 1, 2, ..., n (arrays aligned with ``concurrency``)."""

    config: SimConfig
    concurrency: np.ndarray
    ttft: np.ndarray                 # the points' mean TTFT (their opening burst included)
    ttft_median: np.ndarray          # ... and median (``SteadyEstimate.ttft_median``)
    tpot: np.ndarray
    e2e: np.ndarray
    request_rate: np.ndarray

    def value(self, lim: SloLimit) -> np.ndarray:
        """The predicted statistic a limit reads: a TTFT median its median, every other statistic the estimate
        (for a TTFT mean or tail the burst-lifted mean, the higher and so the safer of the two)."""
        if lim.metric == "ttft" and lim.stat == "median":
            return self.ttft_median
        return {"ttft": self.ttft, "tpot": self.tpot, "itl": self.tpot, "e2e": self.e2e}[lim.metric]

    def knee(self, slo: Slo, scale: Mapping[str, float] | None = None) -> int:
        """The highest concurrency whose predicted statistics all meet the SLO (1 when none does);
        ``scale`` multiplies the prediction of each limit (by key) first."""
        ok = np.ones(self.concurrency.size, dtype=bool)
        for lim in slo.statistic_limits:
            ok &= self.value(lim) * (scale or {}).get(lim.key, 1.0) <= lim.limit_s
        # the highest passing concurrency below the first predicted failure (monotone by assumption)
        first_fail = int(np.argmin(ok)) if not ok.all() else ok.size
        return int(self.concurrency[first_fail - 1]) if first_fail > 0 else 1

    def corrected_knee(self, slo: Slo, concurrency: int, ratios: Mapping[str, float]) -> int | None:
        """The knee once each limited statistic's predicted curve is scaled to pass through what
        ``concurrency`` measured (``ratios``: measured value over limit, by key); None when a value is missing."""
        if not 1 <= concurrency <= self.concurrency.size:
            return None
        scale = {}
        for lim in slo.statistic_limits:
            ratio, predicted = ratios.get(lim.key), float(self.value(lim)[concurrency - 1])
            if ratio is None or not math.isfinite(ratio) or not predicted > 0:
                return None
            scale[lim.key] = ratio * lim.limit_s / predicted
        return self.knee(slo, scale)

    def rate_at(self, concurrency: int) -> float:
        """Predicted completed requests/s at a concurrency."""
        return float(np.interp(concurrency, self.concurrency, self.request_rate))

    def e2e_at_rate(self, rate: float, max_in_flight: int | None = None) -> float:
        """Predicted E2E at the lowest concurrency whose throughput reaches ``rate``, at most ``max_in_flight``
        (a point of N requests never has more than N in flight) and at most the curve's last."""
        i = int(np.searchsorted(np.maximum.accumulate(self.request_rate), rate))
        return float(self.e2e[min(i, self.e2e.size - 1, (max_in_flight or self.e2e.size) - 1)])

    def predicted(self, slo: Slo, concurrency: int) -> dict[str, float]:
        """The predicted value of each limited statistic at one concurrency (for the manifest)."""
        i = int(np.clip(np.searchsorted(self.concurrency, concurrency), 0, self.concurrency.size - 1))
        return {lim.key: float(self.value(lim)[i]) for lim in slo.statistic_limits}


def predict_config(predict: str, profile: Path | None = None) -> SimConfig:
    """``HARDWARE/MODEL`` (the simulator's default deployment of it, as the emulator serves) or a SimConfig file."""
    path = Path(predict)
    if path.suffix in (".yaml", ".yml", ".json") and path.is_file():
        return pinned_config(config=path, profile=profile)
    hardware, sep, model = predict.partition("/")
    if not sep or not hardware or not model:
        raise SimConfigError(f"--predict {predict!r}: give HARDWARE/MODEL such as h200/llama-3.1-8b, "
                             "or a SimConfig YAML/JSON file")
    return pinned_config(hardware, model, profile=profile, where="--predict")


def predict_curve(config: SimConfig, isl: float, osl: float, max_concurrency: int, *,
                  requests_per_user: float = 10.0, osl_spread: float = 1.0) -> PredictedCurve:
    """The estimate at every concurrency from 1 to ``max_concurrency``, for points of ``requests_per_user``·C
    measured requests opening with a burst (the client's closed loop)."""
    c = np.arange(1, max(int(max_concurrency), 1) + 1, dtype=np.float64)
    est = estimate(config, isl, osl, c, Protocol(requests_per_user=max(requests_per_user, 1.0)),
                   osl_spread=osl_spread)
    return PredictedCurve(config=config, concurrency=c, ttft=est.ttft, ttft_median=est.ttft_median, tpot=est.tpot,
                          e2e=est.e2e, request_rate=est.request_rate)
