"""``simulate`` as a library call: one typed spec in, a run directory out (the CLI is a thin shell over it).

The spec is the command's options (``scoville simulate --help`` lists the same names); ``simulate`` builds the
``SimConfig``, the workload and the load plan, searches deployments unless a config is pinned, and writes the
run: the steady-state estimator's frontier (``fidelity="analytic"``) or every frontier point replayed in the
discrete-event engine (``"des"``; session workloads and traces always). Progress goes to two optional
callbacks, so a notebook, a service and the Rich progress bars of the CLI all drive the same code.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from scoville.load import LoadPoint, LoadSpec
from scoville.sim.config import SimConfig, SimConfigError, SpeculativeConfig
from scoville.sim.defaults import default_attention_dp_balance, resolve_kv_dtype
from scoville.spec import Spec
from scoville.workload.options import WorkloadSpec

if TYPE_CHECKING:
    from scoville.sim.search import SearchResult

DEFAULT_CONCURRENCY = "1-1024"
DEFAULT_SCENARIO = "8k1k"

Progress = Callable[[int, int | None], None]      # (done, total or None while unknown)


class SimulateSpec(Spec):
    """Everything ``scoville simulate`` takes: the system and model (or a pinned config), the serving choices the
    search explores or pins, and where the run goes. ``workload`` and ``load`` are shared with ``sweep``."""

    hardware: str | None = Field(None, description="catalog name (h200, gb300, ...) or a hardware YAML path")
    model: str | None = Field(None, description="catalog name (deepseek-r1, ...) or a config.json path")
    config: Path | None = Field(None, description="pin one SimConfig (YAML/JSON) instead of searching")
    workload: WorkloadSpec = WorkloadSpec()
    load: LoadSpec = LoadSpec()
    precision: str | None = Field(None, description="native, fp8, nvfp4/mxfp4/fp4, int4, bf16, fp32")
    kv_dtype: Literal["auto", "bf16", "fp8", "fp32"] = "auto"
    framework: Literal["vllm", "sglang", "trtllm"] = "vllm"
    mtp: str = Field("auto", description="auto | off | K[:ACCEPT]")
    max_accelerators: int | None = Field(None, ge=1)
    disaggregation: bool = True
    unified: bool = Field(True, description="search unified instances; off: disaggregated pools only")
    deployments: Literal["search", "inferencex"] = Field(
        "search", description="search: every layout, drafts and pool the simulator finds; inferencex: only the "
                              "recipes InferenceX ran for this system, model, precision and framework")
    fidelity: Literal["analytic", "des"] | None = None
    cost_backend: Literal["auto", "measured", "transfer"] = "auto"
    profile: Path | None = None
    power: Literal["rated", "all-in", "model"] = "rated"
    compat: Literal["inferencex", "clean"] = "inferencex"
    seed: int = 0
    runs: Path = Path("runs")
    executor: Literal["local", "ray"] = "local"
    ray_address: str | None = None
    workers: int | None = Field(None, ge=1)
    report: bool = Field(False, description="also write report.html into the run (about 1 s more)")


@dataclass(frozen=True)
class Simulation:
    """What ``simulate`` wrote: the run directory, and the search's summary when it searched."""

    run_dir: Path
    search: dict[str, Any] | None


def parse_mtp(value: str | None) -> tuple[str, SpeculativeConfig | None]:
    """``mtp``: ``auto`` (search MTP drafts where the model has MTP heads), ``off``, or ``K[:ACCEPT]`` (pin K
    draft tokens, each accepted with probability ACCEPT, default 0.7: MTP or an EAGLE-style draft head)."""
    v = (value or "auto").strip().lower()
    if v in ("auto", "off"):
        return v, None
    k, _, a = v.partition(":")
    try:
        spec = SpeculativeConfig(num_draft_tokens=int(k), acceptance_rate=float(a) if a else 0.7)
    except ValueError:
        raise SimConfigError(f"--mtp {value!r}: use auto, off, or K[:ACCEPT] such as 2:0.8 "
                             "(1 <= K <= 16, 0 <= ACCEPT <= 1)") from None
    return "pinned", spec


def mean_lengths(workload: Any) -> tuple[float, float, float]:
    """(mean input, mean output, longest ÷ mean output) of a workload's requests (the estimator's inputs)."""
    import numpy as np

    if getattr(workload, "kind", None) == "synthetic":
        isl_w, osl_w = workload.lengths(4096)
    else:
        reqs = [r for s in workload.sessions(256) for r in s.requests]
        isl_w = np.array([r.input_tokens for r in reqs], dtype=float)
        osl_w = np.array([r.output_tokens for r in reqs], dtype=float)
    return float(np.mean(isl_w)), float(np.mean(osl_w)), float(np.max(osl_w) / max(np.mean(osl_w), 1.0))


def base_config(spec: SimulateSpec, pinned_drafts: SpeculativeConfig | None) -> SimConfig:
    """The SimConfig the search starts from (or the pinned one), with the spec's overrides."""
    common = dict(framework=spec.framework, cost_backend=spec.cost_backend,
                  profile=str(spec.profile) if spec.profile is not None else None)
    if spec.config is not None:
        return SimConfig.from_file(spec.config, hardware=spec.hardware, model=spec.model, precision=spec.precision,
                                   **common)
    if not spec.hardware or not spec.model:
        raise SimConfigError("give --hardware and --model (or a --config file that names them)")
    balance = default_attention_dp_balance(spec.framework)
    return SimConfig.parse({"hardware": spec.hardware, "model": spec.model, "precision": spec.precision,
                            "kv_dtype": resolve_kv_dtype(spec.kv_dtype, spec.hardware, spec.model, spec.framework,
                                                         spec.precision),
                            "speculative": pinned_drafts.model_dump() if pinned_drafts else None,
                            "attention_dp_balance": balance.model_dump() if balance else None, **common},
                           where="options")


def simulate(spec: SimulateSpec, *, on_search: Progress | None = None, on_point: Progress | None = None) -> Simulation:
    """Predict the frontier the spec describes and write it as a run (see the module docstring), with its HTML
    report when ``spec.report`` (off by default: the report costs about as much as the search itself)."""
    result = _simulate(spec, on_search, on_point)
    if spec.report:
        from scoville.reporting.html import write_report

        write_report([result.run_dir], result.run_dir / "report.html")
    return result


def _simulate(spec: SimulateSpec, on_search: Progress | None, on_point: Progress | None) -> Simulation:
    mtp_mode, pinned_drafts = parse_mtp(spec.mtp)
    base = base_config(spec, pinned_drafts)
    workload = spec.workload.resolve(seed=spec.seed, default_scenario=DEFAULT_SCENARIO)
    single_turn = getattr(workload, "kind", None) == "synthetic"
    fidelity = spec.fidelity or ("analytic" if single_turn and spec.config is None else "des")
    if fidelity == "analytic" and not single_turn:
        raise SimConfigError("--fidelity analytic covers single-turn workloads; "
                             "sessions and traces need --fidelity des")
    if fidelity == "analytic" and spec.config is not None:
        raise SimConfigError("--fidelity analytic writes a search's frontier; "
                             "a pinned --config runs with --fidelity des")
    # the same plan `sweep` builds from the same options; the search sweeps concurrency, so a timed trace
    # replays at its own times only on a pinned config
    points = spec.load.plan(workload=workload if spec.config is not None else None,
                            default_concurrency=DEFAULT_CONCURRENCY)
    if spec.config is not None:
        if spec.deployments == "inferencex":
            raise SimConfigError("--deployments inferencex prices InferenceX's recipes; drop --config (or "
                                 "--deployments) to run the pinned one")
        return Simulation(_replay(spec, base, workload, points, None, None, None, on_point), None)

    if spec.load.rate:
        raise SimConfigError("the configuration search sweeps closed-loop concurrency; give --concurrency "
                             "(or pin a deployment with --config to simulate --rate points)")
    from scoville.sim.analytic import prediction, write_analytic_run
    from scoville.sim.search import SearchSpace, search

    levels = [p.concurrency or 1 for p in points]
    mean_isl, mean_osl, spread = mean_lengths(workload)
    if spec.deployments == "inferencex":
        result = _inferencex_frontier(spec, base, workload, mean_isl, mean_osl, spread, len(points), on_search)
    else:
        space = SearchSpace(max_accelerators=spec.max_accelerators, mtp="off" if mtp_mode == "off" else "auto",
                            disaggregation=spec.disaggregation, unified=spec.unified, min_concurrency=min(levels),
                            max_concurrency=max(levels))
        result = search(base, mean_isl, mean_osl, space=space, osl_spread=spread, points=len(points),
                        progress=on_search)
    if not result.frontier and spec.deployments == "inferencex":
        raise SimConfigError(f"no InferenceX recipe of {base.model} on {base.hardware} fits or reaches a steady "
                             f"state here; drop --deployments inferencex to search")
    if not result.frontier:
        raise SimConfigError(f"no deployment of {base.model} on {base.hardware} reached a steady state over "
                             f"concurrency {min(levels)}-{max(levels)}; widen --concurrency or --max-accelerators")
    summary = result.summary()
    if fidelity == "analytic":
        run_dir = write_analytic_run(base, workload, result.frontier, spec.runs, compat=spec.compat, power=spec.power,
                                     search=summary)
        return Simulation(run_dir, summary)
    load = spec.load
    replayed = [LoadPoint(index=i, concurrency=p.concurrency, num_requests=load.num_requests or 10 * p.concurrency,
                          warmup_requests=2 * p.concurrency if load.warmup_requests is None else load.warmup_requests,
                          duration_s=load.duration)
                for i, p in enumerate(result.frontier)]
    run_dir = _replay(spec, base, workload, replayed, [p.config for p in result.frontier], summary,
                      [prediction(p) for p in result.frontier], on_point)
    return Simulation(run_dir, summary)


def _inferencex_frontier(spec: SimulateSpec, base: SimConfig, workload: Any, isl: float, osl: float, spread: float,
                         points: int, progress: Progress | None) -> SearchResult:
    """The frontier of the deployments InferenceX ran for the spec's system, model, weights and framework, each at
    the concurrencies its recipe swept (``sim/recipes.py``): the prediction that stands beside a published
    InferenceX curve like for like. The recipes carry their own layouts, drafts, pools and users, so the options
    that shape a search are refused rather than ignored, except ``--no-disagg``/``--no-unified``, which keep one
    kind of recipe (single-node instances, or Dynamo's disaggregated pools)."""
    from scoville.catalog.models import load_model
    from scoville.sim.recipes import recipe_frontier, recipe_weights, recipes_for

    shaping = [flag for flag, on in (("--mtp", spec.mtp != "auto"), ("--max-accelerators", spec.max_accelerators),
                                     ("--concurrency", spec.load.concurrency)) if on]
    if shaping:
        raise SimConfigError(f"--deployments inferencex runs each recipe's own layouts, drafts, pools and users; "
                             f"drop {', '.join(shaping)}")
    if getattr(workload, "kind", None) != "synthetic":
        raise SimConfigError("--deployments inferencex prices InferenceX's single-turn recipes; give --scenario "
                             "1k1k or 8k1k (or --isl/--osl)")
    if not (spec.unified or spec.disaggregation):
        raise SimConfigError("nothing to price: unified and disaggregated recipes are both off; drop --no-unified "
                             "or --no-disagg")
    weights = load_model(base.model).served_precision(spec.precision)
    recipes = [r for r in recipes_for(base.model, base.hardware, recipe_weights(weights), base.framework,
                                      workload.isl, workload.osl)
               if (r.unified is not None and spec.unified) or (r.unified is None and spec.disaggregation)]
    if not recipes:
        raise SimConfigError(f"no {'unified' if spec.unified else 'disaggregated'} InferenceX recipe of "
                             f"{base.model} on {base.hardware} under {base.framework}; drop "
                             f"{'--no-disagg' if spec.unified else '--no-unified'}")
    return recipe_frontier(recipes, base.precision, isl, osl, osl_spread=spread, points=points, progress=progress)


def _replay(spec: SimulateSpec, base: SimConfig, workload: Any, points: list[LoadPoint],
            configs: list[SimConfig] | None, summary: dict[str, Any] | None, predictions: list[dict[str, Any]] | None,
            on_point: Progress | None) -> Path:
    """Every point replayed request by request in the discrete-event engine; points fan out when asked (to a
    Ray cluster, or to ``workers`` local processes), else one sequential loop."""
    from scoville.executor import make_executor
    from scoville.sim.driver import simulate_run

    fan_out = (make_executor(spec.executor, spec.ray_address, max_workers=spec.workers)
               if spec.executor == "ray" or spec.workers else nullcontext())
    with fan_out as point_executor:
        return simulate_run(base, workload, points, spec.runs, seed=spec.seed, compat=spec.compat, power=spec.power,
                            point_configs=configs, search=summary, executor=point_executor, predictions=predictions,
                            progress=(lambda i, n, p: on_point(i, n)) if on_point else None)
