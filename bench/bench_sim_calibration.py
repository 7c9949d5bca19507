"""Calibration bench: scoville.sim's predictions beside the public InferenceX 8k/1k points, with errors.

    python bench/bench_sim_calibration.py            # predict with the shipped coefficients
    python bench/bench_sim_calibration.py --fit      # refit the Blackwell family's coefficients first

For each reference (model, system) it searches serving configurations (parallelism, per-instance
concurrency 1..2048, unified chunked prefill or prefill/decode disaggregation with integer pool sizes)
and keeps the frontier, then reads off the same three yardsticks InferenceX publishes: peak total
throughput per rated kW, highest interactivity (1/TPOT), lowest E2E latency. Then it predicts the
Jalapeno entry on the same scenarios beside the chip's published claims.

The frontier comes from a steady-state estimate of the closed-loop benchmark built on
scoville.sim.cost.StepCost (every term of a step is the real cost model; only the scheduling is
averaged): with C requests in flight on an instance, each request's life is OSL decode steps of a
C-sequence batch plus the marginal cost of the C prefills that enter during it. ``--engine`` instead runs
the discrete-event engine through ``scoville.sim.search`` when that module is installed.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import yaml

from scoville.sim.cost import Parallel, StepCost
from scoville.sim.hardware import Hardware, load_hardware
from scoville.sim.models import ModelArch, load_model

CONC = np.array([1, 2, 4, 8, 16, 32, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048], dtype=float)
TOKEN_BUDGET = 8192          # max_num_batched_tokens for chunked prefill (unified)
PREFILL_UTIL = 0.8           # a prefill pool runs at most this busy (queueing headroom)
MAX_SEQS_PER_RANK = 256      # max_num_seqs / max batch size per attention rank in the InferenceX recipes


@dataclass
class Point:
    interactivity: float     # tok/s/user = 1 / TPOT
    tput_per_gpu: float      # total (input + output) tok/s per accelerator
    e2e: float
    label: str
    cfg: dict[str, Any] = field(default_factory=dict)   # SimConfig fields that reproduce this point
    conc: int = 1            # total concurrency of the deployment


def _par(p: Parallel) -> dict[str, int]:
    return {"tp": p.tp, "ep": p.ep, "dp": p.dp}


def _spec_cfg(spec: tuple[int, float] | None) -> dict[str, Any]:
    return {} if spec is None else {"speculative": {"num_draft_tokens": spec[0], "acceptance_rate": spec[1]}}


def reference() -> dict[str, Any]:
    path = Path(str(resources.files("scoville") / "data" / "reference" / "inferencex_8k1k.yaml"))
    return yaml.safe_load(path.read_text())


def _parallel_options(model: ModelArch, hw: Hardware, max_gpus: int) -> list[Parallel]:
    out = []
    for n in (1, 2, 4, 8, 16, 32):
        if n > max_gpus:
            continue
        for tp in (1, 2, 4, 8):
            if n % tp:
                continue
            dp = n // tp
            eps = {1, n} if model.num_experts else {1}
            for ep in eps:
                if model.num_experts and ep > model.num_experts:
                    continue
                if dp > 1 and ep == 1 and model.num_experts:
                    continue  # DP attention only pays with EP
                if dp > 1 and not model.num_experts:
                    continue  # dense models: replicas, not DP attention
                out.append(Parallel(tp=tp, ep=ep, dp=dp))
    return out


def _decode_step(c: StepCost, conc: np.ndarray, ctx: float, spec: tuple[int, float] | None) -> tuple[np.ndarray, float]:
    """(seconds per decode step, output tokens per sequence per step)."""
    if spec is None:
        return c.step_time(conc, conc, conc * ctx, conc * ctx), 1.0
    k, accept = spec
    toks = conc * (k + 1)
    # k sequential MTP/draft passes of one layer's worth of the batch each, then a (k+1)-token verify
    draft = k * c.step_time(conc, conc, conc * ctx, conc * ctx) / max(c.model.num_layers, 1) * 2
    al = (1 - accept ** (k + 1)) / (1 - accept)
    return c.step_time(toks, conc, toks * ctx, conc * ctx) + draft, al


def unified_points(c: StepCost, isl: float, osl: float, spec=None) -> list[Point]:
    cap = c.kv_capacity_tokens(0.9, TOKEN_BUDGET)
    conc = CONC[(CONC * (isl + osl) <= cap) & (CONC <= MAX_SEQS_PER_RANK * c.par.dp)]
    if conc.size == 0:
        return []
    ctx = isl + osl / 2
    t_dec, al = _decode_step(c, conc, ctx, spec)
    chunks = math.ceil(isl / TOKEN_BUDGET)
    q = isl / chunks
    # A step carries the running decodes plus at most one prefill chunk (the token budget); during one
    # request's life the other C-1 requests each enter once, so its life spans max(steps, chunks*(C-1))
    # steps, that many of them carrying a prefill chunk.
    t_mix = c.step_time(q + conc, conc + 1, q * q / 2 + q * (isl - q) / 2 + conc * ctx, isl / 2 + conc * ctx)
    t_dec1 = c.step_time(conc, conc, conc * ctx, conc * ctx)
    t_mix_spec = t_mix + (t_dec - t_dec1)          # the same step with the draft/verify work of spec decoding
    steps = osl / al
    n_mix_all = chunks * (conc - 1)
    life = np.maximum(steps, n_mix_all)
    n_mix = np.minimum(n_mix_all, life)
    ttft = chunks * t_mix_spec * (1 + (conc - 1) / np.maximum(life, 1) / 2)
    e2e = ttft + n_mix * t_mix_spec + (life - n_mix) * t_dec
    tpot = (e2e - ttft) / max(osl - 1, 1)
    tput = conc * (isl + osl) / e2e / c.accelerators
    lab = f"tp{c.par.tp}ep{c.par.ep}dp{c.par.dp}"
    return [Point(1 / tp_, tp_g, e, f"{lab} c{int(cc)}",
                  {"parallel": _par(c.par), "max_num_seqs": int(cc), "max_num_batched_tokens": TOKEN_BUDGET,
                   **_spec_cfg(spec)}, int(cc))
            for tp_, tp_g, e, cc in zip(tpot, tput, e2e, conc)]


def disagg_points(pc: StepCost, dc: StepCost, isl: float, osl: float, max_gpus: int, spec=None) -> list[Point]:
    cap = dc.kv_capacity_tokens(0.9, TOKEN_BUDGET)
    conc = CONC[(CONC * (isl + osl) <= cap) & (CONC <= MAX_SEQS_PER_RANK * dc.par.dp)]
    if conc.size == 0 or not pc.fits:
        return []
    ctx = isl + osl / 2
    t_dec, al = _decode_step(dc, conc, ctx, spec)
    tpot = t_dec / al
    b = max(1, int(16384 // isl))                         # requests per prefill step
    t_p = pc.step_time(b * isl, b, b * isl * isl / 2, b * isl) / b   # seconds of prefill instance per request
    ttft = t_p * b + pc.kv_transfer_time(int(isl), scaleout=False)
    e2e = ttft + osl * tpot
    out = []
    for n_d in (1, 2, 3, 4, 6, 8, 12, 16):
        rate = n_d * conc / e2e                            # requests/s the decode pool completes
        n_p = np.maximum(1, np.ceil(rate * t_p / PREFILL_UTIL))
        gpus = n_d * dc.accelerators + n_p * pc.accelerators
        ok = gpus <= max_gpus
        tput = rate * (isl + osl) / gpus
        lab = f"P tp{pc.par.tp}ep{pc.par.ep}dp{pc.par.dp} : D tp{dc.par.tp}ep{dc.par.ep}dp{dc.par.dp}"
        out += [Point(1 / tp_, tg, e, f"{lab} {int(np_)}p{n_d}d c{int(cc)}",
                      {"max_num_seqs": int(cc), "disaggregation": {
                          "prefill": {"parallel": _par(pc.par), "replicas": int(np_), "max_num_batched_tokens": 16384},
                          "decode": {"parallel": _par(dc.par), "replicas": n_d}}, **_spec_cfg(spec)}, int(cc) * n_d)
                for tp_, tg, e, cc, np_, k in zip(tpot, tput, e2e, conc, n_p, ok) if k]
    return out


def pinned_disagg_points(pc: StepCost, n_p: int, dc: StepCost, n_d: int, concs: list[int], isl: float,
                         osl: float) -> list[Point]:
    """Fixed pools (InferenceX recipe shapes): the closed loop runs at the slower of the decode pool's
    completion rate and the prefill pool's capacity; when prefill is the bottleneck requests queue for it,
    so fewer are decoding and TPOT is that of the smaller batch (three fixed-point passes)."""
    ctx = isl + osl / 2
    b = max(1, int(16384 // isl))
    t_p = pc.step_time(b * isl, b, b * isl * isl / 2, b * isl) / b
    cap_p = n_p / t_p
    gpus = n_p * pc.accelerators + n_d * dc.accelerators
    out = []
    for conc in concs:
        decoding = float(conc)
        for _ in range(3):
            per = max(decoding / n_d, 1.0)
            tpot = float(dc.step_time(per, per, per * ctx, per * ctx))
            rate_dec = conc / (t_p * b + osl * tpot)
            rate = min(rate_dec, cap_p)
            decoding = min(conc, rate * osl * tpot)
        e2e = conc / rate
        lab = f"pinned {n_p}xP tp{pc.par.tp} : {n_d}xD tp{dc.par.tp}ep{dc.par.ep}dp{dc.par.dp} c{conc}"
        cfg = {"max_num_seqs": max(1, -(-conc // n_d)), "disaggregation": {
            "prefill": {"parallel": _par(pc.par), "replicas": n_p, "max_num_batched_tokens": 16384},
            "decode": {"parallel": _par(dc.par), "replicas": n_d}}}
        out.append(Point(1 / tpot, rate * (isl + osl) / gpus, e2e, lab, cfg, conc))
    return out


def recipe_points(model: ModelArch, hw: Hardware, precision: str | None, kv_dtype: str, isl: float, osl: float,
                  recipes: list[dict[str, Any]]) -> list[Point]:
    pts: list[Point] = []
    for r in recipes:
        P, D = r["prefill"], r["decode"]
        par = lambda d: Parallel(tp=d.get("tp", 1), ep=d.get("ep", 1), dp=d.get("dp", 1))  # noqa: E731
        pc = StepCost(model, hw, par(P), precision, kv_dtype)
        dc = StepCost(model, hw, par(D), precision, kv_dtype)
        pts += pinned_disagg_points(pc, P.get("workers", 1), dc, D.get("workers", 1), r["conc"], isl, osl)
    return pts


def search(model: ModelArch, hw: Hardware, precision: str | None, kv_dtype: str, isl: float, osl: float,
           disagg: bool, spec=None) -> list[Point]:
    max_gpus = hw.scaleup_domain if hw.scaleup_domain > 8 else 8
    pts: list[Point] = []
    costs = [StepCost(model, hw, p, precision, kv_dtype) for p in _parallel_options(model, hw, min(max_gpus, 32))]
    costs = [c for c in costs if c.fits]
    for sp in {None, spec}:               # speculative decoding is an option the search may decline
        for c in costs:
            pts += unified_points(c, isl, osl, sp)
        if disagg:
            pre = [c for c in costs if c.accelerators <= 8]
            for pc in pre:
                for dc in costs:
                    pts += disagg_points(pc, dc, isl, osl, max_gpus, sp)
    return pts


def yardsticks(pts: list[Point], watts: float, at_interactivity: float | None = None) -> dict[str, float]:
    """InferenceX's published figures, read off a set of simulated points."""
    if not pts:
        return {}
    kw = watts / 1000
    out = {
        "peak_tput_per_kw": max(p.tput_per_gpu for p in pts) / kw,
        "max_interactivity": max(p.interactivity for p in pts),
        "min_e2e_s": min(p.e2e for p in pts),
    }
    best = max(pts, key=lambda p: p.interactivity)
    out["tput_per_kw_at_max_interactivity"] = best.tput_per_gpu / kw
    if at_interactivity is not None:
        ok = [p.tput_per_gpu for p in pts if p.interactivity >= at_interactivity]
        out[f"tput_per_kw_at_{int(at_interactivity)}"] = max(ok) / kw if ok else float("nan")
    top = max(pts, key=lambda p: p.tput_per_gpu)
    out["_best_tput_config"] = top.label
    out["_best_interactivity_config"] = best.label
    out["_points"] = (top, best)
    return out


def with_efficiency(hw: Hardware, **eff: float) -> Hardware:
    return msgspec.structs.replace(hw, efficiency={**hw.efficiency, **eff})


def predict(ref_point: dict[str, Any], hw: Hardware, scenario: dict[str, Any], disagg: bool = True,
            at: float | None = None, pinned: bool = False, spec: tuple[int, float] | None = None) -> dict[str, float]:
    """Yardsticks over scoville's own config search, or (``pinned``) over the recipes InferenceX ran."""
    r = scenario["range_ratio"]
    isl, osl = scenario["isl"] * (1 + r) / 2, scenario["osl"] * (1 + r) / 2
    model = load_model(ref_point["model"])
    prec = ref_point.get("precision")
    if prec == model.default_precision:
        prec = None
    if pinned:
        pts = recipe_points(model, hw, prec, "fp8", isl, osl, ref_point["recipes"])
    else:
        pts = search(model, hw, prec, "fp8", isl, osl, disagg, spec)
    return yardsticks(pts, hw.rated_watts, at)


FIT_KEYS = ("compute", "memory", "step_overhead_us", "kernel_overhead_us", "collective_us")
PRIOR_WEIGHT = 0.1
METRICS = ("peak_tput_per_kw", "max_interactivity", "min_e2e_s", "tput_per_kw_at_max_interactivity")


def errors(ref: dict[str, Any], eff: dict[str, float] | None = None) -> list[tuple[str, str, float, float, float]]:
    """(scenario, metric, reference, predicted, searched): ``predicted`` is over the recipes InferenceX ran
    where the reference file lists them, else over scoville's search; ``searched`` is always the search."""
    rows = []
    for p in ref["points"]:
        hw = load_hardware(p["hardware"])
        if eff:
            hw = with_efficiency(hw, **eff)
        searched = predict(p, hw, ref["scenario"])
        pred = predict(p, hw, ref["scenario"], pinned=True) if p.get("recipes") else searched
        for m in METRICS:
            if m in p:
                rows.append((f"{p['model']} on {p['hardware']}", m, float(p[m]), float(pred.get(m, float("nan"))),
                             float(searched.get(m, float("nan")))))
    return rows


def fit(ref: dict[str, Any]) -> dict[str, float]:
    """Least squares on log errors over every reference figure, for the Blackwell family's coefficients (FIT_KEYS)."""
    from scipy.optimize import minimize

    lo = np.array([0.2, 0.4, 20.0, 0.5, 1.0])
    hi = np.array([0.9, 0.95, 3000.0, 200.0, 100.0])

    def unpack(x: np.ndarray) -> dict[str, float]:
        v = lo + (hi - lo) / (1 + np.exp(-x))
        return dict(zip(FIT_KEYS, map(float, v)))

    prior = {k: v for k, v in load_hardware("gb300").to_dict()["efficiency_in_force"].items() if k in FIT_KEYS}
    prior.update(compute=0.55, memory=0.80)     # AIC / BLIS priors (families.yaml header)

    def loss(x: np.ndarray) -> float:
        eff = unpack(x)
        rows = errors(ref, eff)
        fit_term = sum(math.log(pred / refv) ** 2 if pred == pred and pred > 0 else 25.0 for _, _, refv, pred, _ in rows)
        # weak log-normal prior on the two efficiencies keeps them physical when the data cannot tell them apart
        prior_term = PRIOR_WEIGHT * sum(math.log(eff[k] / prior[k]) ** 2 for k in ("compute", "memory"))
        return float(fit_term + prior_term)

    hw = load_hardware("gb300")
    start = np.array([hw.eff(k) for k in FIT_KEYS])       # start from the shipped values
    frac = np.clip((start - lo) / (hi - lo), 0.02, 0.98)
    x0 = np.log(frac / (1 - frac))
    simplex = np.vstack([x0] + [x0 + 0.6 * np.eye(len(FIT_KEYS))[i] for i in range(len(FIT_KEYS))])
    res = minimize(loss, x0, method="Nelder-Mead",
                   options={"maxfev": 300, "xatol": 1e-2, "fatol": 1e-4, "initial_simplex": simplex})
    return unpack(res.x)


# What the Jalapeno entry would have to believe: each rung adds one belief to the previous ones.
LADDER: list[tuple[str, dict[str, Any]]] = [
    ("catalog entry (Blackwell-fitted software efficiency)", {}),
    ("+ HBM streams at 90% (each core on its own HBM slice)", {"eff": {"memory": 0.90}}),
    ("+ compute at 80% of peak", {"eff": {"compute": 0.80, "attention_compute": 0.60}}),
    ("+ no per-kernel/per-step/collective software gaps", {"eff": {"kernel_overhead_us": 0.0, "step_overhead_us": 0.0,
                                                                   "collective_us": 0.0}}),
    ("+ speculative decoding, 3 drafts at 80% acceptance (AL 2.95)", {"spec": (3, 0.8)}),
    ("+ rated power read as measured 550 W", {"watts": "measured"}),
]


SHORT = {"gpt-oss-120b": "oss", "deepseek-r1": "dsr1", "kimi-k2.5": "kimi", "peak_tput_per_kw": "peak/kW",
         "max_interactivity": "tok/s/u", "min_e2e_s": "E2E", "tput_per_kw_at_169": "@169/kW"}


def overhead_scan(ref: dict[str, Any]) -> None:
    """How small the per-kernel overhead must be, with and without speculative decoding, for the
    interactivity and E2E claims (everything else at the catalog's values)."""
    claims = {c["model"]: c for c in ref["claims"]["points"]}
    base = load_hardware(ref["claims"]["hardware"])
    print("\nJalapeno interactivity / lowest E2E against the per-kernel overhead (claims in brackets)")
    print(f"{'spec decoding':18s} {'kernel us':>9s}" + "".join(f"{SHORT[m] + ' tok/s/u':>16s}{'E2E s':>12s}" for m in claims))
    for spec in (None, (3, 0.8)):
        for ko in (base.eff("kernel_overhead_us"), 1.0, 0.5, 0.25, 0.0):
            hw = with_efficiency(base, kernel_overhead_us=ko)
            cells = []
            for m, c in claims.items():
                ref_pt = next(p for p in ref["points"] if p["model"] == m)
                pr = predict({**ref_pt, "hardware": base.name}, hw, ref["scenario"], disagg=False, spec=spec)
                e2e_claim = f"({c['min_e2e_s']:.2f})" if "min_e2e_s" in c else ""
                cells.append(f"{pr['max_interactivity']:8.0f} ({c['max_interactivity']:4d}) {pr['min_e2e_s']:5.2f} {e2e_claim:>6s}")
            label = "AL 2.95 (3 drafts)" if spec else "none"
            print(f"{label:18s} {ko:9.3g}" + "".join(f"{cell:>28s}" for cell in cells))


def what_if(ref: dict[str, Any]) -> None:
    claims = ref["claims"]
    base = load_hardware(claims["hardware"])
    keys = ("peak_tput_per_kw", "max_interactivity", "min_e2e_s", "tput_per_kw_at_169")
    print("\nWhat Jalapeno must believe to reach its claims (ratio scoville/claim; >= 1 means reached, E2E: <= 1)")
    header = "".join(f"{SHORT[c['model']] + ' ' + SHORT[k]:>13s}" for c in claims["points"] for k in keys if k in c)
    print(f"{'belief':62s}{header}")
    eff: dict[str, float] = {}
    spec = None
    watts = "rated"
    for label, change in LADDER:
        eff.update(change.get("eff", {}))
        spec = change.get("spec", spec)
        watts = change.get("watts", watts)
        hw = with_efficiency(base, **eff)
        cells = []
        for c in claims["points"]:
            ref_pt = next(p for p in ref["points"] if p["model"] == c["model"])
            pred = predict({**ref_pt, "hardware": base.name}, hw, ref["scenario"], disagg=False,
                           at=169.0 if "tput_per_kw_at_169" in c else None, spec=spec)
            scale = hw.rated_watts / hw.power_watts(watts)
            for k in keys:
                if k in c:
                    v = pred.get(k, float("nan")) * (scale if "per_kw" in k else 1.0)
                    cells.append(f"{v / c[k]:13.2f}")
        print(f"{label:62s}{''.join(cells)}")


def engine_check(ref: dict[str, Any], requests_per_lane: int) -> None:
    """Run the discrete-event engine (scoville.sim.driver) on the steady state's winning configurations."""
    from scoville.load import LoadPoint
    from scoville.sim.config import SimConfig
    from scoville.sim.driver import point_rows
    from scoville.workload.scenarios import resolve_workload

    workload = resolve_workload("8k1k", seed=0)
    print("\nDiscrete-event engine on the steady state's winning configurations (same cost model)")
    print(f"{'scenario':28s} {'config':48s} {'':6s} {'tok/s/kW':>10s} {'tok/s/user':>10s} {'E2E s':>7s} {'wall s':>7s}")
    for p in ref["points"]:
        hw = load_hardware(p["hardware"])
        pred = predict(p, hw, ref["scenario"], pinned=bool(p.get("recipes")))
        model = load_model(p["model"])
        prec = None if p.get("precision") == model.default_precision else p.get("precision")
        for pt in pred["_points"]:
            cfg = SimConfig(hardware=hw.name, model=p["model"], precision=prec, kv_dtype="fp8", **pt.cfg)
            lp = LoadPoint(index=0, concurrency=pt.conc, num_requests=max(16, requests_per_lane * pt.conc),
                           warmup_requests=pt.conc)
            t0 = time.perf_counter()
            row = point_rows(cfg, workload, [lp])[0]
            wall = time.perf_counter() - t0
            kw = hw.rated_watts / 1000
            name = f"{p['model']} on {p['hardware']}"
            print(f"{name:28s} {pt.label[:48]:48s} {'steady':6s} {pt.tput_per_gpu / kw:10.4g} {pt.interactivity:10.4g} "
                  f"{pt.e2e:7.3g}")
            print(f"{'':28s} {'':48s} {'engine':6s} {row['total_throughput_per_accelerator'] / kw:10.4g} "
                  f"{(row.get('interactivity') or float('nan')):10.4g} {row['e2e_s_median']:7.3g} {wall:7.1f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fit", action="store_true", help="refit the Blackwell family's coefficients on the reference points")
    ap.add_argument("--engine", action="store_true", help="also run the discrete-event engine on the winning configs")
    ap.add_argument("--requests-per-lane", type=int, default=3, help="engine check: measured requests per concurrency lane")
    args = ap.parse_args(argv)
    ref = reference()
    t0 = time.perf_counter()
    eff = None
    if args.fit:
        eff = fit(ref)
        print(f"fitted blackwell coefficients ({time.perf_counter() - t0:.1f} s):",
              ", ".join(f"{k}={v:.4g}" for k, v in eff.items()))
    else:
        fam = load_hardware("gb300")
        print("blackwell coefficients in force:", ", ".join(f"{k}={fam.eff(k):.4g}" for k in FIT_KEYS))
    print("\nInferenceX 8k/1k reference points (throughput = total tokens/s per GPU per rated kW)")
    print("scoville = prediction for the configurations InferenceX ran where the reference lists them (pinned),")
    print("else over scoville's own config search; 'searched' = best over scoville's search (what the system could do)")
    print(f"{'scenario':28s} {'metric':34s} {'reference':>10s} {'scoville':>10s} {'error':>8s} {'searched':>10s}")
    worst = 0.0
    for name, metric, refv, pred, srch in errors(ref, eff):
        err = pred / refv - 1
        worst = max(worst, abs(err))
        print(f"{name:28s} {metric:34s} {refv:10.4g} {pred:10.4g} {err:+8.1%} {srch:10.4g}")
    print(f"worst |error| = {worst:.1%} (target <= 25%)")
    claims = ref["claims"]
    jal = load_hardware(claims["hardware"])
    print(f"\nJalapeno (unified serving; rated {jal.rated_watts:.0f} W, measured {jal.measured_watts:.0f} W) vs published claims")
    print(f"{'model':16s} {'metric':34s} {'claim':>10s} {'scoville':>10s} {'ratio':>7s}")
    for c in claims["points"]:
        ref_pt = next(p for p in ref["points"] if p["model"] == c["model"])
        at = 169.0 if "tput_per_kw_at_169" in c else None
        pred = predict({**ref_pt, "hardware": "jalapeno"}, jal, ref["scenario"], disagg=False, at=at)
        for m, v in c.items():
            if m == "model":
                continue
            got = pred.get(m, float("nan"))
            print(f"{c['model']:16s} {m:34s} {v:10.4g} {got:10.4g} {got / v:7.2f}x")
        print(f"{'':16s} best-throughput config: {pred['_best_tput_config']}; fastest: {pred['_best_interactivity_config']}")
    what_if(ref)
    overhead_scan(ref)
    if args.engine:
        engine_check(ref, args.requests_per_lane)
    print(f"\nwall time {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
