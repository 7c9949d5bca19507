"""Points whose users overflow the KV cache: InferenceX's measured vLLM and SGLang runs beside the discrete-event
engine and the steady-state estimator (not a test: prints figures).

Where every user's whole length (prompt plus answer) cannot sit in the KV cache at once, a scheduler that admits on
demand and preempts (vLLM, SGLang) runs as many as fit and makes the rest wait, some before their first token and
some, preempted, after it. The engine replays that request by request (``--fidelity des``); the estimator, which
``simulate`` and the search read, holds users at their mean decoding length and puts all of the wait before the
first token, with a wide TTFT band there (``steady.KV_OVERFLOW_TTFT_SIGMA``). This bench shows which of the two the
measured runs follow: each aggregated row of ``silicon_sample.csv`` (the validation set; nothing here is fitted)
whose concurrency times its whole length exceeds the deployment's KV capacity, on its own deployment and recipe
settings as view 1 pins it, replayed as InferenceX ran it (10 × C requests from a cold start).

    python bench/bench_kv_overflow.py        # ~85 s on 2 cores
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_sim_validation import _lengths  # noqa: E402
from scoville.errors import UserError  # noqa: E402
from scoville.load import LoadPoint  # noqa: E402
from scoville.sim.config import SimConfig  # noqa: E402
from scoville.sim.defaults import resolve_kv_dtype  # noqa: E402
from scoville.sim.driver import point_rows  # noqa: E402
from scoville.sim.engine import step_cost  # noqa: E402
from scoville.sim.steady import estimate  # noqa: E402
from scoville.workload.synthetic import scenario  # noqa: E402
from validation_data import SiliconRow, checkpoint_precision, load_silicon  # noqa: E402
from validation_settings import inferencex_recipe, served_layout  # noqa: E402

TOL = 0.35


@dataclass(frozen=True)
class Overflow:
    """One measured point and the two predictions of it (TTFT s, TPOT ms)."""
    name: str
    measured: tuple[float, float]
    engine: tuple[float, float]
    estimator: tuple[float, float]


def config_of(row: SiliconRow) -> SimConfig:
    """The row's deployment as view 1 pins it (its recipe's settings and KV format)."""
    recipe = inferencex_recipe(row)
    tp, dp, ep = served_layout(row)
    return SimConfig.model_validate({
        "hardware": row.hardware, "model": row.model,
        "precision": checkpoint_precision(row.model, row.precision, row.hardware),
        "kv_dtype": recipe.kv_dtype or resolve_kv_dtype(None, row.hardware, row.model, row.framework),
        "framework": row.framework, "parallel": {"tp": tp, "dp": dp, "ep": ep}, "max_num_seqs": 4096,
        **recipe.settings()})


def overflowing(row: SiliconRow, config: SimConfig) -> bool:
    """Whether the row's users overflow its instance's KV cache at their whole lengths."""
    cap = step_cost(config, config.parallel).kv_capacity_tokens(config.gpu_memory_utilization,
                                                               config.max_num_batched_tokens)
    isl, osl, _ = _lengths(row)
    return row.concurrency * (isl + osl) > cap


def predict(row: SiliconRow, config: SimConfig) -> Overflow:
    isl, osl, spread = _lengths(row)
    c = row.concurrency
    replay = point_rows(config, scenario(None, isl=row.isl, osl=row.osl),
                        [LoadPoint(index=0, concurrency=c, num_requests=10 * c, warmup_requests=0)])[0]
    est = estimate(config, isl, osl, np.array([float(c)]), osl_spread=spread)
    name = (f"{row.model.split('/')[-1][:20]} {row.hardware} {row.framework} {row.precision} {row.isl}/{row.osl} "
            f"{config.label().split(' ')[0]} c={c}")
    return Overflow(name, (row.ttft_ms / 1e3, row.tpot_ms), (replay["ttft_s_mean"], replay["tpot_s_mean"] * 1e3),
                    (float(est.ttft[0]), float(est.tpot[0]) * 1e3))


def summary(label: str, pairs: list[tuple[float, float]]) -> str:
    """Share within 35% and the median |log error| of (predicted, measured) pairs."""
    err = np.array([math.log(p / m) for p, m in pairs])
    return (f"{label} within 35%: {np.mean(np.abs(np.expm1(err)) <= TOL):4.0%}, "
            f"median |error| {np.expm1(np.median(np.abs(err))):4.0%}")


def main() -> None:
    start = time.perf_counter()
    rows = [r for r in load_silicon() if r.mode == "agg" and not r.suspected_speculative and not r.inconsistent
            and not r.beyond_bandwidth and r.framework in ("vllm", "sglang")]
    found: list[Overflow] = []
    for row in rows:
        try:
            config = config_of(row)
            if overflowing(row, config):
                found.append(predict(row, config))
        except (UserError, ValueError):
            continue
    print("measured runs whose users overflow the KV cache (vLLM, SGLang): TTFT s and TPOT ms, measured | engine "
          "(--fidelity des) | estimator (simulate)")
    for o in sorted(found, key=lambda o: o.name):
        print(f"   {o.name:<58} {o.measured[0]:7.2f} {o.measured[1]:6.1f} | {o.engine[0]:7.2f} {o.engine[1]:6.1f}"
              f" | {o.estimator[0]:7.2f} {o.estimator[1]:6.1f}")
    for who, pick in (("engine   ", lambda o: o.engine), ("estimator", lambda o: o.estimator)):
        print(f"   {who} n={len(found)}  " + summary("TTFT", [(pick(o)[0], o.measured[0]) for o in found]) + "  |  "
              + summary("TPOT", [(pick(o)[1], o.measured[1]) for o in found]))
    print(f"   ({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
