"""Simulator speed (not a test: prints figures and ratios against the targets).

1. ``scoville simulate`` with its default search for DeepSeek-R1 on GB300, 8k/1k (the issue's target:
   under 2 s on one core), each in a fresh process pinned to one core: the library path (search + the run
   written) and the whole CLI (interpreter start, imports, table), with a cold and a warm kernel-slice
   cache. Beside it, AIConfigurator's wall time on the same scenario when its CLI is installed
   (``--aic PATH``; ``python -m venv /tmp/aic-venv && /tmp/aic-venv/bin/pip install aiconfigurator``).
2. A pinned 8k/1k sweep replayed in the discrete-event engine: 12 concurrency points, 500 measured
   requests each, written and recomputed, on one core (what ``--fidelity des`` costs).

    python bench/bench_sim_speed.py [--repeat 3] [--aic /tmp/aic-venv/bin/aiconfigurator] [--no-des]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LIBRARY = """
import os, sys, time, tempfile
from pathlib import Path
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
t0 = time.perf_counter()
from scoville.sim.analytic import write_analytic_run
from scoville.sim.config import AttentionDpBalanceConfig, SimConfig
from scoville.sim.search import search
from scoville.workload.synthetic import scenario
# the config simulate searches from (its default_attention_dp_balance for TensorRT-LLM)
base = SimConfig(hardware="gb300", model="deepseek-r1", precision="nvfp4", kv_dtype="fp8", framework="trtllm",
                 attention_dp_balance=AttentionDpBalanceConfig())
r = search(base, 0.9 * 8192, 0.9 * 1024, osl_spread=1 / 0.9)
write_analytic_run(base, scenario("8k1k"), r.frontier, Path(tempfile.mkdtemp()), search=r.summary())
print(time.perf_counter() - t0, r.evaluated, len(r.frontier))
"""
CLI = ["simulate", "--hardware", "gb300", "--model", "deepseek-r1", "--precision", "nvfp4", "--framework", "trtllm",
       "--scenario", "8k1k"]


def one_core_env(cache: Path) -> dict[str, str]:
    """The environment of a timed process: one thread, its own kernel-slice cache, and Python's bytecode cache on
    as a user's interpreter has it (some sandboxes set PYTHONDONTWRITEBYTECODE, which recompiles scoville's ~60
    modules at every start: ~0.1 s here)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "SCOVILLE_CACHE_DIR": str(cache), "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


def time_library(cache: Path) -> tuple[float, str]:
    out = subprocess.run([sys.executable, "-c", LIBRARY], capture_output=True, text=True, env=one_core_env(cache),
                         check=True).stdout.split()
    return float(out[0]), f"{out[1]} candidates, {out[2]} frontier points"


def time_cli(cache: Path, runs: Path) -> float:
    cpu = str(min(os.sched_getaffinity(0)))
    scoville = shutil.which("scoville") or "scoville"
    t0 = time.perf_counter()
    subprocess.run(["taskset", "-c", cpu, scoville, *CLI, "--runs", str(runs)], capture_output=True, check=True,
                   env=one_core_env(cache))
    return time.perf_counter() - t0


def time_aic(aic: str) -> float | None:
    if not Path(aic).exists():
        return None
    out = tempfile.mkdtemp(prefix="aic-")
    cmd = [aic, "cli", "default", "--model-path", "deepseek-ai/DeepSeek-R1", "--system", "gb300", "--total-gpus", "16",
           "--isl", "8192", "--osl", "1024", "--ttft", "100000", "--tpot", "1000", "--save-dir", out, "--no-color",
           "--log-level", "ERROR"]
    t0 = time.perf_counter()
    proc = subprocess.run(["taskset", "-c", str(min(os.sched_getaffinity(0))), *cmd], capture_output=True)
    shutil.rmtree(out, ignore_errors=True)
    return time.perf_counter() - t0 if proc.returncode == 0 else None


def search_speed(repeat: int, aic: str) -> None:
    print("1) scoville simulate with its default search: DeepSeek-R1 (NVFP4) on GB300, 8k/1k, one core")
    runs = Path(tempfile.mkdtemp(prefix="scoville-speed-"))
    for label, warm in (("cold cache", False), ("warm cache", True)):
        lib: list[float] = []
        cli: list[float] = []
        note = ""
        for _ in range(repeat):
            cache = runs / ("warm" if warm else f"cold-{len(lib)}")
            if warm and not cache.exists():
                time_library(cache)                                  # fill it once
            t, note = time_library(cache)
            lib.append(t)
            if not warm:
                shutil.rmtree(cache, ignore_errors=True)
            cli.append(time_cli(cache, runs))
            if not warm:
                shutil.rmtree(cache, ignore_errors=True)
        print(f"   {label:10s} library (search + run written) {statistics.median(lib):5.2f} s   whole CLI "
              f"{statistics.median(cli):5.2f} s   target 2 s: {2 / statistics.median(cli):4.1f}x   ({note})")
    t_aic = time_aic(aic)
    print("   AIConfigurator CLI, same scenario (16 GPUs), one core: "
          + (f"{t_aic:.1f} s" if t_aic else f"not run (no CLI at {aic})"))


def des_speed() -> None:
    import pyarrow as pa

    from scoville.load import LoadPoint
    from scoville.results.store import read_requests
    from scoville.sim.config import SimConfig
    from scoville.sim.driver import simulate_run
    from scoville.workload.synthetic import scenario

    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    levels = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 768, 1024]
    points = [LoadPoint(index=i, concurrency=c, num_requests=500, warmup_requests=0) for i, c in enumerate(levels)]
    root = Path(tempfile.mkdtemp(prefix="scoville-des-"))
    print("\n2) discrete-event replay: 12 points x 500 requests, 8k/1k, run written and recomputed, one core")
    for model, hw, opts in (("deepseek-r1", "gb300", {"parallel": {"dp": 8, "ep": 8}, "precision": "nvfp4"}),
                            ("gpt-oss-120b", "gb200", {"parallel": {"tp": 1}})):
        cfg = SimConfig.model_validate({"hardware": hw, "model": model, "max_num_seqs": 1024, **opts})
        simulate_run(cfg, scenario("8k1k"), points[:1], root)                       # warm the cost model
        t0 = time.perf_counter()
        run = simulate_run(cfg, scenario("8k1k"), points, root)
        s = time.perf_counter() - t0
        print(f"   {model:14s} {hw:6s} {read_requests(run).num_rows:6,d} requests in {s:5.2f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--aic", default=shutil.which("aiconfigurator") or "/tmp/aic-venv/bin/aiconfigurator")
    ap.add_argument("--no-des", action="store_true")
    args = ap.parse_args()
    search_speed(args.repeat, args.aic)
    if not args.no_des:
        des_speed()


if __name__ == "__main__":
    main()
