"""The transfer model: how well kernel efficiencies fitted on some NVIDIA generations predict another's.

    python bench/bench_kernel_transfer.py            # fit, print held-out errors per operator class
    python bench/bench_kernel_transfer.py --write    # ... and refresh data/hardware/kernel_transfer.yaml

For each operator class (GEMM and MoE per kernel format, GQA/MLA attention decode and prefill, MLA's
absorbed products, all-reduce, all-to-all) every measured time on A100, L40S, H100, H200, B200, B300,
GB200 and GB300 (aiconfigurator-core's tables, read in place) is set against the roofline of the same work
on that chip's datasheet. The fit is refit with each generation held out and that generation predicted:
the held-out error is what a datasheet-only chip (MI355X, Jalapeno, a user's YAML) can expect, and it is
shipped as each class's sigma. Needs ``pip install 'scoville[silicon]'``.
"""

from __future__ import annotations

import argparse
import time

from scoville.sim.kernels import fit
from scoville.sim.kernels.transfer import transfer_path


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    ap.add_argument("--write", action="store_true", help="write the coefficients to data/hardware/kernel_transfer.yaml")
    args = ap.parse_args()
    t0 = time.perf_counter()
    model, report = fit.fit_all(progress=lambda cls: print(f"  fitting {cls} ({time.perf_counter() - t0:.0f} s)",
                                                             flush=True))
    print("\nheld-out error per class (fitted without the generation named; median |pred/meas - 1|, p90, bias)")
    print(f"  {'class':24s} {'held out':16s} {'n':>6s} {'median':>7s} {'p90':>7s} {'bias':>7s}")
    for r in report:
        print(f"  {r.cls:24s} {r.generation:16s} {r.n:6d} {r.median_abs:7.0%} {r.p90_abs:7.0%} {r.bias:+7.0%}")
    print(f"\n  {'class':24s} {'e_c':>5s} {'tau_c':>7s} {'e_m':>5s} {'tau_m':>7s} {'p':>5s} {'sigma':>6s}")
    for name, c in sorted(model.ops.items()):
        print(f"  {name:24s} {c.ec:5.2f} {c.tau_c_us:6.1f}us {c.em:5.2f} {c.tau_m_us:6.1f}us {c.p:5.2f} {c.sigma:6.2f}")
    for name, cc in sorted(model.comm.items()):
        print(f"  {name:24s} alpha {cc.alpha_us:.1f} us + {cc.alpha_log2_us:.2f} us x log2(ranks), "
              f"beta {cc.beta:.2f}, sigma {cc.sigma:.2f}")
    if args.write:
        transfer_path().write_text(fit.to_yaml(model))
        print(f"\nwrote {transfer_path()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
