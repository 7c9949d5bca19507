"""AMD's own kernels against the transfer model: fit CDNA3/CDNA4 GEMM and fused-MoE time factors on AITER's tables.

    git clone --depth 1 https://github.com/ROCm/aiter /tmp/aiter
    python bench/bench_amd_kernels.py --aiter /tmp/aiter       # (without --aiter: the all-reduce check alone)

For MI300X/MI325X (CDNA3, gfx942 with 304 CUs) and MI355X (CDNA4, gfx950 with 256 CUs), every GEMM and fused-MoE
shape AITER tuned is set against the transfer model's time for that shape on the catalog's datasheet: first with the
family's generic factors (``compute_time_factor`` / ``memory_time_factor``, the 'before' column), then with the
per-class factors fitted here. It prints the fitted factors as the ``kernel_time_factors:`` block of
``data/hardware/families.yaml`` (the shipped values came from this script; rerun it on a newer checkout to refresh
them), and how far the MoE tables' uniform routing and the power law the transfer was fitted on differ where
aiconfigurator-core timed both (``aiter_fit``'s docstring says why the rows are read as timed).
First it sets the transfer's all-reduce on MI300X beside AMD's own timings of its custom all-reduce (TP2 and TP4,
from AMD's quick-reduce PRs): on Infinity Fabric's mesh a GPU reaches a peer over one link, not the sum of its
seven (``Hardware.scaleup_topology``). Needs ``pip install 'scoville[silicon]'`` (SciPy).
"""

from __future__ import annotations

import argparse
import math
import subprocess
from pathlib import Path

import msgspec
import numpy as np
import pyarrow.compute as pc

from scoville.catalog.hardware import load_hardware
from scoville.sim.cost import Parallel, StepCost
from scoville.sim.kernels import aiter_fit, fit, tables
from scoville.sim.kernels.transfer import load_transfer

KIB = 1024.0


def report_allreduce() -> None:
    """The transfer's all-reduce on MI300X beside AMD's timings, on its mesh and as if behind a switch."""
    name, timings = aiter_fit.amd_allreduce_timings()
    print(f"{name} custom all-reduce, AMD's timings beside the transfer (microseconds; 'switch': the whole "
          "scale-up figure for any group, as before the catalog said mesh)")
    mesh = load_hardware(name)
    switch = msgspec.structs.replace(mesh, scaleup_topology="switch")
    for tp, timed in timings.items():
        sizes = np.array(list(timed))
        got = {}
        for topology, hw in (("mesh", mesh), ("switch", switch)):
            allreduce = StepCost("llama-3.1-70b", hw, Parallel(tp=tp)).ops.allreduce
            assert allreduce is not None        # built for every tp > 1
            got[topology] = allreduce(sizes) * 1e6
        for i, (size, us) in enumerate(timed.items()):
            print(f"  tp{tp} {size / KIB:8.0f} KiB  AMD {us:7.1f}  mesh {got['mesh'][i]:7.1f}  "
                  f"switch {got['switch'][i]:7.1f}")


def report_routing() -> None:
    """How much AITER's uniform routing and the power law the transfer's MoE classes were fitted on differ where one
    kernel was timed under both: aiconfigurator's NVIDIA MoE tables (power_law_1.01 over balanced, same shape)."""
    bins = (0.0, 0.3, 3.0, 30.0, 300.0, math.inf)
    shape_cols = ("num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size", "moe_ep_size")
    loads: dict[str, list[float]] = {}
    ratios: dict[str, list[float]] = {}
    for system in fit.FIT_SYSTEMS:
        for framework in tables.FRAMEWORKS:
            t = fit.fastest_per_shape(system, "moe", framework, "moe_perf.parquet")
            if t is None or "distribution" not in t.column_names:
                continue
            for dtype in ("fp8_block", "w4a8_mxfp4_mxfp8"):
                rows = t.filter(pc.equal(t["moe_dtype"], dtype))
                shapes = zip(*(rows[c].to_pylist() for c in shape_cols), strict=True)
                fastest = {(dist, shape): latency for shape, dist, latency in
                           zip(shapes, rows["distribution"].to_pylist(), rows["latency"].to_pylist(), strict=True)}
                for (dist, shape), latency in fastest.items():
                    balanced = fastest.get(("balanced", shape))
                    if dist == "power_law_1.01" and balanced:
                        loads.setdefault(dtype, []).append(shape[0] * shape[3] / shape[4])
                        ratios.setdefault(dtype, []).append(latency / balanced)
    if not ratios:
        print("\n(no aiconfigurator-core MoE tables here: the routing comparison needs "
              "pip install 'scoville[silicon]')")
        return
    print("\nrouting: aiconfigurator's NVIDIA MoE tables, power_law_1.01 / balanced time of one shape, median "
          "(shapes) by tokens an expert;\n  AITER's fused-MoE rows route uniformly, the transfer's MoE classes were "
          "fitted on the power law")
    for dtype, ratio in ratios.items():
        load, r = np.array(loads[dtype]), np.array(ratio)
        cells = [f"{lo:g}-{hi:g}: {np.median(r[inside]):.2f} ({int(inside.sum())})"
                 for lo, hi in zip(bins, bins[1:], strict=False)
                 if (inside := (load > lo) & (load <= hi)).any()]
        print(f"  {dtype:18s} " + "  ".join(cells))


def _commit(root: Path) -> str:
    """The checkout's commit and date, for the factors' source line ("unknown" outside a git checkout)."""
    got = subprocess.run(["git", "-C", str(root), "log", "-1", "--format=%H %cs"], capture_output=True, text=True)
    return got.stdout.strip() or "unknown"


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    ap.add_argument("--aiter", type=Path, help="root of a checkout of https://github.com/ROCm/aiter (without it, only "
                                               "the all-reduce check runs)")
    args = ap.parse_args()
    report_allreduce()
    if args.aiter is None:
        return 0
    transfer = load_transfer()
    commit = _commit(args.aiter)
    print(f"AITER tuned tables at {args.aiter} ({commit}); ratio = transfer's time / AITER's measured time")
    blocks = []
    for family, device in aiter_fit.DEVICES.items():
        fits = aiter_fit.fit_family(args.aiter, family, transfer, f"AITER {commit[:8]}")
        print(f"\n{family} ({device.hardware}: {device.gfx}, {device.cu_num} CUs)")
        print(f"  {'class':16s} {'shapes':>7s} {'compute-bound':>13s} {'before':>7s} {'fitted':>7s} "
              f"{'p10-p90':>11s} {'x compute':>9s} {'x memory':>8s} {'sigma':>6s}")
        for f in fits:
            print(f"  {f.cls:16s} {f.n:7d} {f.compute_bound:13d} {f.before_median:7.2f} {f.ratio_median:7.2f} "
                  f"{f.ratio_p10:5.2f}-{f.ratio_p90:<5.2f} {f.factors.compute:9.3f} {f.factors.memory:8.3f} "
                  f"{f.factors.sigma:6.3f}")
        blocks.append((family, fits))
    report_routing()
    print("\nfamilies.yaml:")
    for family, fits in blocks:
        print(f"{family}:\n  kernel_time_factors:")
        for f in fits:
            source = f"{f.factors.source}: {f.n} shapes, fitted ratio p10-p90 {f.ratio_p10:.2f}-{f.ratio_p90:.2f}"
            print(f"    {f.cls}: {{compute: {f.factors.compute}, memory: {f.factors.memory}, sigma: {f.factors.sigma}, "
                  f"source: \"{source}\"}}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
