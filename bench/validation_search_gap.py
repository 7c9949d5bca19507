"""View 2e: what the default search adds over InferenceX's own recipes at the public compare-page points, and what
it runs to get there.

View 2 reads a public point off the default search; view 2c off InferenceX's recipes, the deployments behind the
published curve. The two differ by what the search adds, and that gain is a prediction no published run checks.
This view names it point by point: the throughput per GPU both frontiers reach at the point's interactivity
(``simulate`` and ``simulate --deployments inferencex`` per framework, read as view 2 reads them: the best
predicted point at least that fast), the deployment the search serves it with, and what that deployment runs
that no recipe of the point's group ran (pools, drafts, attention DP, expert parallelism, more GPUs or more users
than any recipe). A gain on a deployment with nothing unrun is the cost model reading the recipes' own space
differently (a concurrency between two the recipe swept, a token budget); a gain on one with something unrun is
what the published result cannot confirm or refute.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from scoville.sim.config import SimConfig
from scoville.sim.recipes import Recipe
from scoville.sim.search import FrontierPoint
from validation_data import TOL

# the share of a point's throughput beyond which the search's gain over the recipes is named in the summary: the
# validation's tolerance, since a gain inside it cannot be told from the cost model's own error
GAIN = TOL


@dataclass(frozen=True)
class SearchGap:
    """One public point read off the default search and off its group's recipes."""

    group: str
    interactivity: float          # the point's, tok/s/user
    measured: float               # tok/s/GPU, published
    recipes: float                # tok/s/GPU, the recipes' frontier at that interactivity (0: none that fast)
    search: float                 # tok/s/GPU, the default search's
    deployment: str               # what the search serves it with
    unrun: tuple[str, ...]        # what that deployment runs that no recipe of the group ran


def _decode_parallel(cfg: SimConfig) -> tuple[int, int]:
    """(attention DP ranks, expert-parallel ranks) of the instance that decodes."""
    par = cfg.disaggregation.decode.parallel if cfg.disaggregation is not None else cfg.parallel
    return par.dp, par.ep


def _recipe_decode(r: Recipe) -> tuple[bool, int]:
    """(attention DP, expert-parallel ranks) of a recipe's decoding pool."""
    pool = r.decode if r.unified is None else r.unified
    assert pool is not None
    return pool.dp_attn, pool.ep


def unrun(point: FrontierPoint, recipes: Sequence[Recipe]) -> tuple[str, ...]:
    """What ``point``'s deployment runs that none of ``recipes`` ran: disaggregated pools, MTP drafts, attention DP,
    expert parallelism, more GPUs than the largest recipe of its kind (unified or pooled), more users than any
    recipe swept."""
    cfg = point.config
    pooled = cfg.disaggregation is not None
    same_kind = [r for r in recipes if (r.unified is None) == pooled]
    dp, ep = _decode_parallel(cfg)
    out = []
    if pooled and not same_kind:
        out.append("disaggregated pools")
    if cfg.speculative is not None and not any(r.mtp_depths for r in recipes):
        out.append("MTP drafts")
    if dp > 1 and not any(_recipe_decode(r)[0] for r in recipes):
        out.append("attention DP")
    if ep > 1 and not any(_recipe_decode(r)[1] > 1 for r in recipes):
        out.append("expert parallelism")
    if same_kind and cfg.accelerators > max(r.gpus for r in same_kind):
        out.append(f"{cfg.accelerators} GPUs (recipes <= {max(r.gpus for r in same_kind)})")
    most = max(c for r in recipes for c in r.concurrency)
    if point.concurrency > most:
        out.append(f"{point.concurrency} users (recipes <= {most})")
    return tuple(out)


def _fastest_enough(front: Sequence[FrontierPoint], interactivity: float) -> FrontierPoint | None:
    """The richest point of ``front`` at least ``interactivity`` fast (view 2's read), None when none is."""
    fast = [p for p in front if p.interactivity >= interactivity]
    return max(fast, key=lambda p: p.total_tput_per_accelerator) if fast else None


def search_gap(group: str, interactivity: float, measured: float, search: Sequence[FrontierPoint],
               recipe_front: Sequence[FrontierPoint], recipes: Sequence[Recipe]) -> SearchGap | None:
    """One public point read off both frontiers (the search's over every framework the page's envelope spans, the
    recipes' likewise), None where the search reaches no point that fast."""
    chosen = _fastest_enough(search, interactivity)
    if chosen is None:
        return None
    via_recipes = _fastest_enough(recipe_front, interactivity)
    drafts = f" mtp{chosen.config.speculative.num_draft_tokens}" if chosen.config.speculative else ""
    return SearchGap(group, interactivity, measured,
                     via_recipes.total_tput_per_accelerator if via_recipes else 0.0,
                     chosen.total_tput_per_accelerator, f"{chosen.config.label()}{drafts} c={chosen.concurrency}",
                     unrun(chosen, recipes))


def report_search_gaps(gaps: list[SearchGap]) -> None:
    print("\n2e) what the default search adds over InferenceX's own recipes at the public points: tok/s/GPU "
          "published,\n   off the recipes' frontier (`simulate --deployments inferencex`) and off the default "
          "search's, with the\n   deployment the search serves the point with and what it runs that no recipe "
          "of the group ran")
    group = None
    for g in gaps:
        if g.group != group:
            group = g.group
            print(f"   {group}")
        recipes = f"{g.recipes:7.0f} ({g.recipes / g.measured - 1:+5.0%})" if g.recipes else f"{'-':>15s}"
        print(f"     {g.interactivity:4.0f} tok/s/user  published {g.measured:7.0f}  recipes {recipes}  search "
              f"{g.search:7.0f} ({g.search / g.measured - 1:+5.0%})  {g.deployment}"
              f"{'  [' + '; '.join(g.unrun) + ']' if g.unrun else ''}")
    read = [g for g in gaps if g.recipes]
    if not read:
        return
    gain = np.array([g.search / g.recipes for g in read])
    beyond = [g for g, x in zip(read, gain, strict=True) if x > 1 + GAIN]
    print(f"   search over recipes: median {np.median(gain):.2f}x over {len(read)} points; more than "
          f"{1 + GAIN:.2f}x at {len(beyond)}, {sum(bool(g.unrun) for g in beyond)} of them on deployments "
          f"running something no recipe of the group ran")
