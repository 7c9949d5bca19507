"""The deployments InferenceX ran: its recipes, as configs the simulator prices (``simulate --deployments
inferencex``).

An InferenceX curve is not the best a system can do; it is the envelope of the recipes in InferenceX's master
configs (``configs/*-master.yaml``), each a framework, a parallel layout (tp, ep, attention DP), MTP on or off,
disaggregated pools with their worker counts, and the concurrencies it swept. The default search may find
deployments no recipe ran (more users, drafts where the recipe had none, other layouts) and so predicts above a
published curve without any cost being wrong; priced on the recipes instead, a prediction stands beside the
published curve like for like, and the gap between the two frontiers is what the search adds.

The facts live in ``data/reference/validation_public.yaml`` (``recipes:``, transcribed from InferenceX's configs
and NVIDIA's srt-slurm launch configs; source ``IX_CONFIGS``), beside the public results they explain; no measured
figure comes with them. A recipe's token budget lives in its launch script, not in the master config, and so does
its MTP depth unless the launch config's name gives it (TensorRT-LLM's ``..._mtp3.yaml``): each entry stands for
the budgets and depths (1-3) the search tries, and the envelope keeps the best, as the published curve keeps
whatever the script set.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from scoville.catalog.hardware import load_hardware
from scoville.sim.acceptance import MTP_ACCEPTANCE, mtp_draft
from scoville.sim.config import SimConfig, SimConfigError, SpeculativeConfig
from scoville.sim.defaults import default_attention_dp_balance, resolve_kv_dtype
from scoville.sim.frameworks import token_budget_flag
from scoville.sim.search import SearchResult, SearchSpace, frontier_of
from scoville.sim.steady import INFERENCEX, Protocol

RECIPES_FILE = "validation_public.yaml"
# a checkpoint's weight format -> the precision InferenceX's recipes name it by
_RECIPE_WEIGHTS = {"nvfp4": "fp4", "mxfp4": "fp4", "fp4": "fp4"}


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


def _pool(d: dict[str, Any]) -> Pool:
    return Pool(int(d.get("workers", 1)), int(d["tp"]), int(d.get("ep") or 1), bool(d.get("dp_attn")))


def _depths(mtp: bool | int) -> tuple[int, ...]:
    if mtp is True:
        return tuple(MTP_ACCEPTANCE)
    return (int(mtp),) if mtp else ()


@lru_cache(maxsize=1)
def reference_file() -> dict[str, Any]:
    """``validation_public.yaml`` parsed once a process (the C loader where PyYAML has it: 0.2 s, where the pure
    Python one takes 1.1 s): its recipes here, its points, trends and tables for the validation bench."""
    path = Path(str(resources.files("scoville") / "data" / "reference" / RECIPES_FILE))
    parsed: dict[str, Any] = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    return parsed


@lru_cache(maxsize=1)
def load_recipes() -> tuple[Recipe, ...]:
    """Every recipe entry on file."""
    out = []
    for r in reference_file().get("recipes", []):
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


def recipe_configs(recipe: Recipe, precision: str | None) -> list[SimConfig]:
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


def recipe_weights(model_precision: str) -> str:
    """The precision InferenceX's recipes name a weight format by (``fp4`` for NVFP4 and MXFP4 alike)."""
    return _RECIPE_WEIGHTS.get(model_precision, model_precision)


def recipes_for(model: str, hardware: str, weights: str, framework: str, isl: int, osl: int) -> list[Recipe]:
    """The recipe entries of ``model`` on ``hardware`` in ``weights`` (a recipe's precision: fp8, fp4, ...) under
    ``framework`` at ``isl``/``osl``; none on file is a one-line error that names what is."""

    def match(r: Recipe, *fields: str) -> bool:
        want = {"model": model, "hardware": hardware, "precision": weights, "framework": framework,
                "isl": isl, "osl": osl}
        return all(getattr(r, f) == want[f] for f in fields)

    mine = [r for r in load_recipes() if match(r, "model", "hardware", "precision", "framework", "isl", "osl")]
    if mine:
        return mine
    where = f"no InferenceX recipe of {model} on {hardware} in {weights} under {framework} at {isl}/{osl}"
    others = sorted({r.framework for r in load_recipes() if match(r, "model", "hardware", "precision", "isl", "osl")})
    if others:
        raise SimConfigError(f"{where}; use --framework {' or '.join(others)}")
    ours = [r for r in load_recipes() if r.model == model]
    systems = {r.hardware: sorted({q.precision for q in ours if q.hardware == r.hardware}) for r in ours}
    lengths = sorted({f"{r.isl}/{r.osl}" for r in ours})
    listed = ", ".join(f"{h} ({'/'.join(ps)})" for h, ps in sorted(systems.items()))
    cover = f"{model}'s recipes cover {listed} at {' and '.join(lengths)}" if ours else "none of it is on file"
    raise SimConfigError(f"{where}; {cover} (or drop --deployments inferencex to search)")


def recipe_frontier(recipes: list[Recipe], precision: str | None, isl: float, osl: float, *,
                    protocol: Protocol = INFERENCEX, osl_spread: float = 1.0, points: int = 16,
                    progress: Callable[[int, int], None] | None = None) -> SearchResult:
    """The frontier of ``recipes``' deployments at the concurrencies each swept, for mean lengths ``isl``/``osl``
    (``precision`` as ``SimConfig.precision``: None keeps the checkpoint's)."""
    candidates = [(cfg, np.asarray(r.concurrency, dtype=np.float64))
                  for r in recipes for cfg in recipe_configs(r, precision)]
    return frontier_of(candidates, isl, osl, protocol=protocol, osl_spread=osl_spread, points=points,
                       progress=progress, layouts=sorted({r.name for r in recipes}))
