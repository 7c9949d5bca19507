"""A whole attention module measured against the sum of its isolated kernels: the kernel-level check of a
framework's ``kernel_scale``.

    python bench/bench_module_scale.py              # every system and framework with module tables
    python bench/bench_module_scale.py --framework trtllm

The cost model prices a step as the sum of isolated kernel timings (aiconfigurator-core's GEMM, attention,
MLA-BMM tables) times the framework's ``kernel_scale`` (``data/hardware/frameworks.yaml``): how a whole step
of fused, graph-replayed kernels compares with that sum. aiconfigurator-core also times DeepSeek-V3's whole
MLA attention module per framework (``mla_generation_module_perf``: projections, absorbed products,
attention core and output projection of one layer in one decode step, per batch, context and heads per
rank). Its ratio to our sum of the same layer's kernels (projection GEMMs, absorbed BMMs and the attention
core at the same batch and context) is a direct, kernel-level measurement of that factor, free of any
end-to-end result. The module also runs MLA's q/kv norms and RoPE, which that sum leaves out (our
elementwise kernels are priced per whole layer), so the ratio is, if anything, an upper bound.

It prints the ratio per system and framework (median and 10th-90th percentile over formats x heads x batch
x context) and, per framework, the median over every cell: the ``kernel_scale`` the module tables support.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import numpy as np
import pyarrow.parquet as pq

from scoville.catalog.hardware import load_hardware
from scoville.sim.cost import Parallel, StepCost
from scoville.sim.kernels import tables

MODEL = "deepseek-r1"                    # the module tables time DeepSeek-V3's layer: same shapes
HEADS = 128
SYSTEMS = ("h100", "h200", "b200", "b300", "gb200", "gb300")
# module table (gemm_type, kv_cache_dtype) -> our (precision, kv_dtype); NVFP4 modules quantise the attention
# projections, which our NVFP4 (feed-forward groups only) keeps in BF16, so they are left out
FORMATS = {("bfloat16", "bfloat16"): ("bf16", "bf16"), ("bfloat16", "fp8"): ("bf16", "fp8"),
           ("fp8_block", "bfloat16"): ("fp8", "bf16"), ("fp8_block", "fp8"): ("fp8", "fp8")}


@dataclass(frozen=True)
class Cell:
    """One measured module time beside our kernel sum for the same layer, batch and shard."""

    system: str
    framework: str
    tp: int
    batch: int
    measured_ms: float
    kernel_sum_ms: float

    @property
    def ratio(self) -> float:
        return self.measured_ms / self.kernel_sum_ms


def cells(hardware: str, framework: str) -> list[Cell]:
    """Every (format, heads per rank, batch, context) cell of the newest module table of ``framework`` on
    ``hardware``, beside our sum of that layer's kernels at the same batch and context."""
    system = load_hardware(hardware).kernel_tables
    path = tables.table_path(system, "mla", framework, "mla_generation_module_perf.parquet") if system else None
    if path is None:
        return []
    t = pq.read_table(path, columns=["mla_dtype", "gemm_type", "kv_cache_dtype", "kernel_source", "num_heads",
                                     "batch_size", "step", "latency"]).to_pandas()
    t = t[t.mla_dtype == "bfloat16"]
    out = []
    for (gemm, kv), (precision, kv_dtype) in FORMATS.items():
        sub = t[(t.gemm_type == gemm) & (t.kv_cache_dtype == kv)]
        # attention backends timed side by side: the fastest, as the kernel tables keep (``step`` is the context)
        best = sub.groupby(["num_heads", "batch_size", "step"]).latency.min()
        for heads, rows in best.groupby(level=0):
            if HEADS % int(heads):
                continue                          # a shard no tp of 128 heads gives
            tp = HEADS // int(heads)
            ops = StepCost(MODEL, hardware, Parallel(tp=tp), precision, kv_dtype, framework=framework).ops
            assert ops.mla_absorb is not None
            batch = rows.index.get_level_values(1).to_numpy(dtype=float)
            ctx = rows.index.get_level_values(2).to_numpy(dtype=float)
            ours = ops.attn_proj(batch) + ops.mla_absorb(batch) + ops.attn_decode(batch, ctx)
            out += [Cell(hardware, framework, tp, int(b), float(ms), float(o) * 1e3)
                    for b, ms, o in zip(batch, rows.to_numpy(), ours, strict=True)]
    return out


def summary(cs: list[Cell]) -> str:
    r = np.array([c.ratio for c in cs])
    return (f"n={r.size:4d}  median {np.median(r):.3f}  p10-p90 {np.percentile(r, 10):.2f}-{np.percentile(r, 90):.2f}"
            f"  (batch >= 16: {np.median([c.ratio for c in cs if c.batch >= 16]):.3f})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    ap.add_argument("--framework", choices=("trtllm", "vllm"), action="append")
    args = ap.parse_args(argv)
    if tables.data_dir() is None:
        print("the module tables need aiconfigurator-core: pip install 'scoville[silicon]'")
        return 1
    print(f"whole MLA decode module (aiconfigurator-core {tables.package_version()}) / our sum of its kernels")
    for fw in args.framework or ("trtllm", "vllm"):
        every: list[Cell] = []
        for hw in SYSTEMS:
            cs = cells(hw, fw)
            if cs:
                print(f"  {fw:7s} {hw:6s} {summary(cs)}")
                every += cs
        if every:
            print(f"  {fw:7s} ALL    {summary(every)}  -> kernel_scale the module tables support: "
                  f"{np.median([c.ratio for c in every]):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
