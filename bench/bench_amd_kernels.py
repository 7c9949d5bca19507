"""AMD's own kernels against the transfer model: fit CDNA3/CDNA4 GEMM time factors on AITER's tuned tables.

    git clone --depth 1 https://github.com/ROCm/aiter /tmp/aiter
    python bench/bench_amd_kernels.py --aiter /tmp/aiter       # (without --aiter: the all-reduce check alone)

For MI300X/MI325X (CDNA3, gfx942 with 304 CUs) and MI355X (CDNA4, gfx950 with 256 CUs), every GEMM shape AITER
tuned is set against the transfer model's time for that shape on the catalog's datasheet: first with the family's
generic factors (``compute_time_factor`` / ``memory_time_factor``, the 'before' column), then with the per-class
factors fitted here. It prints the fitted factors as the ``kernel_time_factors:`` block of
``data/hardware/families.yaml`` (the shipped values came from this script; rerun it on a newer checkout to refresh
them), and, unfitted, AITER's FP8 and MXFP4 fused-MoE times beside the transfer (``aiter_fit``'s docstring says why).
First it sets the transfer's all-reduce on MI300X beside AMD's own timings of its custom all-reduce (TP2 and TP4,
from AMD's quick-reduce PRs): on Infinity Fabric's mesh a GPU reaches a peer over one link, not the sum of its
seven (``Hardware.scaleup_topology``). Needs ``pip install 'scoville[silicon]'`` (SciPy).
"""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

import msgspec
import numpy as np

from scoville.catalog.hardware import load_hardware
from scoville.sim.cost import Parallel, StepCost
from scoville.sim.kernels import aiter_fit
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
        source = f"AITER {commit[:8]} tuned GEMMs, {device.gfx} {device.cu_num} CUs"
        fits = aiter_fit.fit_family(args.aiter, family, transfer, source)
        print(f"\n{family} ({device.hardware}: {device.gfx}, {device.cu_num} CUs)")
        print(f"  {'class':16s} {'shapes':>7s} {'compute-bound':>13s} {'before':>7s} {'fitted':>7s} "
              f"{'p10-p90':>11s} {'x compute':>9s} {'x memory':>8s} {'sigma':>6s}")
        for f in fits:
            print(f"  {f.cls:16s} {f.n:7d} {f.compute_bound:13d} {f.before_median:7.2f} {f.ratio_median:7.2f} "
                  f"{f.ratio_p10:5.2f}-{f.ratio_p90:<5.2f} {f.factors.compute:9.3f} {f.factors.memory:8.3f} "
                  f"{f.factors.sigma:6.3f}")
        hw = load_hardware(device.hardware)
        for fmt, (_, _, cls) in aiter_fit.MOE_FORMATS.items():
            moe = aiter_fit.moe_samples(args.aiter, device, hw, fmt)
            if moe is None:
                continue
            factors = hw.time_factors(cls)
            ratio = aiter_fit.predicted(transfer.op(cls), moe, *factors) / moe.t
            decode = moe.tm > moe.tc
            compute_bound = f"{np.median(ratio[~decode]):.2f}" if (~decode).any() else "-"
            print(f"  unfitted: {fmt} fused MoE as {cls}, {len(moe.t)} shapes ({len(moe.files)} tables), "
                  f"x{factors[0]:g} compute x{factors[1]:g} memory: ratio median {np.median(ratio):.2f}; "
                  f"memory-bound ({int(decode.sum())}) {np.median(ratio[decode]):.2f}, compute-bound {compute_bound}")
        blocks.append((family, fits))
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
