"""View 1p: InferenceX's published DeepSeek-R1 runs, as its dashboard's API serves them, each pinned on its own
deployment.

``bench/data/inferencex_api_dsr1.csv`` (written by ``import_inferencex_api.py``, which says where the rows come
from) holds 1,667 runs of October 2025 to June 2026 on B200, B300, GB200, GB300, H100, H200, MI300X, MI325X and
MI355X, each with its serving stack and image, weights, layout, lengths, concurrency, date and medians. They are
validation only: nothing here was fitted on them. Unlike silicon_sample.csv they include AMD's systems (SGLang,
ATOM and MoRI-SGLang runs), and unlike the compare pages every row names its deployment and date.

Priced here: aggregated runs on their layout and disaggregated ones on their pools and worker counts. The API says
only that a run drafted, not how deep: an aggregated MTP run takes its InferenceX script's depth (``SCRIPT_MTP_DEPTH``,
the scripts of August 2026), a disaggregated one its Dynamo recipe's where the recipes on file name one depth for its
pools (else it is left out), at the search's acceptance for that depth. An aggregated run takes what its script set
beyond that as view 1 and 1s take it for silicon_sample.csv's runs (``validation_settings``: SGLang's poll for new
requests, TensorRT-LLM's batch waiting, token budgets and attention-DP balance, the drafts' overlap scheduling), read
off NVIDIA's scripts, so AMD's runs take their defaults but for the KV cache their scripts ran (``AUTO_KV_UNTIL``).
Its TTFT is the estimate's median, as the API's is. Left out: rows with no worker count
(GB200's Dynamo runs of late 2025 that write the deployment's GPU total as its tensor parallelism) and rows whose
stated layout cannot hold the weights (GB200's Dynamo SGLang runs, which write each worker as one GPU). ATOM,
AMD's serving engine (``rocm/atom``), is priced with vLLM's scheduler and host costs, as view 1b prices its runs;
MoRI-SGLang and Dynamo SGLang with SGLang's, Dynamo TensorRT-LLM with TensorRT-LLM's.
"""

from __future__ import annotations

import csv
import itertools
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from scoville.catalog.hardware import load_hardware
from scoville.catalog.models import load_model
from scoville.errors import UserError
from scoville.sim.analytic import band
from scoville.sim.config import SimConfig
from scoville.sim.defaults import resolve_kv_dtype
from scoville.sim.engine import step_cost
from scoville.sim.recipes import Pool, Recipe, recipe_configs, recipes_for
from scoville.sim.steady import estimate
from validation_data import PRECISION, RANGE, RATIO_TOL, TOL, SiliconRow, checkpoint_precision
from validation_settings import inferencex_recipe, served_layout

DATA = Path(__file__).resolve().parent / "data" / "inferencex_api_dsr1.csv"
MODEL = "deepseek-r1"
# the API's serving stacks -> the framework whose scheduler and host costs price them
FRAMEWORK = {"sglang": "sglang", "trt": "trtllm", "atom": "vllm", "dynamo-sglang": "sglang",
             "dynamo-trt": "trtllm", "mori-sglang": "sglang"}
# InferenceX's aggregated MTP scripts (benchmarks/single_node/fixed_seq_len/dsr1_*_mtp.sh @ 843c6254, 2026-08):
# TensorRT-LLM's num_nextn_predict_layers 3, 1 under attention DP; SGLang's --speculative-num-steps 2 on NVIDIA's
# systems, 3 on AMD's; ATOM's --num-speculative-tokens 3. (stack, AMD system?) -> depth; TensorRT-LLM's under
# attention DP is ``TRT_ADP_MTP_DEPTH``.
SCRIPT_MTP_DEPTH = {("trt", False): 3, ("sglang", False): 2, ("sglang", True): 3, ("atom", True): 3}
TRT_ADP_MTP_DEPTH = 1


@dataclass(frozen=True)
class ApiRun:
    """One published run: its deployment (InferenceX's convention: ``tp`` counts an instance's GPUs) and medians."""

    date: str
    hardware: str
    stack: str                    # the API's framework name (sglang, trt, atom, dynamo-trt, mori-sglang, ...)
    image: str
    precision: str                # the API's weights (fp8, fp4)
    drafts: bool                  # ran MTP (depth not recorded)
    disaggregated: bool
    isl: int
    osl: int
    concurrency: int
    decode: Pool                  # the instance that decodes (the only one when aggregated)
    prefill: Pool | None          # disaggregated only
    ttft_ms: float
    tpot_ms: float
    tput_per_gpu: float           # total tokens/s per GPU

    @property
    def framework(self) -> str:
        return FRAMEWORK[self.stack]

    @property
    def amd(self) -> bool:
        return load_hardware(self.hardware).vendor == "amd"


@dataclass(frozen=True)
class ApiCmp:
    """One run beside its prediction (bands: the prediction's 80% band)."""

    group: str
    run: ApiRun
    measured: dict[str, float]    # tpot, ttft, tput
    predicted: dict[str, float]
    bands: dict[str, tuple[float, float]]

    @property
    def scope(self) -> tuple[str, str, str, bool]:
        """The model's name, the system, the framework that priced it and whether the run drafted (the track
        record's scope)."""
        return load_model(MODEL).name, self.run.hardware, self.run.framework, self.run.drafts


def load_api_runs(path: Path = DATA) -> list[ApiRun]:
    """Every run on file (an empty list when the file is missing)."""
    if not path.exists():
        return []
    out = []
    with path.open() as f:
        for r in csv.DictReader(f):
            disagg = r["disagg"] == "1"
            decode = Pool(int(r["decode_workers"]) if disagg else 1, int(r["tp"]), int(r["ep"]),
                          r["dp_attention"] == "1")
            prefill = (Pool(int(r["prefill_workers"]), int(r["prefill_tp"]), int(r["prefill_ep"]),
                            r["prefill_dp_attention"] == "1") if disagg else None)
            out.append(ApiRun(r["date"], r["hardware"], r["framework"], r["image"], r["precision"],
                              r["spec"] == "mtp", disagg, int(r["isl"]), int(r["osl"]), int(r["conc"]), decode,
                              prefill, float(r["ttft_ms"]), float(r["tpot_ms"]), float(r["tput_per_gpu"])))
    return out


def mtp_depth(run: ApiRun) -> int | None:
    """The draft depth a drafting run ran (module docstring), None where no script or single recipe says."""
    if not run.disaggregated:
        if run.stack == "trt" and run.decode.dp_attn:
            return TRT_ADP_MTP_DEPTH
        return SCRIPT_MTP_DEPTH.get((run.stack, run.amd))
    try:
        recipes = recipes_for(MODEL, run.hardware, run.precision, run.framework, run.isl, run.osl)
    except UserError:
        return None
    depths = {d for r in recipes if (r.prefill, r.decode) == (run.prefill, run.decode) for d in r.mtp_depths}
    return depths.pop() if len(depths) == 1 else None


def priceable(run: ApiRun, depth: int | None) -> bool:
    """A run whose deployment the row states in full (a disaggregated one with its worker counts) and, when it
    drafted, whose depth (``mtp_depth``) a script or recipe gives."""
    if run.drafts and depth is None:
        return False
    return not run.disaggregated or (run.decode.workers > 0 and run.prefill is not None and run.prefill.workers > 0)


def run_config(run: ApiRun, depth: int | None) -> SimConfig:
    """The deployment a run names, as the simulator prices it (with ``depth`` drafts where it drafted): an
    aggregated instance on its layout, or its disaggregated pools through the same path as InferenceX's recipes
    (``recipes.recipe_configs``)."""
    precision = checkpoint_precision(MODEL, run.precision, run.hardware)
    fw = run.framework
    if not run.disaggregated:
        row = as_silicon_row(run)
        settings = replace(inferencex_recipe(row), mtp_depth=depth)
        tp, dp, ep = served_layout(row)
        kv = settings.kv_dtype or resolve_kv_dtype(None, run.hardware, MODEL, fw)
        return SimConfig.model_validate({"hardware": run.hardware, "model": MODEL, "precision": precision,
                                         "kv_dtype": kv, "framework": fw, "parallel": {"tp": tp, "dp": dp, "ep": ep},
                                         "max_num_seqs": 4096, **settings.settings()})
    recipe = Recipe(f"api-{run.stack}", MODEL, run.hardware, run.precision, fw, run.image, run.isl, run.osl,
                    (depth,) if depth else (), (run.concurrency,), None, run.prefill, run.decode, None)
    (cfg,) = recipe_configs(recipe, precision)
    return cfg


def as_silicon_row(run: ApiRun) -> SiliconRow:
    """An aggregated run as silicon_sample.csv would hold it (attention DP as ``dp``), so that what its InferenceX
    script set reads off it as off view 1's rows (``validation_settings``)."""
    par = run.decode.parallel()
    return SiliconRow(f"api-{run.hardware}-{run.stack}-{run.date}-{run.concurrency}", "public", MODEL,
                      "deepseek-ai/DeepSeek-R1-0528", run.hardware, run.framework, run.image.rpartition(":")[2],
                      PRECISION.get(run.precision, run.precision), "agg", run.isl, run.osl, run.concurrency,
                      par["tp"], par["dp"], par["ep"], None, None, run.ttft_ms, run.tpot_ms, "",
                      suspected_speculative=run.drafts, measured=run.date)


def holds_weights(cfg: SimConfig) -> bool:
    """Whether every instance of ``cfg`` holds the model's weights: GB200's Dynamo SGLang rows write each worker as
    one GPU with attention DP (tp 1), a layout no DeepSeek-R1 fits, so the row does not state its deployment."""
    pools = ([cfg.parallel] if cfg.disaggregation is None
             else [cfg.disaggregation.prefill.parallel, cfg.disaggregation.decode.parallel])
    return all(step_cost(cfg, par).fits for par in pools)


def pinned_api(runs: list[ApiRun]) -> tuple[list[ApiCmp], int]:
    """Each priceable run predicted at its concurrency (lengths drawn as InferenceX draws them), its TTFT the
    estimate's median as the API's is a median (``SteadyEstimate.ttft_median``; silicon_sample.csv's views read the
    mean); (comparisons, runs left out: drafts of unknown depth, or a deployment the row does not state in full or
    that cannot hold the weights)."""
    out, left = [], 0
    for run in runs:
        depth = mtp_depth(run) if run.drafts else None
        if not priceable(run, depth):
            left += 1
            continue
        try:
            cfg = run_config(run, depth)
            if not holds_weights(cfg):
                left += 1
                continue
            est = estimate(cfg, run.isl * RANGE, run.osl * RANGE, np.array([float(run.concurrency)]),
                           osl_spread=1.0 / RANGE)
        except (UserError, ValueError):
            left += 1
            continue
        tpot, ttft, tput = est.tpot[0] * 1e3, est.ttft_median[0] * 1e3, float(est.total_tput_per_accelerator[0])
        if not (np.isfinite(tpot) and tpot > 0):
            left += 1
            continue
        kind = ("disagg" if run.disaggregated else "agg") + (f" mtp{depth}" if depth else "")
        group = f"{run.hardware} {run.stack} {run.precision} {kind}"
        out.append(ApiCmp(group, run, {"tpot": run.tpot_ms, "ttft": run.ttft_ms, "tput": run.tput_per_gpu},
                          {"tpot": tpot, "ttft": ttft, "tput": tput},
                          {"tpot": band(tpot, est.sigma[0]), "ttft": band(ttft, est.sigma_ttft[0]),
                           "tput": band(tput, est.sigma[0])}))
    return out, left


def _cells(cmps: list[ApiCmp], metric: str) -> tuple[float, float, float]:
    """(median |error|, share within ``TOL``, share inside the 80% band) of one metric."""
    err = np.array([c.predicted[metric] / c.measured[metric] - 1.0 for c in cmps])
    inside = np.mean([c.bands[metric][0] <= c.measured[metric] <= c.bands[metric][1] for c in cmps])
    return float(np.median(np.abs(err))), float(np.mean(np.abs(err) <= TOL)), float(inside)


def report_pinned_api(cmps: list[ApiCmp], left: int) -> None:
    print("\n1p) InferenceX's published DeepSeek-R1 runs (its dashboard API, Oct 2025 - Jun 2026; "
          "bench/data/inferencex_api_dsr1.csv),\n   each pinned on its deployment (MTP runs at their script's or "
          "recipe's depth), the API's medians against the estimate's (TTFT: the window's median, which its\n"
          "   opening burst leaves at the steady figure): |error| median, share within 35%")
    groups: dict[str, list[ApiCmp]] = defaultdict(list)
    for c in cmps:
        groups[c.group].append(c)
    print(f"   {'group':36s} {'n':>4s} {'TPOT':>12s} {'TTFT':>12s} {'tok/s/GPU':>12s}")
    for name in sorted(groups):
        cells = [_cells(groups[name], m) for m in ("tpot", "ttft", "tput")]
        print(f"   {name:36s} {len(groups[name]):4d} " + " ".join(f"{med:5.0%} {w:5.0%}" for med, w, _ in cells))
    for label, part in (("ALL", cmps), ("NVIDIA", [c for c in cmps if not c.run.amd]),
                        ("AMD", [c for c in cmps if c.run.amd])):
        if not part:
            continue
        summary = {m: _cells(part, m) for m in ("tpot", "ttft", "tput")}
        print(f"   {label:7s} n={len(part):4d}  " + " | ".join(
            f"{m} med {med:.0%} within35 {within:.0%} in band {inside:.0%}"
            for m, (med, within, inside) in summary.items()))
    print(f"   ({left} runs left out: MTP drafts no script or single recipe gives the depth of, pools without worker "
          "counts, or a stated layout that cannot hold the weights)")
    report_vintage(groups)
    report_drafts_by_users(cmps)


def report_vintage(groups: dict[str, list[ApiCmp]]) -> None:
    """The TPOT bias of each group month by month. The cost model prices recent stacks (aiconfigurator-core's tables
    of TensorRT-LLM 1.3.0rc*, SGLang up to 0.5.14 and vLLM up to 0.24; AMD's GEMMs from AITER of 2026-08), so a run
    of an older image reads slower than predicted by what its stack has gained since."""
    print("   TPOT bias (median, predicted / measured - 1) by the run's month, groups run in three months or more:")
    for name in sorted(groups):
        months: dict[str, list[float]] = defaultdict(list)
        for c in groups[name]:
            months[c.run.date[:7]].append(c.predicted["tpot"] / c.measured["tpot"] - 1.0)
        if len(months) >= 3:
            cells = [f"{m} {np.median(e):+4.0%} ({len(e)})" for m, e in sorted(months.items())]
            print(f"   {name:36s} " + "  ".join(cells))


USER_BUCKETS = ((1, 8), (9, 32), (33, 128), (129, 100_000))


def report_drafts_by_users(cmps: list[ApiCmp]) -> None:
    """Measured over predicted TPOT of NVIDIA's aggregated runs by stack, drafts and users. A draft acceptance off
    the prior scales every batch's TPOT alike; a ratio that grows with the batch is a cost per sequence or per
    token the drafting path adds that the cost model does not price. AMD's runs are left out: their stacks' vintage
    (``report_vintage``) would blur the batch effect."""
    print("   measured / predicted TPOT of NVIDIA's aggregated runs by users (median, runs), plain and with drafts:")
    print(f"   {'stack':8s} {'drafts':6s} " + " ".join(f"{f'{lo}-{hi}' if hi < 100_000 else f'>{lo - 1}':>13s}"
                                                    for lo, hi in USER_BUCKETS))
    runs = [c for c in cmps if not c.run.amd and not c.run.disaggregated]
    for stack in sorted({c.run.stack for c in runs}):
        for drafts in (False, True):
            cells = []
            for lo, hi in USER_BUCKETS:
                ratios = [c.measured["tpot"] / c.predicted["tpot"] for c in runs if c.run.stack == stack
                          and c.run.drafts == drafts and lo <= c.run.concurrency <= hi]
                cells.append(f"{np.median(ratios):5.2f} ({len(ratios):3d})" if ratios else "")
            print(f"   {stack:8s} {'mtp' if drafts else 'none':6s} " + " ".join(f"{c:>13s}" for c in cells))


@dataclass(frozen=True)
class ApiRatio:
    """Two systems' throughput per GPU on one deployment, measured and predicted."""

    pair: str            # "b200/h200 sglang fp8 agg"
    amd: bool            # either side an AMD system
    measured: float
    predicted: float


def api_ratios(cmps: list[ApiCmp]) -> list[ApiRatio]:
    """View 3p: every two runs on different systems with the same stack, weights, drafts, layout, lengths and
    concurrency, run in the same month (so that neither side's image is a season older; a system's repeated runs of
    it that month count once): the measured ratio of their throughput per GPU beside the predicted one. A ratio the
    cost model gets right on identical deployments is what a what-if for an unowned system rests on."""
    same: dict[tuple, dict[str, list[ApiCmp]]] = defaultdict(lambda: defaultdict(list))
    for c in cmps:
        r = c.run
        same[(r.stack, r.precision, r.drafts, r.disaggregated, r.isl, r.osl, r.concurrency, r.decode, r.prefill,
              r.date[:7])][r.hardware].append(c)
    out = []
    for key, systems in same.items():
        stack, precision, drafts, disaggregated = key[:4]
        kind = ("disagg" if disaggregated else "agg") + (" mtp" if drafts else "")
        # a system's repeated runs of the deployment that month count once, at their medians
        tput = {hw: (float(np.median([c.measured["tput"] for c in cs])),
                     float(np.median([c.predicted["tput"] for c in cs]))) for hw, cs in systems.items()}
        for a, b in itertools.combinations(sorted(tput), 2):
            amd = systems[a][0].run.amd or systems[b][0].run.amd
            out.append(ApiRatio(f"{a}/{b} {stack} {precision} {kind}", amd, tput[a][0] / tput[b][0],
                                tput[a][1] / tput[b][1]))
    return out


def report_api_ratios(ratios: list[ApiRatio]) -> None:
    print("\n3p) GPU-vs-GPU throughput ratios of view 1p's runs: two systems, one deployment (stack, weights, layout, "
          "lengths,\n   users), run in the same month; measured ratio beside the predicted one")
    pairs: dict[str, list[ApiRatio]] = defaultdict(list)
    for r in ratios:
        pairs[r.pair].append(r)
    for name in sorted(pairs):
        rs = pairs[name]
        err = np.array([r.predicted / r.measured - 1.0 for r in rs])
        print(f"   {name:36s} n={len(rs):3d} measured ratio {np.median([r.measured for r in rs]):6.2f}  "
              f"|err| median {np.median(np.abs(err)):4.0%}  within 25%: {np.mean(np.abs(err) <= RATIO_TOL):4.0%}")
    for label, part in (("ALL", ratios), ("NVIDIA / NVIDIA", [r for r in ratios if not r.amd]),
                        ("with an AMD side", [r for r in ratios if r.amd])):
        if part:
            err = np.array([r.predicted / r.measured - 1.0 for r in part])
            print(f"   {label:16s} n={len(part):4d}  within 25%: {np.mean(np.abs(err) <= RATIO_TOL):.0%}  |err| median "
                  f"{np.median(np.abs(err)):.0%}")
