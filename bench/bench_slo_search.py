"""SLO search, blind vs seeded by the simulator (issue 14), on the built-in emulator; figures printed.

Starts the emulator (h200, llama-3.1-8b: what ``scoville sweep`` without --url serves), then runs the
same SLO search twice against it, each a real measured run with fresh prompts (its own seed):

* blind: doubling from concurrency 1, then bisection;
* seeded: ``--predict h200/llama-3.1-8b``, starting at the steady-state estimator's knee.

Prints each search's loads in the order measured, points measured (confirmations at the boundary
included), distinct loads, accelerator-minutes, the answer, whether the two answers agree (or lie within
one level: the levels at the boundary sit within noise of the limit, which the repeat rule decides by
majority), and the seeded run's derived blind count; with ``--trials N``, totals over N pairs. Target:
seeded measures at most half the points of blind. Small points (4·C measured requests after 2·C warm-up)
keep one pair to a few minutes on two cores.

    python bench/bench_slo_search.py                            # SLO tpot_p90=12ms,ttft_p90=1s, one pair
    python bench/bench_slo_search.py --trials 3 --slo tpot_p90=15ms
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from scoville.client.config import ClientConfig  # noqa: E402
from scoville.client.sweep import Sweep, run_sweep  # noqa: E402
from scoville.emulator.launch import spawn_emulator  # noqa: E402
from scoville.power.sources import plan_power, system_info  # noqa: E402
from scoville.results.store import read_manifest  # noqa: E402
from scoville.search_plan import build_search  # noqa: E402
from scoville.workload.scenarios import resolve_workload  # noqa: E402

HW, MODEL = "h200", "llama-3.1-8b"


def search_run(base_url: str, model: str, *, slo: str, predict: str | None, seed: int, per_c: int,
               search_max: int, runs: Path) -> dict:
    """One SLO search against the emulator; returns the manifest's slo_search block and the wall time."""
    workload = resolve_workload(None, isl=1024, osl=128, seed=seed)
    slo_limits, plan = build_search(slo_text=slo, search=True, search_rate=None, search_max=search_max,
                                    predict=predict, profile=None, workload=workload,
                                    requests_per_concurrency=per_c)
    assert slo_limits is not None  # the SLO text is given
    power = plan_power("rated", hardware=HW, accelerators=1)
    sweep = Sweep(cfg=ClientConfig(base_url=base_url, model=model), workload=workload, points=[], power=power,
                  system=system_info(HW, 1, power, None), seed=seed, plan=plan, slo=slo_limits.per_request())
    t0 = time.perf_counter()
    result = run_sweep(sweep, runs)
    block = read_manifest(result.run_dir).slo_search
    assert block is not None, "a searched run records its search's summary"
    return {**block, "wall_s": time.perf_counter() - t0, "run_dir": str(result.run_dir)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--slo", default="tpot_p90=12ms,ttft_p90=1s")
    ap.add_argument("--requests-per-concurrency", type=int, default=4)
    ap.add_argument("--search-max", type=int, default=256)
    ap.add_argument("--trials", type=int, default=1, help="blind + seeded pairs, each with fresh prompts")
    ap.add_argument("--runs", type=Path, default=None, help="where the runs go (default: a temporary folder)")
    args = ap.parse_args()
    runs = args.runs or Path(tempfile.mkdtemp(prefix="bench-slo-search-"))
    print(f"SLO {args.slo}; emulator {HW}/{MODEL}; {args.requests_per_concurrency}·C requests a point "
          f"after 2·C warm-up; runs in {runs}")
    totals = {"blind": [0, 0, 0.0], "seeded": [0, 0, 0.0]}      # points, loads, accelerator-min
    with spawn_emulator(HW, MODEL) as handle:
        for trial in range(args.trials):
            out = {}
            for name, predict, seed in (("blind", None, 101 + trial), ("seeded", f"{HW}/{MODEL}", 202 + trial)):
                out[name] = b = search_run(handle.base_url, handle.model, slo=args.slo, predict=predict, seed=seed,
                                           per_c=args.requests_per_concurrency, search_max=args.search_max,
                                           runs=runs)
                totals[name][0] += b["points_measured"]
                totals[name][1] += b["loads_measured"]
                totals[name][2] += b["accelerator_minutes"]
                print(f"trial {trial + 1} {name:>6}: loads {[m['level'] for m in b['measured']]}")
                print(f"{'':>15}{b['points_measured']} points ({b['loads_measured']} loads), "
                      f"{b['accelerator_minutes']:.2f} accelerator-min, {b['wall_s']:.0f} s wall; answer "
                      f"c={b['answer']}")
                print(f"{'':>15}{b['line']}")
            blind, seeded = out["blind"], out["seeded"]
            gap = abs(blind["answer"] - seeded["answer"])
            agree = ("agree" if gap == 0 else f"differ by {gap} level{'s' * (gap > 1)}, "
                     f"{gap / max(blind['answer'], 1):.0%} of the blind answer")
            derived = seeded.get("blind_estimate") or {}
            print(f"trial {trial + 1}: answers blind c={blind['answer']}, seeded c={seeded['answer']} ({agree}); "
                  f"points seeded/blind {seeded['points_measured']}/{blind['points_measured']}, loads "
                  f"{seeded['loads_measured']}/{blind['loads_measured']} (derived blind: {derived.get('points')})")
    (bp, bl, bm), (sp, sl, sm) = totals["blind"], totals["seeded"]
    print(f"all {args.trials} trials: points seeded/blind = {sp}/{bp} = {sp / bp:.2f} (target <= 0.5: "
          f"{'met' if sp <= 0.5 * bp else 'NOT met'}); loads {sl}/{bl} = {sl / bl:.2f}; accelerator-min "
          f"{sm:.2f}/{bm:.2f} = {sm / bm:.2f}")


if __name__ == "__main__":
    main()
