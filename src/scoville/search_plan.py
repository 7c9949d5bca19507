"""The SLO search a sweep's options ask for: ``build_search`` checks how ``--slo``, ``--search``,
``--search-rate``, ``--search-max``, ``--predict`` and ``--profile`` combine (one line each) and returns the SLO
and, with a search, the ``slo_search.SloSearch`` that ``client.sweep`` drives (seeded by the simulator's knee
with ``--predict``). Library code: the CLI (``cli/search_options.py`` declares the flags) and the Python API
both call it.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import msgspec

from scoville.client.errors import ClientError
from scoville.load import DEFAULT_RATE_REQUESTS, LoadPoint, concurrency_sweep, rate_sweep
from scoville.slo import Slo, SloCheck
from scoville.slo_search import BLIND_FACTOR, REPEATS, SEED_FACTOR, LevelSearch, SeedInfo, SloSearch

DEFAULT_MAX_LEVEL = 1024
MAX_SEARCH_MAX = 1_000_000   # users or req/s: far past any server, and a prediction curve that still fits memory


def build_search(*, slo_text: str | None, search: bool, search_rate: float | None, search_max: float | None,
                 predict: str | None, profile: Path | None, repeats: int = REPEATS, workload: Any,
                 concurrency: str | None = None, rate: str | None = None, single: bool = False,
                 num_requests: int | None = None, warmup_requests: int | None = None,
                 duration: float | None = None, burstiness: float = 1.0, max_concurrency: int | None = None,
                 accelerators: int = 1, requests_per_concurrency: int = 10) -> tuple[Slo | None, SloSearch | None]:
    """The SLO of ``--slo`` and, when a search is asked for, the search that picks the points."""
    slo = Slo.parse(slo_text) if slo_text is not None else None
    searching = search or search_rate is not None
    if not searching:
        given = [flag for flag, v in (("--predict", predict), ("--profile", profile), ("--search-max", search_max),
                                      ("--search-repeats", repeats if repeats != REPEATS else None)) if v is not None]
        if given:
            verb = "applies" if len(given) == 1 else "apply"
            raise ClientError(f"{', '.join(given)} {verb} only to a search; add --search (or --search-rate STEP)")
        return slo, None
    if single:
        raise ClientError("`scoville run` measures one point; search with `scoville sweep --search`")
    if concurrency or rate:
        raise ClientError("--search chooses the loads itself; drop --concurrency/--rate (set the ceiling with "
                          "--search-max)")
    if slo is None or not slo.statistic_limits:
        raise ClientError("--search needs --slo with a statistic limit, e.g. --slo ttft_p90=2s,tpot_p90=50ms "
                          "(ttft_s=... is a per-request goodput limit)")
    if profile is not None and predict is None:
        raise ClientError("--profile calibrates the prediction; give --predict HARDWARE/MODEL with it")
    if search_max is not None and not (math.isfinite(search_max) and 0 < search_max <= MAX_SEARCH_MAX):
        raise ClientError(f"--search-max must be a load between 0 and {MAX_SEARCH_MAX} (got {search_max})")
    step = 1.0 if search_rate is None else search_rate
    if not step > 0 or not math.isfinite(step):
        raise ClientError(f"--search-rate must be a positive number of requests/s (got {search_rate})")
    ceiling = DEFAULT_MAX_LEVEL if search_max is None else math.floor(search_max / step + 1e-9)
    if ceiling < 1:
        raise ClientError(f"--search-max {search_max:g} is below the first load ({step:g}); raise it")
    mode = "rate" if search_rate is not None else "concurrency"

    def make_point(index: int, level: int) -> LoadPoint:
        if mode == "rate":
            point = rate_sweep([level * step], num_requests=DEFAULT_RATE_REQUESTS if num_requests is None
                               else num_requests, warmup_requests=warmup_requests or 0, burstiness=burstiness,
                               duration_s=duration, max_concurrency=max_concurrency)[0]
        else:
            point = concurrency_sweep([level], num_requests=num_requests, warmup_requests=warmup_requests,
                                      duration_s=duration, requests_per_concurrency=requests_per_concurrency)[0]
        return msgspec.structs.replace(point, index=index)

    make_point(0, 1)   # a request count the load module refuses is refused before anything starts
    seed, seconds, hint = None, None, None
    if predict is not None:
        seed, seconds, hint = _seed(predict, profile, slo, workload, mode, step, ceiling, make_point,
                                    requests_per_concurrency)
    levels = LevelSearch(ceiling, start=seed.level if seed else 1, factor=SEED_FACTOR if seed else BLIND_FACTOR,
                         repeats=repeats, grow=seed is not None)
    return slo, SloSearch(slo=slo, levels=levels, make_point=make_point, mode=mode, step=step,
                          accelerators=accelerators, seed=seed, point_seconds=seconds, knee_hint=hint)


def _seed(predict: str, profile: Path | None, slo: Slo, workload: Any, mode: str, step: float, ceiling: int,
          make_point: Any, requests_per_concurrency: int) -> tuple[SeedInfo, Any, Any]:
    """The predicted knee as a level, the predicted seconds a point of each level takes, and (concurrency
    searches) the knee corrected by a measurement."""
    from scoville.sim.knee import predict_config, predict_curve
    from scoville.simulation import mean_lengths

    config = predict_config(predict, profile)
    isl, osl, spread = mean_lengths(workload)
    curve = predict_curve(config, isl, osl, ceiling if mode == "concurrency" else DEFAULT_MAX_LEVEL,
                          requests_per_user=requests_per_concurrency, osl_spread=spread)
    knee_c = curve.knee(slo)
    level = knee_c if mode == "concurrency" else max(1, math.floor(curve.rate_at(knee_c) / step))
    level = min(level, ceiling)

    def seconds(lv: int) -> float:
        """A closed-loop point lasts its requests over the predicted throughput; an open-loop one its
        arrivals' span plus the drain of the last request."""
        point = make_point(0, lv)
        if mode == "concurrency":
            return point.total_requests / curve.rate_at(lv)
        in_flight = min(point.total_requests, point.concurrency or point.total_requests)
        return point.total_requests / (lv * step) + curve.e2e_at_rate(lv * step, in_flight)

    detail = {"config": config.label(), "hardware": config.hardware, "model": config.model,
              "profile": str(profile) if profile is not None else None, "predicted_concurrency": knee_c,
              "predicted": curve.predicted(slo, knee_c)}
    def hint(lv: int, check: SloCheck) -> int | None:
        return curve.corrected_knee(slo, lv, check.ratios)

    return SeedInfo(source=predict, level=level, detail=detail), seconds, hint if mode == "concurrency" else None
