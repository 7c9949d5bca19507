"""Configuration search: which serving configuration puts each point on the frontier.

InferenceX's curves are not one configuration swept over concurrency: each
point of a published frontier is the best of many deployments (parallelism,
batch limits, aggregated or disaggregated, prefill:decode ratio). The search
does the same in simulation:

1. **shapes** — every instance shape that fits the model on the system's
   scale-up domain: tensor parallel (``tpN``), tensor + expert parallel
   (``tpN epN``) and, for MoE models, data-parallel attention with expert
   parallelism (``dpN epN``, the wide-EP layout DeepSeek-style models use);
2. **stage 1** evaluates each shape unified with default batch limits over the
   concurrency sweep (reduced request counts: the shape of a curve needs only a
   few requests per lane);
3. **stage 2** refines the shapes that reached the stage-1 frontier: batch
   limits (``max_num_seqs`` × token budget) and disaggregated deployments
   (prefill shape × decode shape × prefill:decode replica ratio);
4. the **frontier** is the upper-right envelope of every (candidate, point)
   result in (interactivity, total tokens/s per accelerator); each frontier
   point keeps the configuration that produced it.

``evaluate_candidate`` is a pure function of its arguments, so candidates fan
out over any ``scoville.executor.Executor`` (local processes now, Ray later)
with identical results.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from scoville.load import LoadPoint
from scoville.sim.config import DisaggregationConfig, ParallelConfig, PoolConfig, SimConfig
from scoville.sim.driver import point_rows

X_KEY = "interactivity"
Y_KEY = "total_throughput_per_accelerator"


@dataclass(frozen=True)
class SearchSpace:
    """What the search may vary (defaults: a space that runs in about a minute on two cores)."""

    max_instance_accelerators: int = 16
    max_num_seqs: tuple[int, ...] = (64, 256, 1024)
    max_num_batched_tokens: tuple[int, ...] = (4096, 16384)
    disaggregation: bool = True
    ratios: tuple[tuple[int, int], ...] = ((1, 1), (1, 2), (2, 1), (1, 3))
    refine_top: int = 3                 # stage-2 shapes (best of the stage-1 frontier)
    search_requests_per_lane: float = 2.0
    min_search_requests: int = 24

    def to_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


@dataclass
class SearchResult:
    """The frontier points (with their configurations) and what the search looked at."""

    frontier: list[dict[str, Any]]           # metrics rows, each with "config" (SimConfig) and "concurrency"
    evaluated: int
    rows: list[dict[str, Any]] = field(default_factory=list)
    elapsed_s: float = 0.0

    def summary(self) -> dict[str, Any]:
        return {
            "candidates": self.evaluated,
            "elapsed_s": round(self.elapsed_s, 2),
            "frontier": [{"config": r["config"].label(), "concurrency": r["concurrency"],
                          X_KEY: r.get(X_KEY), Y_KEY: r.get(Y_KEY)} for r in self.frontier],
        }


def evaluate_candidate(config: SimConfig, workload: Any, points: list[LoadPoint], seed: int = 0) -> list[dict[str, Any]]:
    """Metrics rows of one configuration over the points (pure: same inputs, same rows).

    Points must be in rising concurrency: the sweep of a candidate stops once it
    saturates (later points could only be dominated by its own earlier ones).
    """
    return point_rows(config, workload, sorted(points, key=lambda p: p.concurrency or 0), seed=seed,
                      stop_when_saturated=True)


def _evaluate_item(item: tuple[dict[str, Any], Any, list[LoadPoint], int]) -> list[dict[str, Any]]:
    """Executor entry point: configurations travel as plain dicts."""
    cfg, workload, points, seed = item
    return evaluate_candidate(SimConfig.model_validate(cfg), workload, points, seed)


def _powers_of_two(limit: int) -> list[int]:
    out, n = [], 1
    while n <= limit:
        out.append(n)
        n *= 2
    return out


def instance_shapes(base: SimConfig, space: SearchSpace = SearchSpace()) -> list[ParallelConfig]:
    """Every parallel layout of one instance that fits the model, smallest first."""
    from scoville.sim.engine import step_cost
    from scoville.sim.hardware import load_hardware
    from scoville.sim.models import load_model

    hw, model = load_hardware(base.hardware), load_model(base.model)
    limit = min(hw.scaleup_domain, space.max_instance_accelerators)
    moe = bool(getattr(model, "num_experts", 0))
    shapes: list[ParallelConfig] = []
    for n in _powers_of_two(limit):
        options = [ParallelConfig(tp=n)]
        if moe and n > 1 and n <= model.num_experts:
            options += [ParallelConfig(tp=n, ep=n), ParallelConfig(tp=1, dp=n, ep=n)]
        for p in options:
            cost = step_cost(base, p)
            if cost.kv_capacity_tokens(base.gpu_memory_utilization, base.max_num_batched_tokens) >= 65_536:
                shapes.append(p)
    return shapes


def search_points(points: list[LoadPoint], space: SearchSpace) -> list[LoadPoint]:
    """The sweep at search fidelity: a few requests per lane instead of the full count."""
    out = []
    for p in points:
        lanes = p.concurrency or 1
        n = max(space.min_search_requests, int(space.search_requests_per_lane * lanes))
        out.append(LoadPoint(index=p.index, concurrency=p.concurrency, rate=p.rate, burstiness=p.burstiness,
                             num_requests=min(p.num_requests or n, n), warmup_requests=min(p.warmup_requests, lanes),
                             duration_s=None))
    return out


def pareto(rows: list[dict[str, Any]], x: str = X_KEY, y: str = Y_KEY) -> list[dict[str, Any]]:
    """Rows not dominated in (x, y), both maximised; sorted by x descending."""
    good = [r for r in rows if r.get(x) and r.get(y)]
    good.sort(key=lambda r: (-r[x], -r[y]))
    out, best_y = [], -1.0
    for r in good:
        if r[y] > best_y:
            out.append(r)
            best_y = r[y]
    return out


def _with(base: SimConfig, **changes: Any) -> SimConfig:
    return SimConfig.model_validate({**base.model_dump(), **changes})


def stage2_candidates(base: SimConfig, top: list[ParallelConfig], shapes: list[ParallelConfig],
                      space: SearchSpace) -> list[SimConfig]:
    """Batch-limit variants of the best shapes, and disaggregated deployments built from them."""
    out: list[SimConfig] = []
    for p in top:
        for seqs in space.max_num_seqs:
            for budget in space.max_num_batched_tokens:
                if (seqs, budget) != (base.max_num_seqs, base.max_num_batched_tokens):
                    out.append(_with(base, parallel=p.model_dump(), max_num_seqs=seqs, max_num_batched_tokens=budget))
    if space.disaggregation:
        prefill_shapes = list(dict.fromkeys([shapes[0]] + top[:1]))  # cheapest that fits, and the best
        for pp in prefill_shapes:
            for dp in top[:2]:
                for rp, rd in space.ratios:
                    d = DisaggregationConfig(prefill=PoolConfig(parallel=pp, replicas=rp),
                                             decode=PoolConfig(parallel=dp, replicas=rd))
                    out.append(_with(base, disaggregation=d.model_dump()))
    return out


def search(
    base: SimConfig,
    workload: Any,
    points: list[LoadPoint],
    *,
    seed: int = 0,
    space: SearchSpace = SearchSpace(),
    executor: Any = None,
    progress: Callable[[int, int], None] | None = None,
) -> SearchResult:
    """Search configurations of ``base``'s model on ``base``'s hardware; the frontier with winning configs."""
    from scoville.executor import LocalExecutor

    t0 = time.perf_counter()
    shapes = instance_shapes(base, space)
    if not shapes:
        from scoville.sim.config import SimConfigError

        raise SimConfigError(f"{base.model} does not fit on up to {space.max_instance_accelerators} × "
                             f"{base.hardware} in any parallel layout; raise --max-accelerators")
    pts = search_points(points, space)
    own = executor is None
    ex = executor or LocalExecutor()
    stage1 = [_with(base, parallel=p.model_dump(), replicas=1, disaggregation=None) for p in shapes]
    tally = {"done": 0, "total": len(stage1)}

    def tick() -> None:
        tally["done"] += 1
        if progress is not None:
            progress(tally["done"], tally["total"])

    try:
        rows1 = _run(ex, stage1, workload, pts, seed, tick)
        front1 = pareto(rows1)
        best: dict[int, tuple[float, SimConfig]] = {}
        for r in front1:
            c = r["config"]
            best[id(c)] = (max(best.get(id(c), (0.0, c))[0], r[Y_KEY]), c)
        top = [c.parallel for _, c in sorted(best.values(), key=lambda t: -t[0])[: space.refine_top]]
        stage2 = stage2_candidates(base, top, shapes, space)
        tally["total"] += len(stage2)
        rows2 = _run(ex, stage2, workload, pts, seed, tick)
    finally:
        if own:
            ex.close()
    rows = rows1 + rows2
    front = pareto(rows)
    front.sort(key=lambda r: (r["concurrency"] or 0, -r[X_KEY]))
    return SearchResult(frontier=front, evaluated=len(stage1) + len(stage2), rows=rows,
                        elapsed_s=time.perf_counter() - t0)


def _run(ex: Any, configs: list[SimConfig], workload: Any, points: list[LoadPoint], seed: int,
         tick: Callable[[], None]) -> list[dict[str, Any]]:
    items = [(c.model_dump(), workload, points, seed) for c in configs]
    out: list[dict[str, Any]] = []
    for res in ex.submit(_evaluate_item, items):
        if res.error is not None:
            raise res.error
        for row in res.value:
            row["config"] = configs[res.index]
            out.append(row)
        tick()
    return out


def frontier_plan(result: SearchResult, points: list[LoadPoint]) -> tuple[list[LoadPoint], list[SimConfig]]:
    """Load points (full fidelity) and winning configurations of the frontier, for ``simulate_run``."""
    by_conc = {p.concurrency: p for p in points}
    out_points, configs = [], []
    for i, r in enumerate(result.frontier):
        src = by_conc.get(r["concurrency"]) or points[0]
        out_points.append(LoadPoint(index=i, concurrency=r["concurrency"], rate=src.rate, burstiness=src.burstiness,
                                    num_requests=src.num_requests, warmup_requests=src.warmup_requests,
                                    duration_s=src.duration_s))
        configs.append(r["config"])
    return out_points, configs
