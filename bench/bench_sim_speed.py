"""Simulator speed (not a test: prints figures and ratios against the targets of issue 7).

1. A full 8k/1k sweep with one pinned configuration: 12 concurrency points
   (1, 2, 4, ..., 512, 768, 1024), 500 measured requests each, written as a run
   directory and recomputed — on ONE core (CPU affinity pinned, Arrow single-
   threaded). Target: < 10 s. Also printed: the same sweep with InferenceX's
   own request counts (10·C measured after 2·C warm-up, 30,000+ requests).
2. A config search for one model on one system (DeepSeek-R1 on GB300, 8k/1k,
   concurrency 1..1024) on this machine's cores. Target: < 2 min.

    python bench/bench_sim_speed.py            # both
    python bench/bench_sim_speed.py --no-search
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from scoville.load import LoadPoint, concurrency_sweep
from scoville.results.store import read_point_metrics, read_requests
from scoville.sim.config import SimConfig
from scoville.sim.driver import simulate_run
from scoville.workload.synthetic import scenario

LEVELS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 768, 1024]
PINNED = [
    ("deepseek-r1", "gb300", {"parallel": {"tp": 1, "dp": 8, "ep": 8}, "max_num_seqs": 1024}),
    ("gpt-oss-120b", "gb200", {"parallel": {"tp": 1}, "max_num_seqs": 1024}),
    ("kimi-k2.5", "gb300", {"parallel": {"tp": 8, "ep": 8}, "max_num_seqs": 1024}),
]


def pinned_sweep(model: str, hardware: str, opts: dict, points: list[LoadPoint], root: Path) -> tuple[float, int, int]:
    cfg = SimConfig.model_validate({"hardware": hardware, "model": model, **opts})
    t0 = time.perf_counter()
    run = simulate_run(cfg, scenario("8k1k"), points, root)
    elapsed = time.perf_counter() - t0
    table = read_requests(run)
    tokens = int(pa.compute.sum(table.column("output_tokens")).as_py())
    assert len(read_point_metrics(run)) == len(points)
    return elapsed, table.num_rows, tokens


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-search", action="store_true")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="scoville-bench-sim-"))

    cpus = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpus[0]})
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    # warm the catalogs and cost models (imports, YAML/JSON parsing) outside the timed runs
    for model, hw, opts in PINNED:
        pinned_sweep(model, hw, opts, [LoadPoint(index=0, concurrency=1, num_requests=1)], root)

    print("1) pinned 8k/1k sweep, 12 points (1..1024), one core, run written + recomputed")
    fixed = [LoadPoint(index=i, concurrency=c, num_requests=500, warmup_requests=0) for i, c in enumerate(LEVELS)]
    inferencex = concurrency_sweep(LEVELS)  # 10*C measured after 2*C warm-up
    print(f"   {'model':14} {'system':7} {'plan':22} {'requests':>9} {'tokens':>11} {'seconds':>8} {'target':>7}")
    for model, hw, opts in PINNED:
        for name, pts in (("500/point", fixed), ("InferenceX 10C+2C", inferencex)):
            s, n, tok = pinned_sweep(model, hw, opts, pts, root)
            target = f"{10 / s:5.1f}x" if name == "500/point" else ""
            print(f"   {model:14} {hw:7} {name:22} {n:9,d} {tok:11,d} {s:8.2f} {target:>7}")
    print("   (target < 10 s for 500/point; 'Nx' = how many times faster than the target)")
    os.sched_setaffinity(0, set(cpus))

    if args.no_search:
        return
    from scoville.executor import LocalExecutor
    from scoville.sim.search import search

    print(f"\n2) config search: deepseek-r1 on gb300, 8k/1k, concurrency 1..1024, {len(cpus)} worker process(es)")
    base = SimConfig(hardware="gb300", model="deepseek-r1")
    t0 = time.perf_counter()
    with LocalExecutor(len(cpus)) as ex:
        res = search(base, scenario("8k1k"), concurrency_sweep(LEVELS), executor=ex)
    s = time.perf_counter() - t0
    print(f"   {res.evaluated} configurations x {len(LEVELS)} points in {s:.1f} s "
          f"(target < 120 s: {120 / s:.1f}x); {len(res.frontier)} frontier points")
    for r in res.frontier:
        print(f"     c={r['concurrency']:<5} {r['config'].label():32} {r['interactivity']:8.1f} tok/s/user "
              f"{r['total_throughput_per_accelerator']:9.0f} tok/s/GPU")


if __name__ == "__main__":
    main()
