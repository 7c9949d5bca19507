"""The public end-to-end validation set: measured serving results the simulator was never fitted to.

Main source: ``systems/silicon_sample.csv`` of the installed ``aiconfigurator-core`` package (read in place,
never copied): ~5,200 end-to-end measurements of TTFT and TPOT on H100/H200/B200/B300/GB200/GB300 with
vLLM, SGLang and TensorRT-LLM, most of them InferenceX runs (the ``image=`` and ``workflow_run_id=`` fields
of ``silicon_data_source``), each with its exact parallel layout and concurrency. Aggregated (unified)
rows carry everything a prediction needs; disaggregated rows lack their worker counts, so they enter only
the frontier comparison.

The file repeats many measurements under several sources (the same TTFT/TPOT in a March CSV, an April CSV
and the April database dump), sometimes with a different parallel layout written beside the same numbers.
Rows are therefore merged per *measurement* (model, system, framework, precision, mode, lengths,
concurrency, TTFT, TPOT); a measurement published with two different layouts is dropped as ambiguous, and so
is a row whose layout does not add up (tp × attention-dp ≠ moe-tp × moe-ep). The database dump also names 391
DeepSeek-R1 runs DeepSeek-V3 (``SAME_RUNS_AS``); until 2026-12-07 they were counted twice, 201 of them once in
each half of the split.

The InferenceX rows of the file write an expert-parallel deployment with its GPU count multiplied by the EP
degree: InferenceX's "tp 8, ep 8" (8 GPUs, experts split 8 ways; the row id ends ``_tp8_ep8``) appears as
tp 64, moe-tp 8, moe-ep 8, or as attention-dp 64; "tp 4, ep 4" as tp 16 or as tp 4 × attention-dp 4 with
moe-ep 16. ``_layout`` undoes that (checked against every row whose id carries its ``_tpX_epY``: all 2,163
agree, 234 of them corrected); AIC's own measurements (the ``aic-auto-gap`` rows, whose moe-tp × moe-ep
really is their GPU count) are read as written.

The file does not say whether a run used speculative decoding, and InferenceX ran DeepSeek-R1 with TensorRT-LLM
both plain and with MTP (its ``dsr1-fp8-b200-trt`` and ``dsr1-fp8-b200-trt-mtp`` configs, same layouts and
concurrencies). Where one deployment at one concurrency was measured twice with TPOTs more than
``SPECULATIVE_SPLIT`` apart, the faster is taken for the speculative run (``suspected_speculative``), and so is
the faster of every pair more than ``SERIES_SPLIT`` apart at that deployment's other concurrencies (MTP gains
less as the batch grows, so one threshold would keep half of a speculative series as plain runs). A deployment
whose runs split by more than ``SERIES_SPLIT`` at ``SERIES_PAIRS`` concurrencies or more is a speculative series
too: InferenceX's SGLang MTP runs of DeepSeek-R1 on B200 (depth 2) gain 1.2-1.5x, never more, and two runs of one
plain deployment do not differ by a fifth twice. The pinned view leaves them out, and the frontier view searches
their groups with MTP allowed. Among aggregated rows the pairs occur in DeepSeek-R1 TensorRT-LLM groups (61 rows)
and SGLang's B200 FP8 ones (7). InferenceX's Dynamo recipes, too, run many pool layouts plain and with MTP (one
entry each, same pools and concurrencies), and the file holds both runs: the same rule, one deployment being the
same pools within one image version, reads 129 disaggregated runs as speculative (SGLang on B200, H200 and H100
among them, whose MTP gains 1.1-1.5x there).

InferenceX's GB200 DeepSeek-R1 results are Dynamo disaggregated deployments; the file's April CSV writes 55 of
them as aggregated rows with the deployment's GPU total as tp (12 to 72, EP 1: no aggregated DeepSeek-R1
layout). ``load_silicon`` keeps that total as ``gpus_total`` and reads the row as disaggregated: it leaves the
pinned view and joins the frontier view beside the public points, against a search of disaggregated pools.

Some runs contradict their own deployment: a decode step with more sequences in it is never faster, yet the file
has runs whose TPOT is more than ``DECODE_MONOTONE_SLACK`` below that of the same deployment (same source file and
framework version) at a lower concurrency: Kimi K2.5 on H200 with vLLM, for one, reads 64 ms at 16 users where
the same deployment reads 22-32 ms at 32 and 64. Such a pair cannot both describe the deployment; the run that
contradicts the most others of its deployment is marked ``inconsistent`` (both, on a tie), and so on until none
contradict. The rule reads only the measurements, never a prediction; the bench leaves those runs out of every
view and lists them. It does not reach across versions: gpt-oss-120b on H100 with vLLM 0.11.2 at 512 users reads
3.6-5.6 ms (TTFT 20-118 s) where vLLM 0.18 at 32-64 users reads 10-16 ms, and stays in.

The file's disaggregated rows give each pool's layout but, except in the database dump (``workers``: 271 runs),
not how many instances ran, so their GPU total (and with it throughput per GPU) is unknown. InferenceX's recipes
(``scoville.sim.recipes``) name the worker counts: a row takes the deployment of the recipe entry of its model,
system, framework, image version, lengths and precision that swept its concurrency with its pools' sizes (GPUs
per prefill and decode instance) and, where the dump gives them, its worker counts, when every such entry agrees
on the GPU total (``gpus_total``) and, for ``recipe``, on the MTP depth and batch limit too. The dump's counts
check the matching: of the 133 runs both give a total for, 130 agree. A run the dump gives worker counts for and
no entry matches (another image version) keeps the dump's total and, for a model without MTP heads, the deployment
its row writes (``_file_deployment``): view 1g pins it, the frontier views leave it out.
Where plain and MTP entries match, a run read as speculative takes the MTP ones, the slower run of its pair the
plain ones (and stays unpinned where only MTP entries match: InferenceX's recipe list does not hold every run
its results do), a lone run whichever match (a pair closer than the split reads as two plain runs, as it does
among aggregated rows).

Split: every measurement is assigned to ``dev`` or ``holdout`` by a hash of that key. Development looked at
``dev`` only (to find missing terms in the model, never to set a number); ``holdout`` is reported apart.
"""

from __future__ import annotations

import csv
import hashlib
import re
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from scoville.catalog.hardware import load_hardware
from scoville.catalog.models import load_model
from scoville.errors import UserError
from scoville.sim.config import SimConfig
from scoville.sim.engine import step_cost
from scoville.sim.recipes import Pool, Recipe, load_recipes

# HF ids in the validation set -> a model scoville knows (catalog name or an AIC config.json, read in place)
MODELS = {
    "deepseek-ai/DeepSeek-R1": "deepseek-r1",
    "deepseek-ai/DeepSeek-V3": "deepseek-r1",          # same architecture and shapes as R1
    "nvidia/DeepSeek-R1-NVFP4": "deepseek-r1",
    "openai/gpt-oss-120b": "gpt-oss-120b",
    "moonshotai/Kimi-K2.5": "kimi-k2.5",
    "meta-llama/Llama-3.1-70B": "llama-3.1-70b",
    "meta-llama/Llama-3.1-8B-Instruct": "llama-3.1-8b",
    "nvidia/Llama-3.1-8B-Instruct-FP8": "llama-3.1-8b",
    "Qwen/Qwen3-32B": "qwen3-32b",
    "Qwen/Qwen3-235B-A22B-FP8": "aic:Qwen--Qwen3-235B-A22B-FP8",
    "MiniMaxAI/MiniMax-M2.5": "aic:MiniMaxAI--MiniMax-M2.5",
}
# HF ids under which the file publishes another id's runs: the April database dump writes 391 DeepSeek-R1 runs as
# DeepSeek-V3 (the same TTFT and TPOT to the last digit as the March and April CSVs' DeepSeek-R1 rows); merging them
# under the run's own id keeps one measurement from counting twice, or in both halves of the split
SAME_RUNS_AS = {"deepseek-ai/DeepSeek-V3": "deepseek-ai/DeepSeek-R1"}
SYSTEMS = {"h100_sxm": "h100", "h200_sxm": "h200", "b200_sxm": "b200", "b300_sxm": "b300", "gb200": "gb200",
           "gb300": "gb300"}
PRECISION = {"fp8": "fp8", "fp4": "nvfp4", "int4": "int4", "bf16": "bf16", "": None}
DISAGG_TOTAL_ABOVE = 8    # a GB200 "agg" row with more tensor-parallel GPUs than this and no EP is a Dynamo total
SPECULATIVE_SPLIT = 1.5   # TPOT ratio between two runs of one deployment that only speculative decoding explains
DECODE_MONOTONE_SLACK = 1.3   # a run this much faster per token than the same deployment at fewer users: a bad run
SERIES_SPLIT = 1.2        # ... at the other concurrencies of a deployment that has such a pair (MTP's gain shrinks
                          # as the batch grows: 1.6x at 4 users, 1.3-1.4x at 32-64 on H200)
LENGTH_FLOOR = 0.8        # InferenceX draws prompt and output lengths from [0.8 L, L] (--random-range-ratio 0.8)
RANGE = (1.0 + LENGTH_FLOOR) / 2.0   # lengths drawn uniformly from [0.8 L, L]: mean 0.9 L, longest / mean = 1/0.9
TOL = 0.35                # the bar for a predicted point: within 35% of the measured figure
RATIO_TOL = 0.25          # ... and for a predicted GPU-vs-GPU ratio: within 25% of the measured one
SERIES_PAIRS = 2          # ... or a deployment split by more than SERIES_SPLIT at this many concurrencies: SGLang's MTP
                          # gains 1.2-1.5x on B200 (InferenceX's dsr1-fp8-b200-sglang-mtp, depth 2), never 1.5x


TotalSource = Literal["csv", "recipes", "dump"]


@dataclass(frozen=True)
class SiliconRow:
    """One measured point with the deployment that produced it."""

    id: str
    split: str                  # dev | holdout
    model: str                  # scoville model name or path
    model_id: str               # the HF id as published
    hardware: str
    framework: str
    framework_version: str
    precision: str | None
    mode: str                   # agg | disagg
    isl: int
    osl: int
    concurrency: int
    tp: int
    dp: int
    ep: int
    prefill: tuple[int, int, int] | None   # disagg pool shapes (tp, dp, ep)
    decode: tuple[int, int, int] | None
    ttft_ms: float
    tpot_ms: float
    source: str
    suspected_speculative: bool = False   # the faster of a plain/speculative pair (module docstring)
    inconsistent: bool = False            # contradicts its deployment's other runs (module docstring)
    beyond_bandwidth: bool = False        # faster per token than its GPUs' memory allows (``_mark_beyond_bandwidth``)
    gpus_total: int | None = None         # a disaggregated deployment's GPU total, where known (total_source)
    measured: str = ""                    # the run's date (ISO) where the file gives it: which recipe version ran
    recipe: Recipe | None = None          # a disaggregated row's InferenceX deployment (module docstring)
    # where gpus_total comes from: "csv" (a GB200 Dynamo total written as tp), "recipes" (scoville.sim.recipes), "dump"
    # (the database dump's worker counts, no recipe entry matching)
    total_source: TotalSource | None = None
    workers: tuple[int, int] | None = None   # (prefill, decode) instances of a disaggregated run, where the file says

    @property
    def accelerators(self) -> int:
        return self.gpus_total or self.tp * self.dp


def silicon_path() -> Path | None:
    from scoville.sim.kernels import tables

    root = tables.data_dir()
    path = root.parent / "silicon_sample.csv" if root else None
    return path if path and path.is_file() else None


def _model_ref(model_id: str) -> str | None:
    ref = MODELS.get(model_id)
    if ref is None or not ref.startswith("aic:"):
        return ref
    from scoville.sim.kernels import tables

    root = tables.data_dir()
    path = root.parent.parent / "model_configs" / f"{ref[4:]}_config.json" if root else None
    return str(path) if path and path.is_file() else None


def _int(x: str) -> int:
    return int(float(x)) if x not in ("", None) else 0


def _layout(r: dict[str, str]) -> tuple[int, int, int]:
    """An aggregated row's (tp, attention dp, moe ep), with the InferenceX rows' EP inflation undone (module
    docstring): where moe-tp and moe-ep both exceed 1, or tp and attention-dp both do, the deployment ran on
    moe-tp (resp. tp) GPUs with attention TP or attention DP across all of them."""
    tp, dp = _int(r["tp_size"]) or 1, _int(r["attention_dp_size"]) or 1
    moe_tp, ep = _int(r["moe_tp_size"]) or 1, _int(r["moe_ep_size"]) or 1
    if "aic-auto-gap" in r["silicon_data_source"]:
        return tp, dp, ep
    if moe_tp > 1 and ep > 1:
        gpus = moe_tp
    elif tp > 1 and dp > 1:
        gpus, ep = tp, ep // tp
    else:
        return tp, dp, ep
    return (gpus, 1, ep) if dp == 1 else (1, gpus, ep)


def _pool(r: dict[str, str], pre: str) -> tuple[int, int, int] | None:
    """A disaggregated row's pool layout (tp, attention dp, moe ep) from the columns prefixed ``pre``."""
    if not r[f"{pre}tp_size"]:
        return None
    return _int(r[f"{pre}tp_size"]) or 1, _int(r[f"{pre}attention_dp_size"]) or 1, _int(r[f"{pre}moe_ep_size"]) or 1


def _split(key: str) -> str:
    return "dev" if int(hashlib.sha256(key.encode()).hexdigest(), 16) % 2 == 0 else "holdout"


def load_silicon() -> list[SiliconRow]:
    """One row per distinct, unambiguous measurement of a model and system scoville can simulate."""
    path = silicon_path()
    if path is None:
        return []
    by_key: dict[str, list[SiliconRow]] = {}
    with path.open(newline="") as fh:
        for r in csv.DictReader(fh):
            model, hw = _model_ref(r["model_path"]), SYSTEMS.get(r["system"])
            if model is None or hw is None or r["backend"] not in ("vllm", "sglang", "trtllm"):
                continue
            if r["mode"] == "agg" and (_int(r["tp_size"]) or 1) * (_int(r["attention_dp_size"]) or 1) != \
                    (_int(r["moe_tp_size"]) or 1) * (_int(r["moe_ep_size"]) or 1) and _int(r["moe_tp_size"]):
                continue
            conc = re.search(r"silicon_concurrency=(\d+)", r["silicon_data_source"])
            concurrency = int(conc.group(1)) if conc else _int(r["batch_size"])
            tp, dp, ep = _layout(r)
            mode, gpus_total = r["mode"], None
            total_source: TotalSource | None = None
            if mode == "agg" and r["system"] == "gb200" and tp > DISAGG_TOTAL_ABOVE and dp == ep == 1:
                mode, gpus_total, tp, total_source = "disagg", tp, 1, "csv"
            measurement = (r["system"], r["backend"], r["precision"], r["mode"], r["isl"], r["osl"], concurrency,
                           round(float(r["silicon_ttft_ms"]), 3), round(float(r["silicon_tpot_ms"]), 4))
            published = "|".join(str(x) for x in (r["model_path"], *measurement))
            key = "|".join(str(x) for x in (SAME_RUNS_AS.get(r["model_path"], r["model_path"]), *measurement))
            by_key.setdefault(key, []).append(SiliconRow(
                id=r["id"], split=_split(published), model=model, model_id=r["model_path"], hardware=hw,
                framework=r["backend"], framework_version=r["backend_version"], precision=PRECISION.get(r["precision"]),
                mode=mode, isl=_int(r["isl"]), osl=_int(r["osl"]), concurrency=concurrency,
                tp=tp, dp=dp, ep=ep,
                prefill=_pool(r, "prefill_"), decode=_pool(r, "decode_"),
                ttft_ms=float(r["silicon_ttft_ms"]), tpot_ms=float(r["silicon_tpot_ms"]),
                source=r["silicon_data_source"].split(";")[0], gpus_total=gpus_total, total_source=total_source,
                workers=(_int(r["prefill_num_workers"]), _int(r["decode_num_workers"]))
                if mode == "disagg" and r["prefill_num_workers"] and r["decode_num_workers"] else None,
                measured=date.group(1) if (date := re.search(r"measured=(\d{4}-\d{2}-\d{2})",
                                                              r["silicon_data_source"])) else ""))
    out = []
    for rows in by_key.values():
        # a run also published under another id is read as its own id's rows write it (split, layout): the dump
        # writes the disaggregated pools of those runs otherwise (attention DP where the CSVs have TP)
        workers = {x.workers for x in rows if x.workers}
        rows = [x for x in rows if x.model_id not in SAME_RUNS_AS] or rows
        layouts = {(x.tp, x.dp, x.ep, x.prefill, x.decode) for x in rows}
        if len(layouts) == 1 and len(workers) <= 1:
            # the dump alone gives a disaggregated run's worker counts: they join the run however it is named
            out.append(replace(rows[0], workers=workers.pop() if workers else None))
    return _attach_recipes(_mark_beyond_bandwidth(_mark_inconsistent(_mark_speculative(out))))


def deployment(r: SiliconRow) -> tuple:
    """What makes two runs the same deployment: the layout of an aggregated one; the pools of a disaggregated one
    (its GPU total where the file gives one), within one image version (disaggregated recipes change between
    versions at the same pool shapes)."""
    if r.mode == "agg":
        return (r.model, r.hardware, r.framework, r.precision, r.isl, r.osl, r.tp, r.dp, r.ep)
    return (r.model, r.hardware, r.framework, r.framework_version, r.precision, r.isl, r.osl, r.prefill, r.decode,
            r.gpus_total)


def _mark_speculative(rows: list[SiliconRow]) -> list[SiliconRow]:
    """Flag the faster of two measurements of one deployment (``deployment``) and concurrency whose TPOTs differ
    by more than ``SPECULATIVE_SPLIT`` (by more than ``SERIES_SPLIT`` throughout a deployment that has such a pair,
    or that many at ``SERIES_PAIRS`` concurrencies), for models with MTP heads (elsewhere such a pair is a bad run,
    not a speculative one: Kimi K2.5 on H200 has one at 64 ms against 16 ms)."""
    has_mtp = {m: load_model(m).mtp_layers > 0 for m in {r.model for r in rows}}
    same: dict[tuple, list[SiliconRow]] = {}
    for r in rows:
        if has_mtp[r.model]:
            same.setdefault((*deployment(r), r.concurrency), []).append(r)
    spread = {key: max(x.tpot_ms for x in runs) / min(x.tpot_ms for x in runs) for key, runs in same.items()}
    series_pairs = Counter(key[:-1] for key, ratio in spread.items() if ratio > SERIES_SPLIT)
    speculative_deployments = {key[:-1] for key, ratio in spread.items() if ratio > SPECULATIVE_SPLIT} | \
        {series for series, pairs in series_pairs.items() if pairs >= SERIES_PAIRS}
    faster: set[str] = set()
    for key, runs in same.items():
        threshold = SERIES_SPLIT if key[:-1] in speculative_deployments else SPECULATIVE_SPLIT
        slowest = max(x.tpot_ms for x in runs)
        faster.update(x.id for x in runs if slowest / x.tpot_ms > threshold)
    return [replace(r, suspected_speculative=True) if r.id in faster else r for r in rows]


def _mark_inconsistent(rows: list[SiliconRow]) -> list[SiliconRow]:
    """Mark the runs whose TPOT beats, by more than ``DECODE_MONOTONE_SLACK``, that of the same plain deployment at a
    lower concurrency (speculative runs are faster by design and stay out of the check): the run in the most such
    pairs first, all of them on a tie, until no pair is left."""
    series: dict[tuple, list[SiliconRow]] = {}
    for r in rows:
        if r.mode == "agg" and not r.suspected_speculative:
            series.setdefault((r.model, r.hardware, r.framework, r.framework_version, r.precision, r.isl, r.osl,
                               r.tp, r.dp, r.ep, r.source), []).append(r)
    bad: set[str] = set()
    for runs in series.values():
        pairs = [(a.id, b.id) for a in runs for b in runs
                 if a.concurrency < b.concurrency and a.tpot_ms > DECODE_MONOTONE_SLACK * b.tpot_ms]
        while pairs:
            count: dict[str, int] = {}
            for pair in pairs:
                for run in pair:
                    count[run] = count.get(run, 0) + 1
            worst = max(count.values())
            out = {run for run, n in count.items() if n == worst}
            bad |= out
            pairs = [p for p in pairs if not out & set(p)]
    return [replace(r, inconsistent=True) if r.id in bad else r for r in rows]


def _decode_floor_s(row: SiliconRow, precision: str | None) -> float:
    """The least time a plain decode step of ``row``'s deployment can take: each GPU reads its share of the weights
    the step touches (every non-expert weight; the experts its running batch routes to, each token to
    ``experts_per_token`` of them at random) and its running sequences' KV cache, at its datasheet HBM bandwidth.
    The batch is Little's law's (users × decode time / request time) and every length the shortest InferenceX draws
    (0.8 of nominal) with an FP8 cache, so the floor errs low."""
    cfg = SimConfig.model_validate({"hardware": row.hardware, "model": row.model, "precision": precision,
                                    "kv_dtype": "fp8", "framework": row.framework,
                                    "parallel": {"tp": row.tp, "dp": row.dp, "ep": row.ep}})
    cost = step_cost(cfg, cfg.parallel)
    decode_s = (LENGTH_FLOOR * row.osl - 1) * row.tpot_ms / 1e3
    seqs = row.concurrency * decode_s / (row.ttft_ms / 1e3 + decode_s)
    return cost.decode_floor_bytes(seqs, LENGTH_FLOOR * row.isl) / (cost.hw.hbm_bandwidth_tbps * 1e12)


def _mark_beyond_bandwidth(rows: list[SiliconRow]) -> list[SiliconRow]:
    """Mark the plain aggregated runs whose TPOT is below ``_decode_floor_s`` at the lighter of the row's weight format
    and the checkpoint's own (gpt-oss rows say NVFP4 of an MXFP4 checkpoint): no GPU reads its memory faster than
    its datasheet. Runs of models with MTP heads are not checked: an unflagged speculative run may beat it by design."""
    out = []
    for r in rows:
        if r.mode != "agg" or r.suspected_speculative or r.inconsistent or load_model(r.model).mtp_layers:
            out.append(r)
            continue
        floors = []
        for precision in {None, r.precision}:
            try:
                floors.append(_decode_floor_s(r, precision))
            except (UserError, ValueError):
                continue
        out.append(replace(r, beyond_bandwidth=True) if floors and r.tpot_ms / 1e3 < min(floors) else r)
    return out


def _pool_gpus(pool: tuple[int, int, int] | None) -> int:
    return pool[0] * pool[1] if pool else 0


def _file_pool(workers: int, pool: tuple[int, int, int]) -> Pool | None:
    """A pool the file writes as (tp, attention dp, ep) with its instance count, as a recipe would; None for a mix
    of attention TP and DP, which a recipe's pool does not express."""
    tp, dp, ep = pool
    return None if tp > 1 and dp > 1 else Pool(workers, tp * dp, ep, dp > 1)


def _file_deployment(row: SiliconRow) -> Recipe | None:
    """The deployment a disaggregated run's own row gives where no recipe entry matches it: its pools with the dump's
    worker counts, for a model without MTP heads (the file does not say whether a run drafted; one that cannot is
    plain) and with no decode batch limit (the file gives none); none for AIC's own runs, which give no
    concurrency."""
    if row.workers is None or row.prefill is None or row.decode is None or row.concurrency < 1 \
            or load_model(row.model).mtp_layers:
        return None
    prefill, decode = _file_pool(row.workers[0], row.prefill), _file_pool(row.workers[1], row.decode)
    if prefill is None or decode is None:
        return None
    return Recipe("silicon_sample.csv", row.model, row.hardware, row.precision or "", row.framework,
                  row.framework_version, row.isl, row.osl, (), (row.concurrency,), None, prefill, decode, None)


def _attach_recipes(rows: list[SiliconRow]) -> list[SiliconRow]:
    """Give each disaggregated row without a GPU total the deployment of its InferenceX recipe entry (module
    docstring): the total where every matching entry agrees on it, the entry itself where they agree on
    everything a prediction needs. A run no entry matches keeps the total and, where it can, the deployment of its
    own row, if the dump gives its worker counts (``_file_deployment``)."""
    recipes = [r for r in load_recipes() if r.prefill is not None and r.decode is not None]
    speculative_at = {(*deployment(r), r.concurrency) for r in rows if r.suspected_speculative}
    out = []
    for row in rows:
        if row.mode != "disagg" or row.gpus_total:
            out.append(row)
            continue
        match = [r for r in recipes
                 if (r.model, r.hardware, r.framework, r.version, r.isl, r.osl) ==
                 (row.model, row.hardware, row.framework, row.framework_version, row.isl, row.osl)
                 and PRECISION.get(r.precision) == row.precision and row.concurrency in r.concurrency
                 and r.prefill is not None and r.decode is not None
                 and (r.prefill.tp, r.decode.tp) == (_pool_gpus(row.prefill), _pool_gpus(row.decode))
                 and row.workers in (None, (r.prefill.workers, r.decode.workers))]
        if not match and row.workers:
            gpus = row.workers[0] * _pool_gpus(row.prefill) + row.workers[1] * _pool_gpus(row.decode)
            out.append(replace(row, gpus_total=gpus, recipe=_file_deployment(row), total_source="dump"))
            continue
        # InferenceX runs some deployments both plain and with MTP (one recipe entry each): a run read as speculative
        # is one of the MTP entries, the slower run of such a pair one of the plain entries (none, if no plain entry
        # matches: it stays unpinned), and a lone run whichever entries match
        paired = (*deployment(row), row.concurrency) in speculative_at
        kind = [r for r in match if bool(r.mtp_depths) == row.suspected_speculative]
        chosen = kind if kind or row.suspected_speculative or paired else match
        totals = {r.gpus for r in chosen or match}
        total = totals.pop() if len(totals) == 1 else None
        deployments = {(r.gpus, r.prefill, r.decode, r.mtp_depths, r.decode_batch, r.expert_slots) for r in chosen}
        out.append(replace(row, gpus_total=total, recipe=chosen[0] if len(deployments) == 1 else None,
                           total_source="recipes" if total is not None else None))
    return out


def checkpoint_precision(model: str, prec: str | None, hw: str) -> str | None:
    """The ``--precision`` a group's checkpoint needs: gpt-oss ships in MXFP4 (its native format); a 4-bit
    float group is the vendor's FP4 (NVFP4 on NVIDIA, MXFP4 on AMD); FP8 and INT4 are themselves."""
    if prec is None or model == "gpt-oss-120b":
        return None
    if prec in ("fp4", "nvfp4", "mxfp4"):
        return "mxfp4" if load_hardware(hw).vendor == "amd" else "nvfp4"
    return prec
