"""View 2c's read of InferenceX's recipes (``scoville.sim.recipes``: the deployments InferenceX ran behind a public
curve, the same entries ``simulate --deployments inferencex`` prices).

View 2 reads a public point off the default search, which may pick deployments InferenceX never ran (more users
than its sweep, MTP where the recipe had none, other layouts) and then over-predicts the published curve without
any cost being wrong. View 2c predicts each recipe's deployments on their own, at the concurrencies the recipe
swept, and reads the point off the envelope of every one of those predictions (as a compare page plots every run,
where ``simulate`` keeps a frontier of 16): the error left is the cost model's. The same entries give
``validation_data`` the GPU totals and deployments of the file's disaggregated rows (view 1g).
"""

from __future__ import annotations

import numpy as np

from scoville.errors import UserError
from scoville.sim.recipes import Recipe, recipe_configs
from scoville.sim.steady import estimate

Envelope = tuple[np.ndarray, np.ndarray]     # predicted (tok/s/user, tok/s/GPU) of every run of a group's recipes


def recipe_envelope(recipes: list[Recipe], precision: str | None, length_factor: float) -> Envelope:
    """Every predicted run of ``recipes`` at their swept concurrencies (mean lengths ``length_factor`` × nominal,
    as InferenceX draws them), as (interactivity, throughput per GPU) arrays; a deployment that does not fit is
    left out, as InferenceX would have had no run of it."""
    xs: list[float] = []
    ys: list[float] = []
    for recipe in recipes:
        conc = np.asarray(recipe.concurrency, dtype=np.float64)
        for cfg in recipe_configs(recipe, precision):
            try:
                est = estimate(cfg, recipe.isl * length_factor, recipe.osl * length_factor, conc,
                               osl_spread=1.0 / length_factor)
            except (UserError, ValueError):
                continue
            ok = np.isfinite(est.tpot) & (est.tpot > 0) & (est.request_rate > 0)
            xs += list(est.interactivity[ok])
            ys += list(est.total_tput_per_accelerator[ok])
    return np.asarray(xs), np.asarray(ys)
