"""The deployments InferenceX ran behind a public curve: its recipes, predicted one by one (view 2c).

A compare page of InferenceX plots, per GPU, the envelope of every run of every recipe in its master configs
(``configs/*-master.yaml``): a recipe names the framework, the parallel layout (tp, ep, attention DP), MTP on or
off, disaggregated pools with their worker counts, and the concurrencies swept. ``validation_public.yaml``
(``recipes:``) holds those facts, transcribed from InferenceX's configs (source ``IX_CONFIGS``): the unified
recipes of its compare-page points' groups and every NVIDIA Dynamo recipe of the models the validation set holds;
no measured figure comes with them.

View 2 reads such a point off the default search, which may pick deployments InferenceX never ran (more users
than its sweep, MTP where the recipe had none, other layouts) and then over-predicts the published curve without
any cost being wrong. Here each recipe's deployments are predicted on their own, at the concurrencies the
recipe swept, and the point is read off the envelope of those predictions: the error left is the cost model's.
A recipe's token budget lives in its launch script, not in the master config, and so does its MTP depth
unless the launch config's name gives it (TensorRT-LLM's ``..._mtp3.yaml``): each is tried at the budgets and
depths (1-3) the search tries, and the best counts (the envelope credits them, as the published curve credits
whatever the script set). The same entries give ``validation_data`` the GPU totals and deployments of the
file's disaggregated rows (view 1g).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

import numpy as np
import yaml

from scoville.catalog.hardware import load_hardware
from scoville.errors import UserError
from scoville.sim.acceptance import MTP_ACCEPTANCE, mtp_draft
from scoville.sim.config import SimConfig, SpeculativeConfig
from scoville.sim.defaults import default_attention_dp_balance, resolve_kv_dtype
from scoville.sim.frameworks import token_budget_flag
from scoville.sim.search import SearchSpace
from scoville.sim.steady import estimate

Envelope = tuple[np.ndarray, np.ndarray]     # predicted (tok/s/user, tok/s/GPU) of every run of a group's recipes


@dataclass(frozen=True)
class Pool:
    """One pool of instances as a recipe writes it: InferenceX's tp counts the instance's GPUs, and ``dp_attn``
    runs attention data-parallel over them (scoville: tp 1, dp = those GPUs)."""

    workers: int
    tp: int
    ep: int
    dp_attn: bool

    def parallel(self) -> dict[str, int]:
        return {"tp": 1, "dp": self.tp, "ep": self.ep} if self.dp_attn else {"tp": self.tp, "dp": 1, "ep": self.ep}


@dataclass(frozen=True)
class Recipe:
    """One search-space entry of an InferenceX recipe: a deployment and the concurrencies it was swept at."""

    name: str
    model: str
    hardware: str
    precision: str
    framework: str
    version: str                  # the serving image's version ("0.8.1.post2", "0.5.8.post1"): a row's must match
    isl: int
    osl: int
    mtp_depths: tuple[int, ...]   # () without MTP; the depth its launch config names; (1, 2, 3) where none is named
    concurrency: tuple[int, ...]
    unified: Pool | None          # a single instance (multinode: false)
    prefill: Pool | None          # disaggregated pools (multinode Dynamo recipes)
    decode: Pool | None
    decode_batch: int | None      # a decode rank's batch limit, where the launch config's name gives it
    expert_slots: int | None = None   # TensorRT-LLM's expert load balancer on the decode pool ("_eplb256_")

    @property
    def gpus(self) -> int:
        """Accelerators of the whole deployment."""
        pools = [self.unified] if self.unified is not None else [self.prefill, self.decode]
        return sum(p.workers * p.tp for p in pools if p is not None)


def _pool(d: dict) -> Pool:
    return Pool(int(d.get("workers", 1)), int(d["tp"]), int(d.get("ep") or 1), bool(d.get("dp_attn")))


def _depths(mtp: bool | int) -> tuple[int, ...]:
    if mtp is True:
        return tuple(MTP_ACCEPTANCE)
    return (int(mtp),) if mtp else ()


@lru_cache(maxsize=1)
def validation_public() -> dict:
    """``validation_public.yaml`` parsed once: its points, trends and recipes are read by several views, and a
    parse of the file takes about a second."""
    path = Path(str(resources.files("scoville") / "data" / "reference" / "validation_public.yaml"))
    return yaml.safe_load(path.read_text())


@lru_cache(maxsize=1)
def load_recipes() -> tuple[Recipe, ...]:
    out = []
    for r in validation_public().get("recipes", []):
        disagg = "prefill" in r
        out.append(Recipe(r["recipe"], r["model"], r["hardware"], r["precision"], r["framework"],
                          str(r["image"]).removeprefix("v").split("-")[0], int(r["isl"]), int(r["osl"]),
                          _depths(r["mtp"]), tuple(int(c) for c in r["concurrency"]),
                          None if disagg else _pool(r), _pool(r["prefill"]) if disagg else None,
                          _pool(r["decode"]) if disagg else None, r.get("decode_batch"), r.get("expert_slots")))
    return tuple(out)


def _kv_link(recipe: Recipe) -> str:
    """The KV copy stays on the scale-up links where both pools fit in one scale-up domain (GB200 NVL72), and
    crosses the NICs where they span nodes (B200, H100), as the search assumes."""
    return "scaleup" if recipe.gpus <= load_hardware(recipe.hardware).scaleup_domain else "scaleout"


def configs(recipe: Recipe, precision: str | None) -> list[SimConfig]:
    """The deployments one recipe entry stands for: each MTP depth it may have run, each token budget the search
    tries where it is unified (module docstring); a disaggregated one with its decode ranks' batch limit where the
    recipe names it, and, for SGLang with MTP, its overlap scheduler on: InferenceX's Dynamo SGLang MTP recipes
    set ``SGLANG_ENABLE_SPEC_V2`` (NVIDIA/srt-slurm ``recipes/{h100,h200,b200-fp8,gb200-fp8,gb300-fp8}/*mtp*``),
    where its single-node MTP script leaves the variable unexported (``dsr1_fp8_b200_mtp.sh``) and the default of
    SGLang 0.5.8/0.5.9, no overlap under drafts, held (``SimConfig.schedules_ahead``)."""
    fw = recipe.framework
    base = {"hardware": recipe.hardware, "model": recipe.model, "precision": precision, "framework": fw,
            "kv_dtype": resolve_kv_dtype(None, recipe.hardware, recipe.model, fw),
            "attention_dp_balance": default_attention_dp_balance(fw), "max_num_seqs": max(recipe.concurrency)}
    drafts: list[SpeculativeConfig | None] = [mtp_draft(k) for k in recipe.mtp_depths] or [None]
    out = []
    for draft in drafts:
        spec = draft.model_dump() if draft else None
        if recipe.unified is not None:
            par = recipe.unified.parallel()
            out += [SimConfig.model_validate({**base, "parallel": par, "speculative": spec,
                                              "max_num_batched_tokens": token_budget_flag(fw, b, par["dp"])})
                    for b in SearchSpace().budgets]
        else:
            assert recipe.prefill is not None and recipe.decode is not None
            pre, dec_layout = recipe.prefill.parallel(), recipe.decode.parallel()
            seqs = recipe.decode_batch * dec_layout["dp"] if recipe.decode_batch else None
            dec = {**dec_layout, "expert_slots": recipe.expert_slots}
            pools = {"prefill": {"parallel": pre, "replicas": recipe.prefill.workers,
                                 "max_num_batched_tokens": token_budget_flag(fw, SearchSpace().prefill_budget,
                                                                             pre["dp"])},
                     "decode": {"parallel": dec, "replicas": recipe.decode.workers, "max_num_seqs": seqs},
                     "kv_transfer": _kv_link(recipe)}
            overlap = {"async_scheduling": True} if fw == "sglang" and draft else {}
            out.append(SimConfig.model_validate({**base, **overlap, "parallel": dec, "speculative": spec,
                                                 "disaggregation": pools}))
    return out


def recipe_envelope(recipes: list[Recipe], precision: str | None, length_factor: float) -> Envelope:
    """Every predicted run of ``recipes`` at their swept concurrencies (mean lengths ``length_factor`` × nominal,
    as InferenceX draws them), as (interactivity, throughput per GPU) arrays; a deployment that does not fit is
    left out, as InferenceX would have had no run of it."""
    xs: list[float] = []
    ys: list[float] = []
    for recipe in recipes:
        conc = np.asarray(recipe.concurrency, dtype=np.float64)
        for cfg in configs(recipe, precision):
            try:
                est = estimate(cfg, recipe.isl * length_factor, recipe.osl * length_factor, conc,
                               osl_spread=1.0 / length_factor)
            except (UserError, ValueError):
                continue
            ok = np.isfinite(est.tpot) & (est.tpot > 0) & (est.request_rate > 0)
            xs += list(est.interactivity[ok])
            ys += list(est.total_tput_per_accelerator[ok])
    return np.asarray(xs), np.asarray(ys)
