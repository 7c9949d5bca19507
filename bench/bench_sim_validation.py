"""Validation: the simulator against public end-to-end results it was never fitted to.

    python bench/bench_sim_validation.py              # everything (a few minutes on two cores)
    python bench/bench_sim_validation.py --quick      # pinned deployments only

Fitting may use kernel tables, the three seed points (bench_sim_calibration.py) and runs we measure
ourselves; every figure here is validation. Five views:

1. **Pinned deployments** — every aggregated measurement of ``silicon_sample.csv`` (aiconfigurator-core,
   InferenceX-derived, read in place; see ``validation_data.py``): the row's exact layout, framework,
   precision, lengths and concurrency go into the estimator; TPOT, TTFT and throughput per GPU are
   compared. Split into ``dev`` (looked at while building the model, never fitted) and ``holdout``.
2. **Frontier, default search** — what ``scoville simulate`` prints: for each (model, system, precision,
   framework, lengths) with measured points, the default search's frontier is read at every measured
   frontier point's interactivity, and the throughput per GPU compared (the published curve is the best
   of the published deployments; the search may find better ones, which shows as a positive error).
   Public points of ``data/reference/validation_public.yaml`` (AMD MI300X/MI325X/MI355X among them) join; a
   compare page that names no framework is the envelope over the frameworks InferenceX runs on that GPU.
   The same points are also read the other way, as the interactivity the predicted frontier reaches at the
   measured throughput: near a curve's fast end, where a few percent of TPOT is tens of percent of throughput,
   that read states the miss in TPOT's own terms.
   **1c** gives TTFT at light load as a gap in ms by framework and prompt length (a constant gap is a
   per-request cost the model lacks); **1f** pairs the same deployment and concurrency at a 1k and an 8k prompt,
   so the gap's change with the prompt says which cost is missing (a per-request cost, a host floor the
   longer prefill hides, or prefill kernels slower than their tables). **1d** prints view 1 again with a
   BF16 KV cache: the rows do not record their KV format, and vLLM and SGLang keep the model's dtype unless
   told otherwise. **2b** reads
   the same silicon frontier points off the envelope of their groups' own deployments, each predicted on its
   row (no search): what 2)'s error owes to the cost model, and what to the search. View 1 runs each row
   with the admission delays its InferenceX recipe set (``inferencex_recipe``: SGLang's poll interval for new
   requests, TensorRT-LLM's batch waiting); **1e** shows those rows' TTFT without and with them.
   **1h** counts that light-load gap in each run's own decode steps (a wait counted in steps, such as a streamed
   response held back some iterations, keeps its count as steps lengthen; a per-request cost does not).
   **1s** pins the runs view 1 leaves out as speculative on their InferenceX MTP script's draft depth and settings
   (``mtp_recipe``), at the acceptance rates the search assumes; view 2b's envelopes include them.
   **1p** pins InferenceX's own published DeepSeek-R1 runs (its dashboard API's rows, October 2025 to June 2026, AMD's
   systems among them; ``validation_inferencex_api``) on the deployment each names, with their TPOT bias month by month.
   **1g** pins the file's Dynamo (disaggregated) rows the same way, on the deployment their InferenceX recipe
   names (``validation_data``: pools, worker counts, MTP depth, decode batch limit); rows of the seed points'
   curves are reported apart. **2c** reads measured frontier points off the envelope of InferenceX's own recipes
   (``scoville.sim.recipes``): the public compare-page points, and the frontiers of the Dynamo rows whose GPU totals
   the recipes give; what the default search of view 2 adds beyond it is deployments InferenceX never ran.
   **2e** (``validation_search_gap``) names that gain point by point: each public point off both frontiers, the
   deployment the search serves it with, and what that deployment runs that no recipe of its group ran.
3. **GPU-vs-GPU ratios** at matched interactivity, measured vs predicted; **3c** pairs the Dynamo frontiers of view
   2c (GB200 against GB300, B200, H100...), both sides read off their recipes. **3b** takes the predicted side
   from the envelopes of view 2b instead of the search (each group's own measured deployments, pinned): how
   well the cost model alone ranks two systems on the deployments that were run. **3p** sets two systems' runs of one
   deployment side by side from view 1p's InferenceX runs, run in the same month.
   **2d** and **3d** do views 2 and 3 over InferenceX's newest published runs (its PR tables of May-September
   2026), where the silicon groups of the same deployments ran older images.
4. **Published trends** (InferenceX blog statements, with their sources).
5. **Max throughput** — TensorRT-LLM's own tables (v0.13.0): one tensor-parallel instance at fixed input/output
   lengths fed at an infinite rate, on H200, H100 (FP8 and FP16), A100 and L40S, the last two of families no
   other view has.

Views 1 and 2 also print how often the measured figure lies inside the prediction's 80% band (the band
``simulate`` writes beside every point): about 80% when the stated uncertainty is honest.

Every number printed is computed here; nothing is hard-coded but the published figures themselves.
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from pathlib import Path

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scoville.catalog.hardware import load_hardware  # noqa: E402
from scoville.catalog.models import load_model  # noqa: E402
from scoville.errors import UserError  # noqa: E402
from scoville.sim.acceptance import mtp_draft  # noqa: E402
from scoville.sim.analytic import Z90, band  # noqa: E402
from scoville.sim.config import SimConfig, SpeculativeConfig  # noqa: E402
from scoville.sim.defaults import resolve_kv_dtype  # noqa: E402
from scoville.sim.recipes import (  # noqa: E402
    Recipe,
    load_recipes,
    recipe_configs,
    recipe_frontier,
    recipes_for,
    reference_file,
)
from scoville.sim.search import FrontierPoint, SearchSpace, pareto, search  # noqa: E402
from scoville.sim.steady import estimate  # noqa: E402
from scoville.simulation import SimulateSpec, base_config  # noqa: E402
from validation_data import (  # noqa: E402
    PRECISION,
    RANGE,
    RATIO_TOL,
    TOL,
    SiliconRow,
    checkpoint_precision,
    deployment,
    load_silicon,
)
from validation_inferencex_api import api_ratios, load_api_runs, pinned_api, report_api_ratios, report_pinned_api  # noqa: E402
from validation_recipes import recipe_envelope  # noqa: E402
from validation_search_gap import SearchGap, report_search_gaps, search_gap  # noqa: E402
from validation_settings import inferencex_recipe, script_kv_cache, served_layout, sglang_drafts_overlap  # noqa: E402


@dataclass
class Cmp:
    """One measured figure beside its prediction (``layout``: the deployment the search chose, view 2)."""

    group: str
    split: str
    measured: float
    predicted: float
    layout: tuple[int, int, int] | None = None
    band: tuple[float, float] | None = None     # the prediction's 80% band (10th-90th percentile), where it has one
    # a frontier point read the other way (view 2): (measured tok/s/user, the predicted frontier's at its throughput)
    speed: tuple[float, float] | None = None
    # a frontier point read off the predicted frontier interpolated between its points (views 2, 2b and 2c)
    interpolated: float | None = None
    row: str | None = None      # the silicon row it compares (views 1 and 1s: pairs plain and speculative runs)
    scope: tuple[str, str, str, bool] | None = None   # model, system, framework, drafted? (track_record_ledger)

    @property
    def err(self) -> float:
        return self.predicted / self.measured - 1.0

    @property
    def covered(self) -> bool | None:
        """Whether the measured figure lies inside the predicted band (None without a band)."""
        return None if self.band is None else self.band[0] <= self.measured <= self.band[1]


def coverage(cmps: list[Cmp]) -> str:
    """Share of measured figures inside their predicted 80% bands: about 80% when the bands mean what they
    say, far less when the model is surer than it should be."""
    hits = [c.covered for c in cmps if c.covered is not None]
    return f"{np.mean(hits):.0%}" if hits else "-"


def _lengths(row: SiliconRow) -> tuple[float, float, float]:
    fixed = "aic-auto-gap" in row.source
    f = 1.0 if fixed else RANGE
    return row.isl * f, row.osl * f, (1.0 if fixed else 1.0 / RANGE)


def measured_tput(row: SiliconRow) -> float:
    isl, osl, _ = _lengths(row)
    e2e = row.ttft_ms / 1e3 + (osl - 1) * row.tpot_ms / 1e3
    return row.concurrency * (isl + osl) / e2e / row.accelerators


# -- 1. pinned ----------------------------------------------------------------------------------------
Envelopes = dict[tuple, list[tuple[float, float]]]   # frontier group -> predicted (tok/s/user, tok/s/GPU) per row


@dataclass(frozen=True)
class LightTtft:
    """A light-load TTFT beside its prediction, with the deployment it ran on (views 1c and 1f)."""

    framework: str
    system: str            # model, hardware and precision, as view 1 names a group
    deployment: tuple      # (tp, dp, ep, concurrency, osl): two rows that share it differ only in prompt length
    isl: int
    split: str
    measured_ms: float
    predicted_ms: float


@dataclass
class Pinned:
    """View 1's comparisons, the light-load TTFTs, and every frontier group's predicted rows (view 2b)."""

    cmps: dict[str, list[Cmp]]
    light: list[LightTtft]
    envelopes: Envelopes


def pinned(rows: list[SiliconRow], kv_dtype: str | None = None, speculative: bool = False) -> Pinned:
    """Each aggregated row predicted on its own deployment; also every prediction of a frontier group's rows
    (the points whose upper envelope view 2b compares with the measured frontier). The rows do not record
    their KV-cache format: ``kv_dtype`` None takes ``simulate``'s auto (FP8 where the chip has FP8 math).
    ``speculative``: the runs read as speculative instead, each at its MTP script's depth (view 1s)."""
    groups: dict[tuple, list[SiliconRow]] = defaultdict(list)
    for r in rows:
        if (r.mode == "agg" and r.suspected_speculative == speculative
                and (not speculative or inferencex_recipe(r).mtp_depth)):
            group = (r.model, r.hardware, r.framework, r.precision, *served_layout(r), r.isl, r.osl,
                     inferencex_recipe(r), "gap" in r.source)
            groups[group].append(r)
    out: dict[str, list[Cmp]] = {"tpot": [], "ttft": [], "tput": [], "ttft_delayed": [], "ttft_undelayed": []}
    light: list[LightTtft] = []
    envelopes: Envelopes = defaultdict(list)
    skipped = 0
    for key, rs in groups.items():
        model, hw, fw, prec, tp, dp, ep, _, _, recipe, gap_rows = key
        isl, osl, spread = _lengths(rs[0])
        users = np.array([r.concurrency for r in rs], dtype=float)
        try:
            cfg = SimConfig.model_validate({"hardware": hw, "model": model,
                                            "precision": checkpoint_precision(model, prec, hw),
                                            "kv_dtype": kv_dtype or recipe.kv_dtype
                                            or resolve_kv_dtype(None, hw, model, fw),
                                            "framework": fw, "parallel": {"tp": tp, "dp": dp, "ep": ep},
                                            "max_num_seqs": 4096, **recipe.settings()})
            est = estimate(cfg, isl, osl, users, osl_spread=spread)
        except (UserError, ValueError):
            skipped += len(rs)
            continue
        name = f"{_short(model)} {hw} {fw} {prec or 'native'}" + (f" mtp{recipe.mtp_depth}" if speculative else "")
        scope = (load_model(model).name, hw, fw, speculative)
        # the recipe's admission delays (SGLang's poll interval, TensorRT-LLM's batch waiting and attention-DP
        # balance) taken out (view 1e)
        undelayed = estimate(cfg.model_copy(update={"batch_wait": None, "scheduler_recv_interval": 1,
                                                     "attention_dp_balance": None}), isl, osl,
                             users, osl_spread=spread).ttft if recipe.delays else None
        for i, r in enumerate(rs):
            tpot, ttft, tput = est.tpot[i] * 1e3, est.ttft[i] * 1e3, float(est.total_tput_per_accelerator[i])
            out["tpot"].append(Cmp(name, r.split, r.tpot_ms, tpot, band=band(tpot, est.sigma[i]), row=r.id,
                                   scope=scope))
            out["ttft"].append(Cmp(name, r.split, r.ttft_ms, ttft, band=band(ttft, est.sigma_ttft[i]), scope=scope))
            out["tput"].append(Cmp(name, r.split, measured_tput(r), tput, band=band(tput, est.sigma[i]), scope=scope))
            if r.concurrency <= LIGHT_LOAD:
                light.append(LightTtft(fw, name, (tp, dp, ep, r.concurrency, r.osl), r.isl, r.split, r.ttft_ms, ttft))
            if undelayed is not None:
                out["ttft_delayed"].append(Cmp(f"{name} [{recipe.delay}]", r.split, r.ttft_ms, ttft))
                out["ttft_undelayed"].append(Cmp(f"{name} [{recipe.delay}]", r.split, r.ttft_ms, undelayed[i] * 1e3))
            if not gap_rows:     # rows of the published curves (the frontier view leaves the 'gap' rows out too)
                envelopes[(model, hw, prec, fw, r.isl, r.osl)].append(
                    (1.0 / float(est.tpot[i]), float(est.total_tput_per_accelerator[i])))
    if skipped:
        print(f"  ({skipped} rows skipped: deployment does not fit or is not expressible)")
    return Pinned(out, light, envelopes)


LIGHT_LOAD = 8   # users: where TTFT is the request's own path (front end, prefill), not queueing behind others


def _prompt_bucket(isl: int) -> str:
    return "prompt <= 2k" if isl <= 2100 else ("prompt 2k-5k" if isl < 5000 else "prompt 5k-9k")


def report_kv_sensitivity(auto: dict[str, list[Cmp]], bf16: dict[str, list[Cmp]]) -> None:
    """What the KV-cache format the rows do not record is worth: the pinned view again with a BF16 cache (what
    vLLM and SGLang use when no --kv-cache-dtype is given), beside view 1's: each script's format where it was read
    (``script_kv_cache``), else the FP8 one ``simulate`` assumes."""
    print("\n1d) the unrecorded KV-cache format: pinned TPOT and throughput, as above (each script's cache where\n"
          "   read, else FP8) vs a BF16 cache everywhere")
    for fw in ("vllm", "sglang", "trtllm", None):
        cells = []
        for res in (auto, bf16):
            for m in ("tpot", "tput"):
                errs = np.array([c.err for c in res[m] if fw is None or f" {fw} " in f"{c.group} "])
                cells.append(f"{m} bias {np.median(errs):+4.0%} within35 {np.mean(np.abs(errs) <= TOL):4.0%}")
        print(f"   {fw or 'ALL':7s} as read: {cells[0]}, {cells[1]}   BF16: {cells[2]}, {cells[3]}")


def report_speculative_gain(rows: list[SiliconRow], plain: list[Cmp], speculative: list[Cmp]) -> None:
    """View 1s's runs beside the plain runs of their deployment and concurrency (view 1): the TPOT gain MTP
    brought, measured and predicted, by framework. A predicted gain above the measured one is MTP priced too cheap
    (acceptance, draft passes or the speculative path's host work), whatever the plain runs' own error."""
    predicted = {c.row: c.predicted for c in plain + speculative if c.row}
    runs: dict[tuple, list[SiliconRow]] = defaultdict(list)
    for r in rows:
        if r.mode == "agg" and r.id in predicted:
            runs[(*deployment(r), r.concurrency)].append(r)
    gains: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for same in runs.values():
        fast = [r for r in same if r.suspected_speculative]
        slow = [r for r in same if not r.suspected_speculative]
        for s, f in itertools.product(slow, fast):
            gains[f.framework].append((s.tpot_ms / f.tpot_ms, predicted[s.id] / predicted[f.id]))
    print("   MTP's TPOT gain over the plain run of the same deployment and concurrency, measured vs predicted:")
    for fw, pairs in sorted(gains.items()):
        measured, model = np.array(pairs).T
        print(f"   {fw:8s} pairs={len(pairs):3d}  measured {np.median(measured):.2f}x  "
              f"predicted {np.median(model):.2f}x  (predicted / measured, median {np.median(model / measured):.2f})")


def report_recipe_delays(res: dict[str, list[Cmp]]) -> None:
    """What the recipes' admission delays are worth to TTFT on the rows that ran them (view 1 includes them)."""
    print("\n1e) the recipes' admission delays (SGLang DeepSeek-R1 B200/B300: a poll for new requests every 10 or")
    print("   30 decode steps; TensorRT-LLM Llama-70B and DeepSeek-R1 FP8 B200 at 1k/1k: batch waiting, prompts held")
    print("   up to 20 or 40 decode steps; TensorRT-LLM under attention DP: prompts held until every rank has one, up")
    print("   to 60 (DeepSeek-R1) or 50 steps): pinned TTFT of those rows without them, and with them (as view 1)")
    for fw, delay in (("sglang", "poll interval"), ("trtllm", "batch waiting"), ("trtllm", "attention-DP balance")):
        for label, key in (("without", "ttft_undelayed"), ("with", "ttft_delayed")):
            errs = np.array([c.err for c in res[key] if f" {fw} " in f"{c.group} " and c.group.endswith(f"[{delay}]")])
            if errs.size:
                print(f"   {fw:7s} {delay:20s} {label:8s} n={errs.size:4d}  TTFT bias {np.median(errs):+4.0%}  "
                      f"within 35% {np.mean(np.abs(errs) <= TOL):4.0%}")


def report_light_load_ttft(light: list[LightTtft]) -> None:
    """TTFT at light load, as a gap in milliseconds: a constant gap across prompt lengths is a per-request cost
    the model lacks (a front end), a gap growing with the prompt is prefill (kernels slower than their tables)."""
    print(f"\n1c) TTFT at <= {LIGHT_LOAD} users, dev rows: median measured - predicted, by framework and prompt length")
    buckets: dict[str, list[LightTtft]] = defaultdict(list)
    for t in light:
        if t.split == "dev":
            buckets[f"{t.framework} {_prompt_bucket(t.isl)}"].append(t)
    for name in sorted(buckets):
        ts = buckets[name]
        if len(ts) >= 3:
            gap = np.median([t.measured_ms - t.predicted_ms for t in ts])
            measured, predicted = np.median([t.measured_ms for t in ts]), np.median([t.predicted_ms for t in ts])
            print(f"   {name:26s} n={len(ts):4d}  gap {gap:+7.0f} ms  (measured {measured:6.0f}, "
                  f"predicted {predicted:6.0f} ms)")


SHORT_PROMPT, LONG_PROMPT = 1024, 8192


def report_prompt_scaling(light: list[LightTtft]) -> None:
    """The light-load TTFT gap at a 1k and at an 8k prompt on the same deployment and concurrency (dev rows,
    paired): what kind of cost the model lacks. The same gap at both lengths is a per-request cost outside the
    prefill kernels; a gap that shrinks as the prompt grows is a floor the longer prefill's kernels hide (host
    dispatch of an uncaptured, eager prefill step: its GPU work waits on the CPU only while that work is short);
    a growing gap is prefill kernels slower than their tables."""
    print(f"\n1f) TTFT at <= {LIGHT_LOAD} users, {SHORT_PROMPT}- vs {LONG_PROMPT}-token prompts on the same deployment "
          "and concurrency\n   (dev rows, paired): median gap measured - predicted, and what its change with the "
          "prompt says (gaps over 20 ms)")
    by_run: dict[tuple, dict[int, LightTtft]] = defaultdict(dict)
    for t in light:
        if t.split == "dev" and t.isl in (SHORT_PROMPT, LONG_PROMPT):
            by_run[(t.framework, t.system, t.deployment)][t.isl] = t
    pairs: dict[tuple[str, str], list[tuple[LightTtft, LightTtft]]] = defaultdict(list)
    for (fw, system, _), runs in by_run.items():
        if len(runs) == 2:
            pairs[(fw, system)].append((runs[SHORT_PROMPT], runs[LONG_PROMPT]))
    for fw, system in sorted(pairs):
        ps = pairs[(fw, system)]
        short = float(np.median([s.measured_ms - s.predicted_ms for s, _ in ps]))
        long = float(np.median([ln.measured_ms - ln.predicted_ms for _, ln in ps]))
        print(f"   {fw:7s} {system:36s} pairs={len(ps):3d}  gap {short:+6.0f} ms at 1k, {long:+6.0f} ms at 8k  "
              f"{_gap_kind(short, long)}".rstrip())


def report_ttft_gap_in_steps(rows: list[SiliconRow], views: list[Pinned]) -> None:
    """View 1h: the light-load TTFT gap (measured - predicted, at most ``LIGHT_LOAD`` users) counted in the run's own
    decode steps (its TPOT, times the MTP script's acceptance length where it ran MTP), by framework and model. A
    per-request cost shows as a gap that shrinks in steps as steps lengthen; a gap of a steady number of steps is a
    wait counted in steps, such as a streamed response held for several iterations."""
    by_id = {r.id: r for r in rows}
    gaps: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for view in views:
        for tpot, ttft in zip(view.cmps["tpot"], view.cmps["ttft"], strict=True):
            r = by_id[tpot.row] if tpot.row else None
            if r is None or r.concurrency > LIGHT_LOAD:
                continue
            drafts = inferencex_recipe(r).speculative
            step_ms = tpot.measured * (drafts.mean_acceptance_length if drafts else 1.0)
            kind = f"mtp{drafts.num_draft_tokens}" if drafts else "plain"
            gaps[(r.framework, _short(r.model), kind)].append((ttft.measured - ttft.predicted) / step_ms)
    print(f"\n1h) TTFT at <= {LIGHT_LOAD} users: the gap measured - predicted in the run's own decode steps")
    for (fw, model, kind), g in sorted(gaps.items()):
        if len(g) >= 5:
            q25, q50, q75 = np.percentile(g, [25, 50, 75])
            print(f"   {fw:7s} {model:20s} {kind:5s} n={len(g):4d}  median {q50:5.1f} steps  (25-75%: {q25:5.1f} to "
                  f"{q75:5.1f})")


def _gap_kind(short: float, long: float) -> str:
    """What a light-load TTFT gap's change from a short to a long prompt says (view 1f); blank below 20 ms."""
    if max(short, long) <= 20:
        return ""
    if long < 0.5 * short:
        return "(a floor the long prefill hides)"
    if long > 1.5 * short + 20:
        return "(prefill slower than its kernels)"
    return "(a per-request cost)"


def _short(model: str) -> str:
    return Path(model).stem.replace("_config", "").split("--")[-1][:22]


def report_left_out(runs: list[SiliconRow]) -> None:
    """The runs ``validation_data`` leaves out because they contradict their own deployment or their GPUs'
    memory bandwidth, one line each."""
    for reason, mine in (("per-token time beats the same deployment's at fewer users "
                          "(validation_data.DECODE_MONOTONE_SLACK)", [r for r in runs if r.inconsistent]),
                         ("per-token time below what the GPUs' datasheet HBM bandwidth allows for the weights and KV "
                          "its running batch reads (validation_data._decode_floor_s)",
                          [r for r in runs if r.beyond_bandwidth])):
        print(f"{len(mine)} runs left out of every view: {reason}")
        _list_runs(mine)


def _list_runs(runs: list[SiliconRow]) -> None:
    for r in sorted(runs, key=lambda r: (r.model, r.hardware, r.isl, r.osl, r.tp, r.concurrency)):
        print(f"   {_short(r.model)} {r.hardware} {r.framework} {r.isl}/{r.osl} tp{r.tp} dp{r.dp} ep{r.ep} "
              f"{r.concurrency} users: TPOT {r.tpot_ms:.1f} ms, TTFT {r.ttft_ms:,.0f} ms ({r.split})")


SEED_TAG = "[seed curve]"


def seed_curves() -> set[tuple[str, str, str, int, int]]:
    """(model, hardware, framework, isl, osl) of the three seed points' published curves (InferenceX 8k/1k, Dynamo
    TensorRT-LLM): the TensorRT-LLM host costs were fitted on their ends, so rows of those curves are reported
    apart from the rows no fit has seen."""
    path = Path(str(resources.files("scoville") / "data" / "reference" / "inferencex_8k1k.yaml"))
    data = yaml.safe_load(path.read_text())
    isl, osl = int(data["scenario"]["isl"]), int(data["scenario"]["osl"])
    return {(p["model"], p["hardware"], "trtllm", isl, osl) for p in data["points"]}


def pinned_disaggregated(rows: list[SiliconRow]) -> tuple[dict[str, list[Cmp]], int]:
    """View 1g: each disaggregated row with its InferenceX deployment (``validation_data``: pools, worker counts,
    MTP depth, decode batch limit) predicted on it at its concurrency; (comparisons, rows whose recipe leaves the
    MTP depth open, left out)."""
    out: dict[str, list[Cmp]] = {"tpot": [], "ttft": [], "tput": []}
    open_depth = 0
    seeds = seed_curves()
    for r in rows:
        if r.recipe is None:
            continue
        cfgs = recipe_configs(r.recipe, checkpoint_precision(r.model, r.precision, r.hardware))
        if len(cfgs) != 1:
            open_depth += 1
            continue
        isl, osl, spread = _lengths(r)
        est = estimate(cfgs[0], isl, osl, np.array([float(r.concurrency)]), osl_spread=spread)
        seed = (r.model, r.hardware, r.framework, r.isl, r.osl) in seeds
        name = f"{_short(r.model)} {r.hardware} {r.framework} {r.precision or 'native'} disagg" + \
            (f" {r.isl}/{r.osl} {SEED_TAG}" if seed else "")
        tpot, ttft, tput = est.tpot[0] * 1e3, est.ttft[0] * 1e3, float(est.total_tput_per_accelerator[0])
        scope = (load_model(r.model).name, r.hardware, r.framework, cfgs[0].speculative is not None)
        out["tpot"].append(Cmp(name, r.split, r.tpot_ms, tpot, band=band(tpot, est.sigma[0]), scope=scope))
        out["ttft"].append(Cmp(name, r.split, r.ttft_ms, ttft, band=band(ttft, est.sigma_ttft[0]), scope=scope))
        out["tput"].append(Cmp(name, r.split, measured_tput(r), tput, band=band(tput, est.sigma[0]), scope=scope))
    return out, open_depth


def report_pinned(res: dict[str, list[Cmp]],
                  title: str = "1) pinned deployments (silicon_sample.csv, aggregated rows)") -> None:
    print(f"\n{title}: |error| median, share within 35%")
    names = sorted({c.group for c in res["tpot"]})
    width = max([44] + [len(n) for n in names])
    print(f"   {'group':{width}s} {'n':>4s} {'TPOT':>12s} {'TTFT':>12s} {'tok/s/GPU':>12s}")
    for name in names:
        cells = []
        for m in ("tpot", "ttft", "tput"):
            errs = np.array([abs(c.err) for c in res[m] if c.group == name])
            cells.append(f"{np.median(errs):5.0%} {np.mean(errs <= TOL):5.0%}")
        n = sum(1 for c in res["tpot"] if c.group == name)
        print(f"   {name:{width}s} {n:4d} {cells[0]:>12s} {cells[1]:>12s} {cells[2]:>12s}")
    for split in ("dev", "holdout", None):
        line = []
        for m in ("tpot", "ttft", "tput"):
            errs = np.array([abs(c.err) for c in res[m] if split is None or c.split == split])
            line.append(f"{m} med {np.median(errs):.0%} within35 {np.mean(errs <= TOL):.0%}")
        n = sum(1 for c in res["tpot"] if split is None or c.split == split)
        print(f"   ALL {split or 'both':8s} n={n:5d}  " + " | ".join(line))
    print("   measured inside the predicted 80% band (10th-90th percentile; ~80% if the bands are honest):")
    for split in ("dev", "holdout"):
        cells = [f"{m} {coverage([c for c in res[m] if c.split == split])}" for m in ("tpot", "ttft", "tput")]
        print(f"   ALL {split:8s} " + " | ".join(cells))


# -- 2. frontier with the default search ------------------------------------------------------------------
@dataclass(frozen=True)
class MeasuredPoint:
    group: tuple            # (model, hardware, precision, framework, isl, osl)
    split: str
    interactivity: float
    tput: float
    source: str
    max_gpus: int | None = None   # largest deployment measured in the group (silicon rows: unified)
    max_concurrency: int | None = None   # highest concurrency measured in the group (silicon rows, unified)
    # the highest concurrency of the group's suspected speculative runs (validation_data): the search adds MTP up
    # to it; None where the group has none
    max_speculative_concurrency: int | None = None
    kv_dtype: str | None = None   # the KV cache every run of the group ran, where the scripts say (script_kv_cache)
    # whether SGLang ran the group's drafts under its overlap scheduler (sglang_drafts_overlap), None where the
    # framework's default today (``simulate``'s) is what ran
    drafts_overlap: bool | None = None


def silicon_frontier_points(rows: list[SiliconRow]) -> list[MeasuredPoint]:
    """Measured points on each group's own upper envelope (the published curve): unified rows, and the
    disaggregated ones whose GPU total the April CSV writes as tp (those with a total from the recipes are view
    2c's; those with one from the dump's worker counts, of versions no recipe on file ran, are pinned in view 1g
    where the deployment is known and left out of the frontiers)."""
    groups: dict[tuple, list[SiliconRow]] = defaultdict(list)
    for r in rows:
        if (r.mode == "agg" or r.total_source == "csv") and "gap" not in r.source:
            groups[(r.model, r.hardware, r.precision, r.framework, r.isl, r.osl, r.mode)].append(r)
    out = []
    for (*group, mode), rs in groups.items():
        g = tuple(group)
        # disaggregated totals (validation_data) are InferenceX Dynamo frontiers: searched over disaggregated pools
        gpus = max(r.accelerators for r in rs) if mode == "agg" else None
        speculative = [r.concurrency for r in rs if r.suspected_speculative]
        spec_users = max(speculative) if speculative else None
        users = max(r.concurrency for r in rs) if mode == "agg" else None
        caches = {script_kv_cache(r) for r in rs}
        kv = caches.pop() if len(caches) == 1 else None
        overlap = sglang_drafts_overlap(g[1], g[2]) if g[3] == "sglang" else None
        out += _upper_envelope([MeasuredPoint(g, r.split, 1e3 / r.tpot_ms, measured_tput(r), "silicon_sample", gpus,
                                              users, spec_users, kv, overlap) for r in rs])
    return out


MODEL_REF = {"deepseek-r1": "deepseek-r1", "gpt-oss-120b": "gpt-oss-120b", "kimi-k2.5": "kimi-k2.5"}


def _public() -> list[dict]:
    return reference_file()["points"]


def _public_framework(p: dict) -> str:
    fw = (p.get("framework") or "vllm").split()[0].lower()
    return fw if fw in ("vllm", "sglang", "trtllm") else ("trtllm" if "dynamo" in fw or "trt" in fw else "vllm")


def _pinned_public(p: dict) -> bool:
    dep = p.get("deployment") or {}
    return bool(dep.get("tp") and p.get("concurrency") and p.get("gpus") and not dep.get("disagg"))


ANY_FRAMEWORK = "any"   # a public curve that is the envelope over frameworks (InferenceX compare pages)


def _frameworks_ran(hw: str) -> tuple[str, ...]:
    """The frameworks InferenceX runs on a GPU (TensorRT-LLM on NVIDIA only), whose envelope its compare pages
    plot."""
    return ("vllm", "sglang", "trtllm") if load_hardware(hw).vendor == "nvidia" else ("vllm", "sglang")


def public_points() -> list[MeasuredPoint]:
    """Public frontier points (InferenceX compare pages, blogs: no single deployment behind them) with
    interactivity and throughput per GPU, of a model and system we simulate."""
    out = []
    for p in _public():
        model = MODEL_REF.get(p["model"])
        x = p.get("interactivity_tok_s_user") or (1e3 / p["tpot_ms"] if p.get("tpot_ms") else None)
        y = p.get("tput_per_gpu_total")
        if not model or not x or not y or not p.get("isl") or not p.get("osl") or _pinned_public(p):
            continue
        prec = {"fp4": "fp4", "mxfp4": "mxfp4", "nvfp4": "nvfp4", "fp8": "fp8"}.get(p.get("precision") or "")
        # a compare page states no framework: its curve is the envelope of every framework run on that GPU
        fw = _public_framework(p) if p.get("framework") else ANY_FRAMEWORK
        out.append(MeasuredPoint((model, p["hardware"], prec, fw, int(p["isl"]), int(p["osl"])),
                                 "public", x, y, p["source"]))
    return out


PUBLISHED = "InferenceX published point"   # a PR table's note for a point frozen from InferenceX's public API


def published_points() -> list[MeasuredPoint]:
    """View 2d: the newest published runs, InferenceX's "[Klaud Cold]" PR tables (its dashboard's latest runs of
    May-September 2026, each of one stated single-node deployment, pinned in view 1b), on each group's upper
    envelope as the dashboard plots it, MTP runs and plain ones together. The group's search space is what it ran:
    its largest deployment and concurrency, MTP up to the concurrency its speculative runs reached, SGLang's
    drafts under the overlap scheduler as its images of that period (0.5.12+, spec v2) run them. The silicon
    groups of the same deployments ran older images (B300 SGLang 0.5.10.post1 of April against 0.5.12 of May;
    B200 TensorRT-LLM 1.1/1.2 against 1.3.0rc14): the dashboard no longer plots those runs."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for p in _public():
        model = MODEL_REF.get(p["model"])
        if (model and _pinned_public(p) and p.get("tpot_ms") and p.get("tput_per_gpu_total")
                and PUBLISHED in (p.get("note") or "")):
            groups[(model, p["hardware"], p["precision"], _public_framework(p), int(p["isl"]), int(p["osl"]))].append(p)
    out: list[MeasuredPoint] = []
    for g, ps in groups.items():
        spec = [int(p["concurrency"]) for p in ps if _public_mtp(p, g[0], g[3]) is not None]
        gpus, users = max(int(p["gpus"]) for p in ps), max(int(p["concurrency"]) for p in ps)
        points = [MeasuredPoint(g, "published", 1e3 / p["tpot_ms"], p["tput_per_gpu_total"], p["source"], gpus, users,
                                max(spec) if spec else None) for p in ps]
        out += _upper_envelope(points)
    return out


def _upper_envelope(points: list[MeasuredPoint]) -> list[MeasuredPoint]:
    """The points on their upper envelope, fastest first: each with more throughput per GPU than every faster one."""
    out, best = [], -1.0
    for p in sorted(points, key=lambda p: -p.interactivity):
        if p.tput > best:
            out.append(p)
            best = p.tput
    return out


# The draft depth of InferenceX's MTP script where a public point says only that MTP ran ("enabled"): SGLang on
# MI355X, dsr1_fp4_mi355x_mtp.sh, EAGLE with --speculative-num-steps 3 (--speculative-num-draft-tokens 4) in every
# version from its first (2a0475fb1, 2026-05-19; the points ran its recipe that week).
PUBLIC_MTP_DEPTH = {("deepseek-r1", "mi355x", "sglang"): 3}


def _public_mtp(p: dict, model: str, framework: str) -> SpeculativeConfig | None:
    """The drafts a pinned public point ran: its stated depth, or its script's where it says only "enabled", at the
    search's acceptance rate for that depth; None for a plain run. A speculative run of unknown depth is an error
    here: pinned without its drafts it would read as the model being 1.5-2x slow."""
    mtp = (p.get("deployment") or {}).get("mtp")
    if not mtp:
        return None
    depth = mtp if isinstance(mtp, int) else PUBLIC_MTP_DEPTH[(model, p["hardware"], framework)]
    return mtp_draft(depth)


def pinned_public() -> dict[str, list[Cmp]]:
    """Public points measured on one stated deployment (InferenceX PR tables, dstack, AMD runs): pinned, with the
    MTP drafts they ran. A point that states only its throughput (the 'current InferenceX numbers' AMD's ATOM PRs
    quote) is read on throughput alone."""
    out: dict[str, list[Cmp]] = {"tpot": [], "tput": []}
    for p in _public():
        model = MODEL_REF.get(p["model"])
        if (not model or not _pinned_public(p) or not p.get("isl")
                or not (p.get("tpot_ms") or p.get("tput_per_gpu_total"))):
            continue
        dep = p["deployment"]
        tp, ep = int(dep["tp"]), int(dep.get("ep") or 1)
        dp = max(int(p["gpus"]) // tp, 1)
        fixed = "range ratio 1" in (p.get("note") or "")
        f = 1.0 if fixed else RANGE
        prec = checkpoint_precision(model, p.get("precision"), p["hardware"])
        fw = _public_framework(p)
        try:
            cfg = SimConfig.model_validate({"hardware": p["hardware"], "model": model, "precision": prec,
                                            "kv_dtype": resolve_kv_dtype(None, p["hardware"], model, fw),
                                            "framework": fw,
                                            "parallel": {"tp": tp, "dp": dp if dp > 1 and ep > 1 else 1,
                                                         "ep": ep}, "max_num_seqs": 4096,
                                            "speculative": _public_mtp(p, model, fw)})
            est = estimate(cfg, p["isl"] * f, p["osl"] * f, np.array([float(p["concurrency"])]),
                           osl_spread=1.0 if fixed else 1 / RANGE)
        except (UserError, ValueError):
            continue
        drafts = cfg.speculative
        name = (f"{_short(model)} {p['hardware']} {fw} {p.get('precision')} {p['isl']}/{p['osl']}"
                + (f" mtp{drafts.num_draft_tokens}" if drafts else ""))
        scope = (load_model(model).name, p["hardware"], fw, drafts is not None)
        if p.get("tpot_ms"):
            tpot = est.tpot[0] * 1e3
            out["tpot"].append(Cmp(name, "public", p["tpot_ms"], tpot, band=band(tpot, est.sigma[0]), scope=scope))
        if p.get("tput_per_gpu_total"):
            tput = float(est.total_tput_per_accelerator[0])
            out["tput"].append(Cmp(name, "public", p["tput_per_gpu_total"], tput, band=band(tput, est.sigma[0]),
                                   scope=scope))
    return out


def report_pinned_public(res: dict[str, list[Cmp]]) -> None:
    print("\n1b) public points on a stated deployment (InferenceX PR tables, dstack, AMD runs): pinned, as 1)")
    for name in sorted({c.group for m in ("tpot", "tput") for c in res[m]}):
        cells = []
        for m in ("tpot", "tput"):
            errs = np.array([c.err for c in res[m] if c.group == name])
            cells.append(f"{np.median(errs):+5.0%} {np.mean(np.abs(errs) <= TOL):5.0%}" if errs.size else "-")
        n = max(sum(1 for c in res[m] if c.group == name) for m in ("tpot", "tput"))
        print(f"   {name:48s} {n:3d}  TPOT {cells[0]:>12s}  tok/s/GPU {cells[1]:>12s}")
    for m in ("tpot", "tput"):
        errs = np.array([abs(c.err) for c in res[m]])
        amd = [c for c in res[m] if " mi3" in c.group]
        amd_errs = np.array([abs(c.err) for c in amd])
        print(f"   ALL {m}: n={errs.size} within 35% {np.mean(errs <= TOL):.0%}, inside the 80% band "
              f"{np.mean([c.covered for c in res[m]]):.0%} (AMD: n={amd_errs.size}, within 35% "
              f"{np.mean(amd_errs <= TOL) if amd else float('nan'):.0%}, inside the band "
              f"{np.mean([c.covered for c in amd]) if amd else float('nan'):.0%})")


def simulate_base(hw: str, model: str, precision: str | None, framework: str, kv_dtype: str | None = None) -> SimConfig:
    """The config ``scoville simulate`` searches from with these options (``simulation.base_config``: its KV cache
    format, TensorRT-LLM's attention-DP balance), ``kv_dtype`` None for its auto."""
    return base_config(SimulateSpec(hardware=hw, model=model, precision=precision, framework=framework,
                                    kv_dtype=kv_dtype or "auto"), None)


def frontier(points: list[MeasuredPoint],
             mtp: str = "auto") -> tuple[list[Cmp], dict[tuple, tuple[np.ndarray, np.ndarray]], float]:
    by_group: dict[tuple, list[MeasuredPoint]] = defaultdict(list)
    for p in points:
        by_group[(*p.group, p.max_gpus is not None)].append(p)
    out: list[Cmp] = []
    curves: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
    t_total = 0.0
    for key, pts in sorted(by_group.items(), key=lambda kv: str(kv[0])):
        g = key[:6]
        model, hw, prec, fw, isl, osl = g
        t0 = time.perf_counter()
        try:
            front = _group_front(g, tuple(pts), mtp)
        except UserError as e:
            print(f"   {g}: {e}")
            continue
        t_total += time.perf_counter() - t0
        xs = np.array([p.interactivity for p in front])[::-1]
        ys = np.array([p.total_tput_per_accelerator for p in front])[::-1]
        if key[6]:      # ratios use the search over the measured deployment space where there is one
            curves[g] = (xs, ys)
        else:
            curves.setdefault(g, (xs, ys))
        tag = "" if key[6] else " [disagg]" if any(p.source == "silicon_sample" for p in pts) else " [public]"
        name = f"{_short(model)} {hw} {prec or 'native'} {fw} {isl}/{osl}{tag}"
        shift = np.exp(Z90 * np.array([p.sigma for p in front])[::-1])
        for p in pts:
            pred = _achievable(xs, ys, p.interactivity)
            # the band of a frontier read: the frontier of every point at its slow-and-lean corner (TPOT and
            # throughput share one sigma, so they move together) up to that of its fast-and-rich corner
            lo = _achievable(xs / shift, ys / shift, p.interactivity)
            hi = _achievable(xs * shift, ys * shift, p.interactivity)
            out.append(Cmp(name, p.split, p.tput, pred, _chosen_layout(front, p.interactivity), band=(lo, hi),
                           speed=(p.interactivity, _fastest_at(xs, ys, p.tput)),
                           interpolated=_interpolated(xs, ys, p.interactivity)))
    return out, curves, t_total


@cache
def _group_front(group: tuple, pts: tuple[MeasuredPoint, ...], mtp: str = "auto") -> tuple[FrontierPoint, ...]:
    """The predicted frontier a group's points are read off: the search over its measured deployment space
    (``_search_measured_space``), under every framework InferenceX runs on the GPU where a compare page names none
    (their envelope, as the page plots it). Kept once searched: view 2e reads the public groups' again."""
    model, hw, prec, fw, isl, osl = group
    front: list[FrontierPoint] = []
    for framework in _frameworks_ran(hw) if fw == ANY_FRAMEWORK else (fw,):
        base = simulate_base(hw, model, checkpoint_precision(model, prec, hw), framework, pts[0].kv_dtype)
        front += _search_measured_space(base, isl, osl, pts, mtp)
    return tuple(_pareto_points(front) if fw == ANY_FRAMEWORK else front)


def _search_measured_space(base: SimConfig, isl: int, osl: int, pts: Sequence[MeasuredPoint],
                           mtp: str = "auto") -> list[FrontierPoint]:
    """The predicted frontier over the deployment space a group's points were measured in. Silicon groups are
    unified deployments of a few sizes up to the concurrency they were run at (a frontier of runs that stopped
    at 64 users says nothing of 300), with MTP only as far as the group's speculative runs went (InferenceX ran
    DeepSeek-R1 with MTP up to 16-256 users, depending on the group, and plain beyond): the plain search and
    the MTP search each over their own measured range, merged. The GB200 disaggregated totals are InferenceX's
    Dynamo frontiers: disaggregated pools. Public points are InferenceX's frontiers over everything it ran: the
    default search (``frontier`` merges it over the frameworks where the page names none), its MTP drafts
    (``mtp``) off for view 2c's 'no drafts' read."""
    def frontier_of(space: SearchSpace, config: SimConfig = base) -> list[FrontierPoint]:
        return search(config, isl * RANGE, osl * RANGE, osl_spread=1 / RANGE, points=48, space=space).frontier

    gpus = max((p.max_gpus or 0) for p in pts)
    if not gpus:
        pools_only = all(p.source == "silicon_sample" for p in pts)
        users = max((p.max_concurrency or 0) for p in pts) or 1024   # public points capped by their recipes
        return frontier_of(SearchSpace(max_concurrency=users, unified=not pools_only, mtp=mtp))
    users = max((p.max_concurrency or 0) for p in pts)
    spec_users = max((p.max_speculative_concurrency or 0) for p in pts)
    front = frontier_of(SearchSpace(max_concurrency=users, disaggregation=False, mtp="off", max_accelerators=gpus))
    if spec_users:
        # the MTP runs' scheduling as they ran it: SGLang 0.5.8/0.5.9 drafted without its overlap scheduler unless
        # the script exported SGLANG_ENABLE_SPEC_V2 (``sglang_drafts_overlap``), where `simulate` assumes today's
        overlap = pts[0].drafts_overlap
        drafted = base if overlap is None else base.model_copy(update={"async_scheduling": overlap})
        front += frontier_of(SearchSpace(max_concurrency=spec_users, disaggregation=False, mtp="auto",
                                         max_accelerators=gpus), drafted)
    return _pareto_points(front)


def within_recipe_users(points: list[MeasuredPoint]) -> list[MeasuredPoint]:
    """The public compare-page points with their search capped at the most users any InferenceX recipe of their
    group swept (every layout, MTP and pool kind of the default search still open): a compare page's curve ends
    where InferenceX stopped adding users, and this read tells how much of view 2's public miss is the default
    search serving more users than InferenceX ever ran."""
    recipes = load_recipes()
    out = []
    for p in points:
        model, hw, prec, fw, isl, osl = p.group
        swept = [c for r in recipes if (r.model, r.hardware, r.isl, r.osl, r.precision) == (model, hw, isl, osl, prec)
                 and fw in (ANY_FRAMEWORK, r.framework) for c in r.concurrency]
        if p.split == "public" and swept:
            out.append(replace(p, max_concurrency=max(swept)))
    return out


def _pareto_points(front: list[FrontierPoint]) -> list[FrontierPoint]:
    """The points of several predicted frontiers that no other beats on both interactivity and throughput per
    GPU, fastest first (as a search's frontier)."""
    keep = pareto(np.array([f.interactivity for f in front]), np.array([f.total_tput_per_accelerator for f in front]))
    return [front[i] for i in keep]


def _achievable(xs: np.ndarray, ys: np.ndarray, interactivity: float) -> float:
    """The frontier read as the measured one is: the best throughput of a predicted point at least this fast
    (0 when none is). Interpolating between predicted points instead credits a deployment nobody evaluated."""
    fast = ys[xs >= interactivity]
    return float(fast.max()) if fast.size else 0.0


def _interpolated(xs: np.ndarray, ys: np.ndarray, interactivity: float) -> float:
    """The frontier read a third way: its points' Pareto front interpolated log-log between neighbours, as
    InferenceX's compare pages interpolate theirs ("Interpolated from real benchmark data"); 0 beyond its fastest
    point, its richest point below its slowest. ``_achievable`` drops a point predicted a few percent slower than
    measured to the next swept concurrency, often half the throughput, and keeps one predicted a few percent
    faster: this read treats a slow and a fast error alike."""
    keep = pareto(xs, ys)                                       # fastest first, throughput rising
    fx, fy = xs[keep][::-1], ys[keep][::-1]                      # slowest first
    if not fx.size or interactivity > fx[-1]:
        return 0.0
    if interactivity <= fx[0]:
        return float(fy[0])
    return float(np.exp(np.interp(np.log(interactivity), np.log(fx), np.log(fy))))


def _fastest_at(xs: np.ndarray, ys: np.ndarray, tput: float) -> float:
    """The other read of a frontier: the best interactivity of a predicted point with at least this throughput per
    GPU (0 when none has). Where the curve is steep, a few percent of TPOT moves the throughput read by tens of
    percent; this read shows that error in TPOT's own terms."""
    rich = xs[ys >= tput]
    return float(rich.max()) if rich.size else 0.0


def _chosen_layout(front: Sequence[FrontierPoint], interactivity: float) -> tuple[int, int, int] | None:
    """(tp, dp, ep) of the frontier point that serves ``interactivity`` (the slowest one at least that fast)."""
    fast_enough = [f for f in front if f.interactivity >= interactivity and f.config.disaggregation is None]
    if not fast_enough:
        return None
    par = min(fast_enough, key=lambda f: f.interactivity).config.parallel
    return (par.tp, par.dp, par.ep)


def report_interpolated(cmps: list[Cmp], label: str) -> None:
    """One summary line of a frontier view read on the interpolated frontier (``_interpolated``)."""
    errs = np.array([c.interpolated / c.measured - 1 for c in cmps if c.interpolated is not None])
    if errs.size:
        print(f"   ALL {label:22s} n={errs.size:4d}  within 35%: {np.mean(np.abs(errs) <= TOL):.0%}  "
              f"|err| median {np.median(np.abs(errs)):.0%}  bias {np.median(errs):+.0%}")


FRONTIER_TITLE = (
    "2) predicted frontier vs measured frontier points: throughput per GPU at the same interactivity\n"
    "   (silicon groups: the search over their deployment space - unified, up to the largest GPU count and\n"
    "   concurrency measured, MTP only in groups with plain/speculative pairs and only up to the concurrency\n"
    "   their speculative runs reached; GB200 disaggregated totals: disaggregated pools; public InferenceX\n"
    "   points: the default search, as `scoville simulate` runs it; a compare page that names no framework\n"
    "   plots the envelope of every framework run on that GPU, so its group ('any') is the envelope of the\n"
    "   default search under each)")
PUBLISHED_TITLE = (
    "2d) the newest published runs (published_points: InferenceX's PR tables of its dashboard's runs of\n"
    "   May-September 2026, each pinned in view 1b) on each group's envelope, against the search over what\n"
    "   the group ran (as view 2 searches a silicon group); the silicon groups of the same deployments ran\n"
    "   older images")


def report_frontier(res: list[Cmp], seconds: float, searches: int, title: str = FRONTIER_TITLE,
                    splits: tuple[str, ...] = ("dev", "holdout", "public")) -> None:
    print("\n" + title)
    print(f"   {'group':52s} {'n':>3s} {'med err':>8s} {'|err| med':>9s} {'within35':>8s}")
    for name in sorted({c.group for c in res}):
        errs = np.array([c.err for c in res if c.group == name])
        print(f"   {name:52s} {len(errs):3d} {np.median(errs):+8.0%} {np.median(np.abs(errs)):9.0%} "
              f"{np.mean(np.abs(errs) <= TOL):8.0%}")
    for split in splits:
        errs = np.array([c.err for c in res if c.split == split])
        if errs.size:
            print(f"   ALL {split:8s} n={errs.size:4d}  within 35%: {np.mean(np.abs(errs) <= TOL):.0%}  "
                  f"|err| median {np.median(np.abs(errs)):.0%}  bias {np.median(errs):+.0%}  "
                  f"inside the 80% band: {coverage([c for c in res if c.split == split])}")
    print("   the same points read at their measured throughput: the predicted frontier's tok/s/user there")
    for split in splits:
        speed = np.array([c.speed[1] / c.speed[0] - 1 for c in res if c.split == split and c.speed])
        if speed.size:
            print(f"   ALL {split:8s} n={speed.size:4d}  within 35%: {np.mean(np.abs(speed) <= TOL):.0%}  "
                  f"within 15%: {np.mean(np.abs(speed) <= 0.15):.0%}  |err| median {np.median(np.abs(speed)):.0%}  "
                  f"bias {np.median(speed):+.0%}")
    print("   the same points read on the predicted frontier interpolated log-log between its points, as the compare\n"
          "   pages interpolate (a prediction a few percent slow or fast moves it alike; the read above drops a slow\n"
          "   one to the next swept concurrency)")
    for split in splits:
        report_interpolated([c for c in res if c.split == split], split)
    print(f"   ({searches} default searches, {seconds:.1f} s in all)")


@dataclass
class RecipeSpace:
    """View 2c's comparisons, the points of groups with no recipe on file, and each group's measured frontier
    points beside its recipes' predicted envelope (key: model, hardware, precision, framework, isl, osl and the
    image version, None for a public group)."""

    cmps: list[Cmp]
    without: int
    curves: dict[tuple, tuple[list[MeasuredPoint], tuple[np.ndarray, np.ndarray]]]


def recipe_space(points: list[MeasuredPoint], rows: list[SiliconRow]) -> RecipeSpace:
    """View 2c: each public compare-page point, and each measured frontier point of the disaggregated rows whose
    deployment the recipes name (``validation_data``), against the envelope of InferenceX's own recipes for its
    group (``scoville.sim.recipes``): every framework's where a compare page names none, the row's own image
    version for silicon rows."""
    recipes = load_recipes()
    by_group: dict[tuple, list[MeasuredPoint]] = defaultdict(list)
    for p in points:
        if p.split == "public":
            by_group[(*p.group, None)].append(p)
    versions: dict[tuple, list[SiliconRow]] = defaultdict(list)
    for r in rows:
        if r.total_source == "recipes":
            versions[(r.model, r.hardware, r.precision, r.framework, r.isl, r.osl, r.framework_version)].append(r)
    for key, rs in versions.items():
        by_group[key] += _upper_envelope([MeasuredPoint(key[:6], r.split, 1e3 / r.tpot_ms, measured_tput(r),
                                                        "silicon_recipe") for r in rs])
    out, without = [], 0
    curves: dict[tuple, tuple[list[MeasuredPoint], tuple[np.ndarray, np.ndarray]]] = {}
    for g, pts in sorted(by_group.items(), key=lambda kv: str(kv[0])):
        model, hw, prec, fw, isl, osl, version = g
        mine = [r for r in recipes if (r.model, r.hardware, r.isl, r.osl) == (model, hw, isl, osl)
                and (PRECISION.get(r.precision) if version else r.precision) == prec
                and fw in (ANY_FRAMEWORK, r.framework) and version in (None, r.version)]
        if not mine:
            without += len(pts)
            continue
        xs, ys = recipe_envelope(mine, checkpoint_precision(model, prec, hw), RANGE)
        curves[g] = (pts, (xs, ys))
        tag = "public" if version is None else f"{version} disagg"
        name = f"{_short(model)} {hw} {prec or 'native'} {fw} {isl}/{osl} [{tag}, {len(mine)} recipe entries]"
        out += [Cmp(name, p.split, p.tput, _achievable(xs, ys, p.interactivity),
                    speed=(p.interactivity, _fastest_at(xs, ys, p.tput)),
                    interpolated=_interpolated(xs, ys, p.interactivity)) for p in pts]
    return RecipeSpace(out, without, curves)


def cli_recipe_frontiers(points: list[MeasuredPoint]) -> list[Cmp]:
    """The public compare-page points read off what ``scoville simulate --deployments inferencex`` writes: per
    framework with recipes for the group, the frontier of 16 points ``recipes.recipe_frontier`` keeps (queue-bound
    points left out, as the search leaves them), their union being the compare page's envelope over frameworks.
    View 2c reads every predicted run instead; this is the figure a user reproduces from the CLI."""
    out = []
    groups: dict[tuple, list[MeasuredPoint]] = defaultdict(list)
    for p in points:
        if p.split == "public":
            groups[p.group].append(p)
    for (model, hw, prec, fw, isl, osl), pts in sorted(groups.items(), key=str):
        front, _ = _cli_recipe_front((model, hw, prec, fw, isl, osl))
        if not front:
            continue
        xs = np.array([f.interactivity for f in front])
        ys = np.array([f.total_tput_per_accelerator for f in front])
        name = f"{_short(model)} {hw} {prec} {fw} {isl}/{osl} [public, simulate --deployments inferencex]"
        out += [Cmp(name, p.split, p.tput, _achievable(xs, ys, p.interactivity),
                    speed=(p.interactivity, _fastest_at(xs, ys, p.tput)),
                    interpolated=_interpolated(xs, ys, p.interactivity)) for p in pts]
    return out


@cache
def _cli_recipe_front(group: tuple) -> tuple[tuple[FrontierPoint, ...], tuple[Recipe, ...]]:
    """What ``simulate --deployments inferencex`` writes for a public group, under every framework with recipes
    for it (a compare page's envelope spans them), and those recipes. Kept once priced: views 2c and 2e both
    read it."""
    model, hw, prec, fw, isl, osl = group
    front: list[FrontierPoint] = []
    mine: list[Recipe] = []
    for f in _frameworks_ran(hw) if fw == ANY_FRAMEWORK else (fw,):
        try:
            recipes = recipes_for(model, hw, prec, f, isl, osl)
        except UserError:
            continue
        mine += recipes
        front += recipe_frontier(recipes, checkpoint_precision(model, prec, hw), isl * RANGE, osl * RANGE,
                                 osl_spread=1.0 / RANGE).frontier
    return tuple(front), tuple(mine)


def public_search_gaps(points: list[MeasuredPoint]) -> list[SearchGap]:
    """View 2e (``validation_search_gap``): each public compare-page point read off the default search (view 2's
    frontier) and off its group's recipes (view 2c's CLI read), with what the search's deployment runs that no
    recipe did."""
    groups: dict[tuple, list[MeasuredPoint]] = defaultdict(list)
    for p in points:
        if p.split == "public":
            groups[p.group].append(p)
    out = []
    for g, pts in sorted(groups.items(), key=str):
        recipe_front, recipes = _cli_recipe_front(g)
        if not recipes:
            continue
        search_front = _group_front(g, tuple(pts))
        model, hw, prec, fw, isl, osl = g
        name = f"{_short(model)} {hw} {prec or 'native'} {fw} {isl}/{osl}"
        for p in sorted(pts, key=lambda p: p.interactivity):
            gap = search_gap(name, p.interactivity, p.tput, search_front, recipe_front, recipes)
            if gap is not None:
                out.append(gap)
    return out


def recipe_ratios(space: RecipeSpace) -> list[Cmp]:
    """View 3c: GPU-vs-GPU throughput ratios of the Dynamo frontiers at matched interactivity (one model, precision,
    framework and lengths on both sides, each side at its own image version), measured against the ratio of
    the two sides' recipe envelopes read as view 2c reads them."""
    silicon = {g: c for g, c in space.curves.items() if g[6] is not None}
    out = []
    for (ga, (pa, ea)), (gb, (pb, eb)) in itertools.combinations(sorted(silicon.items(), key=str), 2):
        if (ga[0], *ga[2:6]) != (gb[0], *gb[2:6]) or ga[1] == gb[1]:
            continue
        for x in np.geomspace(10, 400, 12):
            ya, yb = _measured_at(pa, x), _measured_at(pb, x)
            qa, qb = _achievable(*ea, x), _achievable(*eb, x)
            if ya and yb and qa and qb:
                name = f"{_short(ga[0])} {ga[2]} {ga[3]} {ga[1]}/{gb[1]} {ga[4]}/{ga[5]}"
                out.append(Cmp(name, "", ya / yb, qa / qb))
    return out


def report_recipe_space(res: list[Cmp], without: int, default: list[Cmp], capped: list[Cmp],
                        plain: list[Cmp], cli: list[Cmp]) -> None:
    print("\n2c) measured frontier points against InferenceX's own recipes (validation_public.yaml recipes:, from\n"
          "   its master configs): each recipe's deployments predicted at the concurrencies it swept, the point read\n"
          "   off their envelope. Public compare-page points (beside the default search of view 2, which may run\n"
          "   deployments InferenceX never did, and that search capped at the most users a recipe of the group\n"
          "   swept: 'recipes' users', and that search without MTP drafts: 'no drafts'; 'CLI recipes': off the\n"
          "   frontier `simulate --deployments inferencex` writes per framework), and the disaggregated rows whose\n"
          "   GPU totals the recipes give")
    names = sorted({c.group for c in res})
    width = max([52] + [len(n) for n in names])
    print(f"   {'group':{width}s} {'n':>3s} {'med err':>8s} {'within35':>8s}")
    for name in names:
        errs = np.array([c.err for c in res if c.group == name])
        print(f"   {name:{width}s} {errs.size:3d} {np.median(errs):+8.0%} {np.mean(np.abs(errs) <= TOL):8.0%}")
    default_public = [c for c in default if c.split == "public"]
    for label, cmps in (("public, recipe space", [c for c in res if c.split == "public"]),
                        ("public, default search", default_public),
                        ("public, recipes' users", capped),
                        ("public, no drafts", plain),
                        ("public, CLI recipes", cli),
                        ("disagg dev", [c for c in res if c.split == "dev"]),
                        ("disagg holdout", [c for c in res if c.split == "holdout"])):
        errs = np.array([c.err for c in cmps])
        speed = np.array([c.speed[1] / c.speed[0] - 1 for c in cmps if c.speed])
        if errs.size:
            print(f"   ALL {label:22s} n={errs.size:3d}  within 35%: {np.mean(np.abs(errs) <= TOL):.0%}  "
                  f"|err| median {np.median(np.abs(errs)):.0%}  bias {np.median(errs):+.0%}   read at the measured "
                  f"throughput: tok/s/user within 35% {np.mean(np.abs(speed) <= TOL):.0%}, "
                  f"bias {np.median(speed):+.0%}")
    print("   the same points read on the recipes' envelope interpolated log-log between its points (as view 2)")
    for label, keep in (("public, recipe space", "public"), ("disagg dev", "dev"), ("disagg holdout", "holdout")):
        report_interpolated([c for c in res if c.split == keep], label)
    report_interpolated(cli, "public, CLI recipes")
    if without:
        print(f"   ({without} points of groups with no recipe on file are left out here)")


def measured_deployments(points: list[MeasuredPoint], envelopes: Envelopes) -> tuple[list[Cmp], int]:
    """Each silicon frontier point against the upper envelope of its group's own deployments, each predicted on
    its row (no search): the best predicted throughput per GPU at no less than the point's interactivity.
    Beside view 2 it splits that view's error into the cost model's (here) and the search's (the rest);
    (comparisons, points whose interactivity no predicted deployment of the group reaches)."""
    out, unreached = [], 0
    for p in points:
        env = envelopes.get(p.group)
        if p.max_gpus is None or not env:
            continue
        xs, ys = np.array([x for x, _ in env]), np.array([y for _, y in env])
        if not np.any(xs >= p.interactivity):
            unreached += 1
            continue
        model, hw, prec, fw, isl, osl = p.group
        out.append(Cmp(f"{_short(model)} {hw} {prec or 'native'} {fw} {isl}/{osl}", p.split, p.tput,
                       _achievable(xs, ys, p.interactivity), interpolated=_interpolated(xs, ys, p.interactivity)))
    return out, unreached


def measured_layouts(rows: list[SiliconRow]) -> dict[str, set[tuple[int, int, int]]]:
    """The (tp, dp, ep) layouts each silicon frontier group was measured with, by view 2's group name."""
    out: dict[str, set[tuple[int, int, int]]] = defaultdict(set)
    for r in rows:
        if r.mode == "agg" and "gap" not in r.source:
            out[f"{_short(r.model)} {r.hardware} {r.precision or 'native'} {r.framework} {r.isl}/{r.osl}"].add(
                served_layout(r))
    return out


def report_search_layouts(res: list[Cmp], layouts: dict[str, set[tuple[int, int, int]]]) -> None:
    """View 2's silicon points split by whether the search served them with a layout the group was measured with."""
    for label, keep in (("a measured layout", True), ("a layout never measured", False)):
        errs = np.array([c.err for c in res if c.split != "public" and c.layout is not None
                         and (c.layout in layouts.get(c.group, set())) == keep])
        if errs.size:
            print(f"   search chose {label:24s} n={errs.size:4d}  within 35%: {np.mean(np.abs(errs) <= TOL):.0%}  "
                  f"|err| median {np.median(np.abs(errs)):.0%}  bias {np.median(errs):+.0%}")


def report_measured_deployments(res: list[Cmp], unreached: int) -> None:
    print("\n2b) the same silicon frontier points against the envelope of the measured deployments, each predicted\n"
          "   on its own row (no search): 2) minus this is what the search adds by choosing other deployments")
    for split in ("dev", "holdout"):
        errs = np.array([c.err for c in res if c.split == split])
        if errs.size:
            print(f"   ALL {split:8s} n={errs.size:4d}  within 35%: {np.mean(np.abs(errs) <= TOL):.0%}  "
                  f"|err| median {np.median(np.abs(errs)):.0%}  bias {np.median(errs):+.0%}")
    print("   read on the envelope interpolated log-log between its points (as view 2)")
    for split in ("dev", "holdout"):
        report_interpolated([c for c in res if c.split == split], split)
    print(f"   ({unreached} points at an interactivity no predicted deployment of their group reaches)")


# -- 3. GPU-vs-GPU ratios ---------------------------------------------------------------------------------
def ratios(points: list[MeasuredPoint], curves: dict[tuple, tuple[np.ndarray, np.ndarray]],
           reader: Callable[[tuple, float], float | None] | None = None) -> list[Cmp]:
    """For two systems with the same model/precision/framework/lengths: tput ratio at a shared interactivity
    (one framework on both sides: a ratio across serving stacks is not a GPU-vs-GPU ratio). The predicted
    side is read off ``curves`` (interpolated), or by ``reader(group, interactivity)``."""
    read = reader or (lambda g, x: _curve_at(curves[g], x) if g in curves else None)
    by_key: dict[tuple, dict[str, list[MeasuredPoint]]] = defaultdict(lambda: defaultdict(list))
    for p in points:
        model, hw, prec, fw, isl, osl = p.group
        by_key[(model, prec, fw, isl, osl)][hw].append(p)
    out = []
    for (model, prec, fw, isl, osl), per_hw in by_key.items():
        hws = sorted(per_hw)
        for i, a in enumerate(hws):
            for b in hws[i + 1:]:
                ga, gb = (model, a, prec, fw, isl, osl), (model, b, prec, fw, isl, osl)
                for x in np.geomspace(10, 400, 12):
                    ya, yb = _measured_at(per_hw[a], x), _measured_at(per_hw[b], x)
                    if ya is None or yb is None:
                        continue
                    pa, pb = read(ga, x), read(gb, x)
                    if pa and pb:
                        out.append(Cmp(f"{_short(model)} {prec or 'native'} {fw} {a}/{b}", "", ya / yb, pa / pb))
    return out


def pinned_ratios(points: list[MeasuredPoint], envelopes: Envelopes) -> list[Cmp]:
    """View 3 with each system's predicted side read off its measured deployments' envelope (no search)."""
    curves = {g: (np.array([x for x, _ in env]), np.array([y for _, y in env])) for g, env in envelopes.items()}

    def read(group: tuple, interactivity: float) -> float | None:
        return (_achievable(*curves[group], interactivity) or None) if group in curves else None

    return ratios([p for p in points if p.max_gpus is not None], {}, reader=read)


def _measured_at(pts: list[MeasuredPoint], x: float) -> float | None:
    xs = np.array([p.interactivity for p in pts])
    ys = np.array([p.tput for p in pts])
    if xs.size < 2 or not xs.min() <= x <= xs.max():
        return None
    o = np.argsort(xs)
    return float(np.exp(np.interp(np.log(x), np.log(xs[o]), np.log(ys[o]))))


def _curve_at(curve: tuple[np.ndarray, np.ndarray], x: float) -> float | None:
    xs, ys = curve
    if xs.size == 0 or x > xs.max():
        return None
    return float(np.exp(np.interp(np.log(x), np.log(xs), np.log(ys))))


def report_ratios(res: list[Cmp], title: str = "3) GPU-vs-GPU throughput ratios at matched interactivity "
                                               "(measured vs predicted)") -> None:
    print("\n" + title)
    for name in sorted({c.group for c in res}):
        errs = np.array([c.err for c in res if c.group == name])
        meas = np.array([c.measured for c in res if c.group == name])
        print(f"   {name:40s} n={errs.size:2d} measured ratio {np.median(meas):5.2f}  |err| median "
              f"{np.median(np.abs(errs)):4.0%}  within 25%: {np.mean(np.abs(errs) <= RATIO_TOL):.0%}")
    if res:
        errs = np.array([c.err for c in res])
        print(f"   ALL n={errs.size}  within 25%: {np.mean(np.abs(errs) <= RATIO_TOL):.0%}")


# -- 4. trends ----------------------------------------------------------------------------------------------
def _curve(hw: str, model: str, precision: str | None, framework: str, isl: int = 8192, osl: int = 1024,
           disagg: bool = True, unified: bool = True, mtp: str = "auto") -> tuple[np.ndarray, np.ndarray]:
    r = search(simulate_base(hw, model, precision, framework), isl * RANGE, osl * RANGE, osl_spread=1 / RANGE,
               points=64, space=SearchSpace(max_concurrency=4096, disaggregation=disagg, unified=unified, mtp=mtp))
    return (np.array([p.interactivity for p in r.frontier])[::-1],
            np.array([p.total_tput_per_accelerator for p in r.frontier])[::-1])


@dataclass(frozen=True)
class Trend:
    """A published trend against the default search's curves and against InferenceX's own recipes (what
    ``simulate --deployments inferencex`` prices; None where the recipes on file lack a side)."""

    statement: str
    published: str
    predicted: str
    holds: bool
    on_recipes: str | None = None
    holds_on_recipes: bool | None = None


def _recipe_curve(hw: str, model: str, precision: str, framework: str, unified: bool | None = None,
                  isl: int = 8192, osl: int = 1024) -> tuple[np.ndarray, np.ndarray]:
    """The frontier ``simulate --deployments inferencex`` prices for a group (its unified recipes only, its
    disaggregated ones only, or both: ``unified`` True, False, None), as ``_curve`` returns a search's."""
    mine = [r for r in recipes_for(model, hw, precision, framework, isl, osl)
            if unified is None or (r.unified is not None) == unified]
    r = recipe_frontier(mine, checkpoint_precision(model, precision, hw), isl * RANGE, osl * RANGE,
                        osl_spread=1 / RANGE, points=64)
    return (np.array([p.interactivity for p in r.frontier])[::-1],
            np.array([p.total_tput_per_accelerator for p in r.frontier])[::-1])


def trends(points: list[MeasuredPoint], rows: list[SiliconRow]) -> list[Trend]:
    """The published trends the issue names, each side searched over the kind of deployment its published curve
    ran (GB200 NVL72 as InferenceX's Dynamo disaggregated pools, B200 as single-node unified instances), and
    each read again on the recipes InferenceX ran for those curves. The GB200/B200 ones also give the ratio on
    InferenceX's own runs in silicon_sample.csv, B200 unified against two GB200 sets (the blog's curves are of
    October 2025 stacks): the Dynamo runs of November 2025 whose GPU totals the file gives, and those of March
    2026 (Dynamo 0.8.1.post2) whose totals the recipes give."""
    out = []
    gb200 = _curve("gb200", "deepseek-r1", "nvfp4", "trtllm", unified=False)
    b200 = _curve("b200", "deepseek-r1", "nvfp4", "trtllm", disagg=False)
    group = ("deepseek-r1", "gb200", "nvfp4", "trtllm", 8192, 1024)

    def measured(hw: str, disaggregated: bool) -> list[MeasuredPoint]:
        return [p for p in points if p.group == (group[0], hw, *group[2:])
                and (p.max_gpus is None) == disaggregated]

    measured_gb200, measured_b200 = measured("gb200", True), measured("b200", False)
    march = [r for r in rows if r.total_source == "recipes"
             and (r.model, r.hardware, r.precision, r.framework, r.isl, r.osl) == group]
    measured_march = [MeasuredPoint(group, r.split, 1e3 / r.tpot_ms, measured_tput(r), "silicon_recipe")
                      for r in march]
    gb200_recipes = _recipe_curve("gb200", "deepseek-r1", "fp4", "trtllm", unified=False)
    b200_recipes = _recipe_curve("b200", "deepseek-r1", "fp4", "trtllm", unified=True)

    def every_run(hw: str, unified: bool) -> tuple[np.ndarray, np.ndarray]:     # view 2c's envelope of every run
        return recipe_envelope([r for r in recipes_for("deepseek-r1", hw, "fp4", "trtllm", 8192, 1024)
                                if (r.unified is not None) == unified], "nvfp4", RANGE)

    gb200_runs, b200_runs = every_run("gb200", unified=False), every_run("b200", unified=True)
    for x, want, ok in ((60, "slightly less than 3x", lambda r: 2.0 <= r <= 3.5),
                        (130, "~1x ('nearly no advantage')", lambda r: 0.7 <= r <= 1.5)):
        r = (_curve_at(gb200, x) or math.nan) / (_curve_at(b200, x) or math.nan)
        b200_at = _measured_at(measured_b200, x) or math.nan
        later = (_measured_at(measured_gb200, x) or math.nan) / b200_at
        latest = (_achievable(np.array([p.interactivity for p in measured_march]),
                              np.array([p.tput for p in measured_march]), x) or math.nan) / b200_at
        on_recipes = (_curve_at(gb200_recipes, x) or math.nan) / (_curve_at(b200_recipes, x) or math.nan)
        runs = (_achievable(*gb200_runs, x) or math.nan) / (_achievable(*b200_runs, x) or math.nan)
        out.append(Trend(f"GB200 NVL72 / B200 per GPU at {x} tok/s/user (DeepSeek-R1 FP4 8k/1k)",
                         f"{want} (InferenceX's runs in silicon_sample.csv: GB200 of Nov 2025 {later:.2f}x, "
                         f"of Mar 2026 {latest:.2f}x)", f"{r:.2f}x", bool(ok(r)),
                         f"{on_recipes:.2f}x [the best predicted run at least that fast, as view 2c reads: "
                         f"{runs:.2f}x]", bool(ok(on_recipes))))
    unified = _curve("gb200", "deepseek-r1", "nvfp4", "trtllm", disagg=False)
    xs = np.geomspace(max(gb200[0].min(), unified[0].min()), min(gb200[0].max(), unified[0].max()), 24)
    wins = [(_curve_at(gb200, x) or 0) >= 0.999 * (_curve_at(unified, x) or 0) for x in xs]
    out.append(Trend("disaggregated >= unified for DeepSeek-R1 on NVL72, over interactivity", "at almost all levels",
                     f"at {np.mean(wins):.0%} of levels", bool(np.mean(wins) >= 0.75),
                     "not read: no unified GB200 recipe on file"))
    h100 = _curve("h100", "deepseek-r1", None, "trtllm")
    h100_recipes = _recipe_curve("h100", "deepseek-r1", "fp8", "trtllm")
    r75 = (_curve_at(gb200, 75) or math.nan) / (_curve_at(h100, 75) or math.nan)
    r75_recipes = (_curve_at(gb200_recipes, 75) or math.nan) / (_curve_at(h100_recipes, 75) or math.nan)
    out.append(Trend("GB200 FP4 / H100 FP8 per GPU at 75 tok/s/user (DeepSeek-R1 8k/1k)", "up to 55x",
                     f"{r75:.1f}x", bool(10 <= r75 <= 100), f"{r75_recipes:.1f}x", bool(10 <= r75_recipes <= 100)))
    return out


def report_trends(found: list[Trend]) -> None:
    print("\n4) published trends (InferenceX blog; sources in data/reference/validation_public.yaml): the default\n"
          "   search, and InferenceX's own recipes (`simulate --deployments inferencex`, as their curves ran)")
    for t in found:
        recipes = "" if t.on_recipes is None else (
            f"; on its recipes {t.on_recipes}" + ("" if t.holds_on_recipes is None else
                                                  f" ({'holds' if t.holds_on_recipes else 'misses'})"))
        print(f"   {'holds' if t.holds else 'MISSES':6s} {t.statement}: published {t.published}, predicted "
              f"{t.predicted}{recipes}")
    read = [t for t in found if t.holds_on_recipes is not None]
    print(f"   default search: {sum(t.holds for t in found)} of {len(found)} hold; on InferenceX's recipes: "
          f"{sum(bool(t.holds_on_recipes) for t in read)} of the {len(read)} the recipes on file can read")


# -- 5. max-throughput tables -------------------------------------------------------------------------------
# the concurrencies a max-throughput run is read at: requests fed at an infinite rate fill the instance up to its
# KV cache or its batch limit, whichever binds first, and the estimator holds the running batch to what fits
SATURATION = np.array([256.0, 1024.0, 4096.0])


def max_throughput() -> tuple[list[Cmp], int]:
    """View 5: TensorRT-LLM's own max-throughput tables (``TRTLLM_PERF_0_13``): each cell's instance of ``tp`` GPUs
    at its fixed input/output lengths, fed at an infinite rate, predicted as the most output tokens per second it
    reaches over a saturating concurrency grid (FP8 engines with an FP8 KV cache, as the tables' note says; FP16 ones
    as 16-bit). Returns the comparisons (grouped by system, precision and model) and the cells that do not fit."""
    out, unfit = [], 0
    for r in reference_file().get("max_throughput", []):
        try:
            cfg = SimConfig.model_validate({
                "hardware": r["hardware"], "model": r["model"], "precision": r["precision"],
                "kv_dtype": "fp8" if r["precision"] == "fp8" else "bf16", "framework": "trtllm",
                "parallel": {"tp": r["tp"]}, "max_num_seqs": 4096})
            est = estimate(cfg, r["isl"], r["osl"], SATURATION, osl_spread=1.0)
        except (UserError, ValueError):
            unfit += 1
            continue
        family = load_hardware(r["hardware"]).family
        name = f"{r['hardware']} ({family}) {r['precision']} {r['model']}"
        out.append(Cmp(name, "public", r["output_tok_s"], float(np.max(est.output_tput_per_accelerator)) * r["tp"]))
    return out, unfit


def report_max_throughput(res: list[Cmp], unfit: int) -> None:
    print("\n5) max throughput, TensorRT-LLM's own tables (v0.13.0, TRTLLM_PERF_0_13): one tensor-parallel instance\n"
          "   at fixed input/output lengths fed at an infinite rate, output tok/s (TP 1-8, 128/128 to 20000/2000)")
    print(f"   {'system, precision, model':40s} {'n':>3s} {'med err':>8s} {'|err| med':>9s} {'within35':>8s}")
    for name in sorted({c.group for c in res}):
        errs = np.array([c.err for c in res if c.group == name])
        print(f"   {name:40s} {errs.size:3d} {np.median(errs):+8.0%} {np.median(np.abs(errs)):9.0%} "
              f"{np.mean(np.abs(errs) <= TOL):8.0%}")
    errs = np.array([c.err for c in res])
    unfit_note = f"  ({unfit} cells do not fit)" if unfit else ""
    print(f"   ALL n={errs.size}  within 35%: {np.mean(np.abs(errs) <= TOL):.0%}  |err| median "
          f"{np.median(np.abs(errs)):.0%}  bias {np.median(errs):+.0%}{unfit_note}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    ap.add_argument("--quick", action="store_true", help="pinned deployments only")
    args = ap.parse_args(argv)
    measured = load_silicon()
    if not measured:
        print("the validation tables need aiconfigurator-core: pip install 'scoville[silicon]'")
        return 1
    rows = [r for r in measured if not (r.inconsistent or r.beyond_bandwidth)]
    print(f"validation set: {len(rows)} distinct measurements from silicon_sample.csv "
          f"({sum(r.split == 'dev' for r in rows)} dev, {sum(r.split == 'holdout' for r in rows)} holdout); "
          f"{sum(r.suspected_speculative and r.mode == 'agg' for r in rows)} suspected speculative runs left out of "
          f"view 1, {sum(r.suspected_speculative and r.mode == 'disagg' for r in rows)} disaggregated ones read as "
          f"MTP runs (view 1g)")
    report_left_out([r for r in measured if r.inconsistent or r.beyond_bandwidth])
    view1 = pinned(rows)
    by_row, envelopes = view1.cmps, view1.envelopes
    report_pinned(by_row)
    report_light_load_ttft(view1.light)
    report_prompt_scaling(view1.light)
    report_kv_sensitivity(by_row, pinned(rows, kv_dtype="bf16").cmps)
    report_recipe_delays(by_row)
    view1s = pinned(rows, speculative=True)
    report_pinned(view1s.cmps, "1s) the runs read as speculative (left out of view 1), pinned as view 1 at their "
                               "InferenceX MTP\n   script's draft depth and settings (mtp_recipe), at the search's "
                               "acceptance rates (acceptance.MTP_ACCEPTANCE)")
    report_speculative_gain(rows, by_row["tpot"], view1s.cmps["tpot"])
    report_ttft_gap_in_steps(rows, [view1, view1s])
    for key, points in view1s.envelopes.items():
        envelopes[key].extend(points)
    disagg, open_depth = pinned_disaggregated(rows)
    report_pinned(disagg, "1g) pinned disaggregated deployments (silicon_sample.csv's Dynamo rows on their InferenceX "
                          "recipe's\n   pools, worker counts, MTP depth and decode batch limit; validation_data)")
    for m in ("tpot", "ttft", "tput"):
        errs = np.array([abs(c.err) for c in disagg[m] if SEED_TAG not in c.group])
        print(f"   never fitted (seed curves left out) {m}: n={errs.size} within 35% {np.mean(errs <= TOL):.0%}")
    print(f"   ({open_depth} rows of recipes that run MTP without naming its depth left out)")
    report_pinned_public(pinned_public())
    api, api_left = pinned_api(load_api_runs())
    report_pinned_api(api, api_left)
    if args.quick:
        return 0
    pts = silicon_frontier_points(rows) + public_points()
    res, curves, secs = frontier(pts)
    report_frontier(res, secs, len(curves))
    space = recipe_space(pts, rows)
    report_recipe_space(space.cmps, space.without, res, frontier(within_recipe_users(pts))[0],
                        frontier([p for p in pts if p.split == "public"], mtp="off")[0], cli_recipe_frontiers(pts))
    report_search_gaps(public_search_gaps(pts))
    report_measured_deployments(*measured_deployments(pts, envelopes))
    report_search_layouts(res, measured_layouts(rows))
    report_ratios(ratios(pts, curves))
    report_ratios(pinned_ratios(pts, envelopes), "3b) the same ratios with both sides predicted on their groups' "
                  "measured deployments (view 2b's envelopes, no search)")
    report_ratios(recipe_ratios(space), "3c) GPU-vs-GPU ratios of the Dynamo (disaggregated) frontiers, both sides on "
                  "InferenceX's recipes (view 2c's envelopes)")
    report_api_ratios(api_ratios(api))
    published = published_points()
    pres, pcurves, psecs = frontier(published)
    report_frontier(pres, psecs, len(pcurves), PUBLISHED_TITLE, ("published",))
    report_ratios(ratios(published, pcurves), "3d) GPU-vs-GPU ratios of the newest published runs (view 2d's groups, "
                  "as view 3)")
    report_trends(trends(pts, rows))
    report_max_throughput(*max_throughput())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
