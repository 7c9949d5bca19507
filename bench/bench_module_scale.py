"""A whole attention module measured against the sum of its isolated kernels: the kernel-level check of a
framework's ``kernel_scale``.

    python bench/bench_module_scale.py                      # every system and framework with module tables
    python bench/bench_module_scale.py --framework vllm --phase context

The cost model prices a step as the sum of isolated kernel timings (aiconfigurator-core's GEMM, attention,
MLA-BMM tables) times the framework's ``kernel_scale`` (``data/hardware/frameworks.yaml``): how a whole step
of fused, graph-replayed kernels compares with that sum. aiconfigurator-core also times DeepSeek-V3's whole
MLA attention module per framework, in both phases: ``mla_generation_module_perf`` (projections, absorbed
products, attention core and output projection of one layer in one decode step, per batch, context and heads
per rank) and ``mla_context_module_perf`` (the same layer prefilling ``batch`` prompts of ``isl`` tokens). Its
ratio to our sum of the same layer's kernels at the same shape is a direct, kernel-level measurement of that
factor, free of any end-to-end result. The module also runs MLA's q/kv norms and RoPE, which that sum leaves
out (our elementwise kernels are priced per whole layer), so the ratio is, if anything, an upper bound.

Not every collection times what a server runs. aiconfigurator-core's own metadata says its older vLLM module
collections ran an unfused native norm chain that serving never runs (+34% at its anchor cell; B200 was
re-collected with the fused-op fix, ai-dynamo/aiconfigurator#1423, and GB300 on the 0.27.0 serving runtime).
A vLLM collection therefore counts only when its ``collection_meta.yaml`` records one of the two
(``norm_dispatch`` on the table, or ``provenance: local``); the others are printed, marked, and left out of
the median. TensorRT-LLM's modules are its own attention classes and all count.

It prints the ratio per system, framework and phase (median and 10th-90th percentile over formats x heads x
batch x context) and, per framework and phase, the median over every counted cell. The decode median is the
framework's ``kernel_scale``; the context median over it is its ``prefill_kernel_ratio`` (prefill kernels run
at their own measured scale; a mixed step weighs the two by its tokens of each phase).
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
PHASES = {"decode": "mla_generation_module_perf", "context": "mla_context_module_perf"}
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
    serving: bool            # whether the collection times what a server runs (see the module docstring)

    @property
    def ratio(self) -> float:
        return self.measured_ms / self.kernel_sum_ms


def cells(hardware: str, framework: str, phase: str = "decode") -> list[Cell]:
    """Every (format, heads per rank, batch, context) cell of the newest ``phase`` module table of
    ``framework`` on ``hardware``, beside our sum of that layer's kernels at the same shape."""
    system = load_hardware(hardware).kernel_tables
    path = tables.table_path(system, "mla", framework, PHASES[phase] + ".parquet") if system else None
    if path is None:
        return []
    shape = "step" if phase == "decode" else "isl"     # decode: context length; context: prompt length
    t = pq.read_table(path, columns=["mla_dtype", "gemm_type", "kv_cache_dtype", "num_heads", "batch_size", shape,
                                     "latency"]).to_pandas()
    t = t[t.mla_dtype == "bfloat16"]
    serving = tables.times_serving(path, framework)
    out = []
    for (gemm, kv), (precision, kv_dtype) in FORMATS.items():
        sub = t[(t.gemm_type == gemm) & (t.kv_cache_dtype == kv)]
        # attention backends timed side by side: the fastest, as the kernel tables keep
        best = sub.groupby(["num_heads", "batch_size", shape]).latency.min()
        for heads, rows in best.groupby(level=0):
            if HEADS % int(heads):
                continue                          # a shard no tp of 128 heads gives
            tp = HEADS // int(heads)
            ops = StepCost(MODEL, hardware, Parallel(tp=tp), precision, kv_dtype, framework=framework).ops
            assert ops.mla_absorb is not None and ops.mla_kv_up is not None
            batch = rows.index.get_level_values(1).to_numpy(dtype=float)
            length = rows.index.get_level_values(2).to_numpy(dtype=float)
            if phase == "decode":
                ours = ops.attn_proj(batch) + ops.mla_absorb(batch) + ops.attn_decode(batch, length)
            else:
                tokens = batch * length
                ours = ops.attn_proj(tokens) + ops.attn_prefill(batch, length) + ops.mla_kv_up(tokens)
            out += [Cell(hardware, framework, tp, int(b), float(ms), float(o) * 1e3, serving)
                    for b, ms, o in zip(batch, rows.to_numpy(), ours, strict=True)]
    return out


def supported_scale(cs: list[Cell]) -> float:
    """The ``kernel_scale`` a set of cells supports: the median ratio over the cells of serving collections."""
    return float(np.median([c.ratio for c in cs if c.serving]))


def summary(cs: list[Cell]) -> str:
    r = np.array([c.ratio for c in cs])
    return (f"n={r.size:5d}  median {np.median(r):.3f}  p10-p90 {np.percentile(r, 10):.2f}-{np.percentile(r, 90):.2f}"
            f"  (batch >= 16: {np.median([c.ratio for c in cs if c.batch >= 16]):.3f})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    ap.add_argument("--framework", choices=("trtllm", "vllm"), action="append")
    ap.add_argument("--phase", choices=tuple(PHASES), action="append")
    args = ap.parse_args(argv)
    if tables.data_dir() is None:
        print("the module tables need aiconfigurator-core: pip install 'scoville[silicon]'")
        return 1
    print(f"whole MLA module (aiconfigurator-core {tables.package_version()}) / our sum of its kernels")
    scales: dict[tuple[str, str], float] = {}
    for phase in args.phase or tuple(PHASES):
        for fw in args.framework or ("trtllm", "vllm"):
            every: list[Cell] = []
            for hw in SYSTEMS:
                cs = cells(hw, fw, phase)
                if cs:
                    mark = "" if cs[0].serving else "   [collection predates the fused-op fix: not counted]"
                    print(f"  {phase:7s} {fw:7s} {hw:6s} {summary(cs)}{mark}")
                    every += cs
            if any(c.serving for c in every):
                scales[fw, phase] = supported_scale(every)
                print(f"  {phase:7s} {fw:7s} ALL    {summary([c for c in every if c.serving])}  -> the module "
                      f"tables support: {scales[fw, phase]:.3f}")
    for fw in args.framework or ("trtllm", "vllm"):
        if (fw, "decode") in scales and (fw, "context") in scales:
            print(f"  {fw}: kernel_scale {scales[fw, 'decode']:.2f}, prefill_kernel_ratio "
                  f"{scales[fw, 'context'] / scales[fw, 'decode']:.2f} (frameworks.yaml)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
