"""How much a kernel's measured time moves between framework releases, in aiconfigurator-core's tables.

    python bench/bench_kernel_releases.py            # MoE tables (the op with most release collections)
    python bench/bench_kernel_releases.py --op mla   # or another op folder: gemm, attention, mla, ...
    python bench/bench_kernel_releases.py --by-format   # one line per kernel format (fp8_block, int4_wo, ...)

The package keeps several collections per system and framework (B200 vLLM MoE at 0.19, 0.22 and 0.24). For
every pair of collections of one framework on one system, the shapes both measured are joined (fastest kernel
per shape, as the cost model takes it) and the ratio of their times summarised: the median ratio (newer ÷
older) and the median |log ratio|. This is the kernel-level view of how much "which release" matters; the
simulator reads the newest collection (docs/simulator.md, Known gaps, says why).
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from scoville.sim.kernels import tables  # noqa: E402

FILES = {"moe": "moe_perf.parquet", "gemm": "gemm_perf.parquet", "attention": "generation_attention_perf.parquet",
         "mla": "generation_mla_perf.parquet"}
SHAPE_COLUMNS = {
    "moe": ["moe_dtype", "num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size",
            "moe_ep_size", "distribution"],
    "gemm": ["gemm_dtype", "m", "n", "k"],
    "attention": ["batch_size", "isl", "step", "num_heads", "num_key_value_heads", "head_dim", "kv_cache_dtype"],
    "mla": ["batch_size", "isl", "step", "num_heads", "kv_cache_dtype"],
}
SYSTEMS = ("h100_sxm", "h200_sxm", "b200_sxm", "b300_sxm", "gb200", "gb300")


def fastest_by_shape(path: Path, columns: list[str]) -> dict[tuple, float]:
    """Fastest latency (ms) per shape of one collection."""
    t = pq.read_table(path, columns=[*[c for c in columns if c in pq.read_schema(path).names], "latency"])
    keys = [c for c in columns if c in t.column_names]
    best = t.group_by(keys).aggregate([("latency", "min")])
    lat = best["latency_min"].to_numpy()
    cols = [best[k].to_pylist() for k in keys]
    return {shape: float(v) for shape, v in zip(zip(*cols, strict=True), lat, strict=True) if v > 0}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    ap.add_argument("--op", default="moe", choices=sorted(FILES))
    ap.add_argument("--by-format", action="store_true", help="split each pair by kernel format (first shape column)")
    args = ap.parse_args(argv)
    if tables.data_dir() is None:
        print("the kernel tables need aiconfigurator-core: pip install 'scoville[silicon]'")
        return 1
    print(f"{args.op}: newer ÷ older collection, shapes both measured (fastest kernel per shape)")
    print(f"   {'system':9s} {'framework':9s} {'older':>12s} {'newer':>12s} {'format':>10s} {'shapes':>7s} "
          f"{'median':>7s} {'|log| med':>9s}")
    for system in SYSTEMS:
        for fw in tables.FRAMEWORKS:
            paths = tables.table_paths(system, args.op, fw, FILES[args.op])[::-1]   # oldest first
            shapes = {p.parent.name: fastest_by_shape(p, SHAPE_COLUMNS[args.op]) for p in paths}
            for older, newer in itertools.combinations(shapes, 2):
                common = shapes[older].keys() & shapes[newer].keys()
                groups = sorted({s[0] for s in common}) if args.by_format else ["all"]
                for fmt in groups:
                    these = [s for s in common if fmt in ("all", s[0])]
                    if len(these) < 20:
                        continue
                    lr = np.log([shapes[newer][s] / shapes[older][s] for s in these])
                    print(f"   {system:9s} {fw:9s} {older:>12s} {newer:>12s} {fmt:>10s} {len(these):7d} "
                          f"{np.exp(np.median(lr)):7.2f} {np.median(np.abs(lr)):9.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
