"""The three seed points: scoville's prediction of the public InferenceX 8k/1k curve ends it may be fitted on.

    python bench/bench_sim_calibration.py           # predict the 9 seed figures and the Jalapeno what-if
    python bench/bench_sim_calibration.py --fit     # refit TensorRT-LLM's host costs on them first

The seeds (``data/reference/inferencex_8k1k.yaml``: gpt-oss-120b on GB200, DeepSeek-R1 and Kimi K2.5 on
GB300, all served by TensorRT-LLM/Dynamo) are the only end-to-end figures the simulator may be fitted on;
every other public result is validation (``bench_sim_validation.py``). What the fit sets is what no
kernel table knows: TensorRT-LLM's host time per step and per sequence. Kernel times come from the
measured tables, and ``kernel_scale`` (a whole module against the sum of its kernels) from the module
tables (``bench_module_scale.py``); see the note in ``tests/sim/test_cost_calibration.py`` for where the seeds
land. Each figure is read off the frontier of a search over the deployments InferenceX ran them on: Dynamo
disaggregated prefill/decode pools (every InferenceX NVL72 configuration of the three models has
``disagg: true``; the reference file says ``deployments: disaggregated``), no MTP (the published 8k/1k ends
are the non-speculative curves), and the concurrency capped where InferenceX's configuration stopped
(``max_concurrency`` in the reference file: 512 for gpt-oss, 3,228 for DeepSeek-R1, 2,253 for Kimi K2.5).

Then the Jalapeno what-if: the same search on the preliminary Jalapeno entry beside its published claims,
with what each claim requires of the chip.
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import yaml

from scoville.catalog.hardware import load_hardware
from scoville.sim.config import SimConfig
from scoville.sim.frameworks import FrameworkCosts, load_framework, overridden
from scoville.sim.search import SearchSpace, search

FIT_KEYS = ("step_overhead_us", "seq_overhead_us")
PRIOR = {"step_overhead_us": (50.0, 1.0), "seq_overhead_us": (0.5, 1.0)}  # (centre, log sd)


@dataclass
class Figures:
    peak_tput_per_kw: float
    max_interactivity: float
    min_e2e_s: float
    tput_per_kw_at_max_interactivity: float


def reference() -> dict[str, Any]:
    path = Path(str(resources.files("scoville") / "data" / "reference" / "inferencex_8k1k.yaml"))
    return yaml.safe_load(path.read_text())


def predict(model: str, hardware: str, precision: str | None, framework: FrameworkCosts, mtp: str = "off",
            unified: bool = True, max_concurrency: int = 1024) -> Figures:
    """The four yardsticks of the search's frontier (8k/1k, InferenceX draws and protocol); ``unified`` False
    searches disaggregated pools only."""
    base = SimConfig(hardware=hardware, model=model, precision=precision, kv_dtype="fp8", framework="trtllm")
    with overridden(framework):
        r = search(base, 0.9 * 8192, 0.9 * 1024, osl_spread=1 / 0.9, points=64,
                   space=SearchSpace(mtp=mtp, max_concurrency=max_concurrency, unified=unified))
    kw = load_hardware(hardware).rated_watts / 1000.0
    x = np.array([p.interactivity for p in r.frontier])
    y = np.array([p.total_tput_per_accelerator for p in r.frontier]) / kw
    e2e = np.array([p.e2e for p in r.frontier])
    return Figures(float(y.max()), float(x.max()), float(e2e.min()), float(y[np.argmax(x)]))


def errors(ref: dict[str, Any], costs: FrameworkCosts) -> list[tuple[str, str, float, float]]:
    """(model@hardware, figure, published, predicted) for the 9 seed figures."""
    out = []
    unified = ref["deployments"] != "disaggregated"
    for pt in ref["points"]:
        fig = predict(pt["model"], pt["hardware"], pt["precision"], costs, unified=unified,
                      max_concurrency=pt["max_concurrency"])
        for key in ("peak_tput_per_kw", "max_interactivity", "min_e2e_s", "tput_per_kw_at_max_interactivity"):
            if key in pt:
                out.append((f"{pt['model']}@{pt['hardware']}", key, float(pt[key]), float(getattr(fig, key))))
    return out


def fit(ref: dict[str, Any], start: FrameworkCosts) -> FrameworkCosts:
    """Nelder-Mead on squared log errors of the 9 figures plus a weak log-normal prior on each factor."""
    from scipy.optimize import minimize

    def unpack(x: np.ndarray) -> FrameworkCosts:
        vals = dict(zip(FIT_KEYS, np.exp(x), strict=True))
        return msgspec.structs.replace(start, **vals)

    def loss(x: np.ndarray) -> float:
        rows = errors(ref, unpack(x))
        data = sum(np.log(pred / pub) ** 2 for _, _, pub, pred in rows)
        prior = sum(((xi - np.log(PRIOR[k][0])) / PRIOR[k][1]) ** 2 for k, xi in zip(FIT_KEYS, x, strict=True))
        return float(data + 0.1 * prior)

    x0 = np.log([getattr(start, k) for k in FIT_KEYS])
    res = minimize(loss, x0, method="Nelder-Mead", options={"maxiter": 80, "xatol": 0.02, "fatol": 1e-3})
    return unpack(res.x)


def _with_kernel_factor(hw_name: str, factor: float, folder: Path) -> str:
    """A copy of a catalog entry whose kernels run ``factor`` x the transfer model's times (a what-if)."""
    raw = msgspec.to_builtins(load_hardware(hw_name))
    raw["efficiency"] = {**raw.get("efficiency", {}), "kernel_factor": factor}
    path = folder / f"{hw_name}-kf{factor:.6f}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def required_factor(model: str, precision: str, key: str, claim: float, folder: Path, max_concurrency: int) -> float:
    """The kernel_factor at which the search reaches ``claim`` (bisection in log space; kernels faster than the
    NVIDIA-fitted transfer model when < 1)."""
    lo, hi = math.log(0.02), math.log(5.0)
    better = (lambda v: v <= claim) if key == "min_e2e_s" else (lambda v: v >= claim)
    for _ in range(9):
        mid = (lo + hi) / 2
        fig = predict(model, _with_kernel_factor("jalapeno", math.exp(mid), folder), precision,
                      load_framework("trtllm"), mtp="auto", max_concurrency=max_concurrency)
        if better(getattr(fig, key)):
            lo = mid
        else:
            hi = mid
    return math.exp((lo + hi) / 2)


def jalapeno(ref: dict[str, Any]) -> None:
    """The what-if: the search on the preliminary Jalapeno entry beside each published claim, and the kernel speed
    each claim requires (relative to NVIDIA-grade kernels on the same datasheet). Its deployments are unknown, so
    unified instances and disaggregated pools are both searched, and MTP; users up to the seed's cap."""
    claims = ref["claims"]
    hw = load_hardware(claims["hardware"])
    folder = Path(tempfile.mkdtemp(prefix="jalapeno-"))
    print(f"\nJalapeno what-if (preliminary entry; rated {hw.rated_watts:.0f} W; transfer model, TensorRT-LLM-grade "
          f"stack, MTP searched) vs its published claims")
    print(f"  {'model':14s} {'figure':20s} {'claim':>9s} {'scoville':>9s} {'ratio':>6s}  requires kernels at")
    seeds = {p["model"]: p for p in ref["points"]}
    for c in claims["points"]:
        prec, users = seeds[c["model"]]["precision"], seeds[c["model"]]["max_concurrency"]
        fig = predict(c["model"], "jalapeno", prec, load_framework("trtllm"), mtp="auto", max_concurrency=users)
        for key in ("peak_tput_per_kw", "max_interactivity", "min_e2e_s"):
            if key in c:
                pred = getattr(fig, key)
                need = required_factor(c["model"], prec, key, c[key], folder, users)
                print(f"  {c['model']:14s} {key:20s} {c[key]:9.4g} {pred:9.4g} {pred / c[key]:6.2f}  "
                      f"{need:5.2f}x the NVIDIA-fitted kernel times")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    ap.add_argument("--fit", action="store_true", help="refit TensorRT-LLM's factors on the seeds and print them")
    ap.add_argument("--no-jalapeno", action="store_true")
    args = ap.parse_args(argv)
    ref = reference()
    costs = load_framework("trtllm")
    if args.fit:
        t0 = time.perf_counter()
        costs = fit(ref, costs)
        fitted = ", ".join(f"{k}={getattr(costs, k):.4g}" for k in FIT_KEYS)
        print(f"fitted in {time.perf_counter() - t0:.0f} s: {fitted}")
    print(f"{'seed':26s} {'figure':34s} {'published':>10s} {'scoville':>10s} {'error':>7s}")
    for name, key, pub, pred in errors(ref, costs):
        print(f"{name:26s} {key:34s} {pub:10.4g} {pred:10.4g} {pred / pub - 1:+7.0%}")
    if not args.no_jalapeno:
        jalapeno(ref)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
