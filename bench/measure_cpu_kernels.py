"""Measure vLLM's CPU kernels on this machine into scoville's own kernel tables (CSV, aiconfigurator layout).

The simulator prices a step operator by operator from measured tables (``scoville.sim.kernels.tables``).
aiconfigurator-core ships them for NVIDIA GPUs; for the CPU entry that the real-vLLM check runs on
(``xeon-icx-2vcpu``) nobody has, so this script times the very kernels vLLM's CPU backend dispatches:

* **GEMM** — a linear layer handed to vLLM's own ``dispatch_cpu_unquantized_gemm`` (oneDNN on this CPU; the
  path it picks for one token differs from the one for two or more, which is why this is measured and not a
  roofline), over tokens ``m`` and the weight shapes ``n × k``;
* **decode attention** — ``cpu_attention_with_kv_cache`` on a paged KV cache of the served dtype (``--dtype``:
  BF16, or FP32 on a CPU without AVX-512 BF16) plus the KV write of the step (``cpu_attn_reshape_and_cache``),
  one layer, over (sequences, context);
* **prefill attention** — the same kernel, causal, over (chunks, chunk length).

Run it with the Python that has vLLM's CPU build (not scoville's venv), pinned like vLLM's model worker
(one core, one thread)::

    taskset -c 0 nice -n -10 /work/realvllm/venv/bin/python bench/measure_cpu_kernels.py \
        --out src/scoville/data/kernels/xeon_icx_2vcpu

Each point is the best of several repeats (at least 5, more for fast kernels, up to ~0.25 s per point).
Shapes whose single call would take longer than ``--max-call-s`` are skipped: the table reader fills those
cells in proportion to the work. Files written (times in milliseconds, as in aiconfigurator's tables):
``gemm/vllm/<version>/gemm_perf.csv``, ``attention/vllm/<version>/generation_attention_perf.csv`` and
``context_attention_perf.csv``, plus ``SOURCE.md`` saying when, where and how.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import itertools
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

TOKENS = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048]
# (n, k) of the real-vLLM check's model (hidden 512, 8 heads / 4 KV heads of 64, FFN 1408, vocab 32000), bracketed
# by neighbours so a model of similar size interpolates instead of extrapolating
GEMM_N = [256, 512, 1024, 2048, 2816, 4096, 32000]
GEMM_K = [256, 512, 1024, 1408, 2048]
DECODE_SEQS = [1, 2, 4, 8, 16, 32, 64, 128]
DECODE_CTX = [16, 64, 128, 256, 512, 1024, 2048, 4096]
PREFILL_CHUNKS = [1, 2, 4, 8]
PREFILL_LEN = [16, 64, 128, 256, 512, 1024, 2048]
HEADS = [(8, 4, 64)]          # (query heads, KV heads, head dim) per rank
BLOCK = 128                   # vLLM's CPU KV block size


def best_ms(fn: Callable[[], object], budget_s: float = 0.25, min_reps: int = 5) -> float:
    """Best wall time of ``fn`` in milliseconds, after one warm-up call."""
    fn()
    best = float("inf")
    spent, reps = 0.0, 0
    while reps < min_reps or (spent < budget_s and reps < 200):
        t0 = time.perf_counter()
        fn()
        dt_ = time.perf_counter() - t0
        best, spent, reps = min(best, dt_), spent + dt_, reps + 1
    return best * 1e3


MIN_COLD_BYTES = 64 * 2**20   # operand copies cycled through per shape: at least 4x a 16 MiB last-level cache ...
MAX_COPIES = 512


def last_level_cache_bytes() -> int:
    """The largest CPU cache the guest sees (sysfs), 0 where it does not say."""
    sizes = []
    for path in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = path.read_text().strip().upper()
        unit = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
        sizes.append(int(text.rstrip("KMG")) * unit if text.rstrip("KMG").isdigit() else 0)
    return max(sizes, default=0)


# ... and twice the one this machine has: a Xeon slice whose guest sees a 480 MiB L3 held 64 MiB of copies in it,
# and timed decode attention at 512-4096 tokens and 4-16 sequences 1.7-2.1x and decode-sized GEMMs up to 1.7x
# faster than with 1 GiB of copies (2026-12-07), which is what its served steps ran at (the L3 is the host's,
# shared with every other tenant): the real vLLM check's decode steps grew with context as the larger copies say
COLD_BYTES = max(MIN_COLD_BYTES, 2 * last_level_cache_bytes())


def copies(nbytes: float, cold: bool) -> int:
    """How many copies of a kernel's operands (weights, KV) to cycle through, one per call: enough that a copy is
    out of the last-level cache by its next turn, as a layer's weights and KV are whenever a served step reaches
    them (the step streams the whole model through the cache), while the code, the dispatcher and the
    activations stay as hot as in a served step; one (the operands stay cached between repeats) when not ``cold``.
    """
    return max(1, min(MAX_COPIES, -(-COLD_BYTES // max(int(nbytes), 1)))) if cold else 1


CACHE_NOTE = {True: f"weights and KV cycled through copies of {COLD_BYTES >> 20} MiB in all, so each call finds "
                    "its operands out of the last-level cache",
              False: "operands left cached between repeats"}


def gemm_call_s(m: int, n: int, k: int) -> float:
    """A rough upper bound on one m×k·k×n GEMM call (30 GFLOP/s), to skip shapes over --max-call-s unmeasured."""
    return 2.0 * m * n * k / 30e9


def measure_gemm(torch, rows: list[dict], max_call_s: float, dtype: str, cold: bool) -> None:
    from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm

    torch_dtype = getattr(torch, dtype)
    for n in GEMM_N:
        for k in GEMM_K:
            if gemm_call_s(1, n, k) > max_call_s:
                print(f"gemm n={n} k={k}: skipped, one token's call is over --max-call-s", flush=True)
                continue
            layers = [torch.nn.Linear(k, n, bias=False, dtype=torch_dtype)
                      for _ in range(copies(n * k * torch_dtype.itemsize, cold))]
            for layer in layers:
                dispatch_cpu_unquantized_gemm(layer, remove_weight=False)
            turn = itertools.cycle(layers)
            first = len(rows)
            for m in TOKENS:
                if gemm_call_s(m, n, k) > max_call_s:
                    break
                x = torch.randn(m, k, dtype=torch_dtype)

                def call(x: Any = x, turn: Any = turn) -> object:
                    layer = next(turn)
                    return layer.cpu_linear(x, layer.weight, None)

                ms = best_ms(call)
                rows.append(dict(framework="VLLM", op_name="gemm", kernel_source="dispatch_cpu_unquantized_gemm",
                                 gemm_dtype=dtype, m=m, n=n, k=k, latency=ms))
            print(f"gemm n={n} k={k} ({len(layers)} copies): m=1 {rows[first]['latency']:.3f} ms, "
                  f"m={rows[-1]['m']} {rows[-1]['latency']:.3f} ms", flush=True)


def _attention(torch, ops, heads: int, kv_heads: int, head_dim: int, seq_lens: list[int], query_lens: list[int],
               dtype: Any, cold: bool):
    """A callable running one layer's KV write + attention for sequences of ``seq_lens`` (KV after the step)
    feeding ``query_lens`` new tokens each, on a paged cache of ``dtype`` (the served dtype: vLLM's CPU backend
    keeps the cache in it) laid out as vLLM's CPU backend keeps it; each call on the next of ``copies`` disjoint
    sets of blocks."""
    from vllm.v1.attention.backends.cpu_attn import _get_attn_isa

    isa = _get_attn_isa(dtype, BLOCK, head_dim, "auto")
    blocks_per_seq = [-(-s // BLOCK) for s in seq_lens]
    per_copy = sum(blocks_per_seq)
    n_copies = copies(per_copy * kv_heads * BLOCK * 2 * head_dim * dtype.itemsize, cold)
    cache = torch.zeros(per_copy * n_copies + 1, kv_heads, BLOCK * 2, head_dim, dtype=dtype).normal_()
    key_cache, value_cache = cache.chunk(2, dim=2)
    table = torch.zeros(len(seq_lens), max(blocks_per_seq), dtype=torch.int32)
    start = 0
    for i, nb in enumerate(blocks_per_seq):
        table[i, :nb] = torch.arange(start, start + nb, dtype=torch.int32)
        start += nb
    tokens = sum(query_lens)
    qsl = torch.zeros(len(seq_lens) + 1, dtype=torch.int32)
    qsl[1:] = torch.cumsum(torch.tensor(query_lens, dtype=torch.int32), 0)
    lens = torch.tensor(seq_lens, dtype=torch.int32)
    slots = torch.cat([table[i, (torch.arange(s - q, s) // BLOCK)].long() * BLOCK + torch.arange(s - q, s) % BLOCK
                       for i, (s, q) in enumerate(zip(seq_lens, query_lens, strict=True))])
    turn = itertools.cycle([(table + c * per_copy, slots + c * per_copy * BLOCK) for c in range(n_copies)])
    q = torch.randn(tokens, heads, head_dim, dtype=dtype)
    k = torch.randn(tokens, kv_heads, head_dim, dtype=dtype)
    v = torch.randn(tokens, kv_heads, head_dim, dtype=dtype)
    out = torch.empty(tokens, heads, head_dim, dtype=dtype)
    meta = ops.cpu_attn_get_scheduler_metadata(
        num_reqs=len(seq_lens), num_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim, seq_lens=lens,
        dtype=dtype, query_start_loc=qsl, causal=True, sliding_window_size=-1, isa=isa,
        enable_kv_split=False)

    def run() -> None:
        blocks, where = next(turn)
        ops.cpu_attn_reshape_and_cache(k, v, key_cache, value_cache, where, isa)
        ops.cpu_attention_with_kv_cache(
            query=q, key_cache=key_cache, value_cache=value_cache, output=out, query_start_loc=qsl, seq_lens=lens,
            scale=head_dim ** -0.5, causal=True, alibi_slopes=None, sliding_window=-1, block_table=blocks,
            softcap=0.0, scheduler_metadata=meta, s_aux=None)

    return run, isa


def measure_attention(torch, decode: list[dict], prefill: list[dict], max_call_s: float, dtype: str,
                      cold: bool) -> None:
    from vllm import _custom_ops as ops

    torch_dtype = getattr(torch, dtype)
    for heads, kvh, hd in HEADS:
        common = dict(framework="VLLM", num_heads=heads, num_key_value_heads=kvh, head_dim=hd, beam_width=1,
                      attn_dtype=dtype, kv_cache_dtype=dtype, window_size=0)
        for b in DECODE_SEQS:
            for ctx in DECODE_CTX:
                run, isa = _attention(torch, ops, heads, kvh, hd, [ctx] * b, [1] * b, torch_dtype, cold)
                decode.append(dict(common, op_name="generation_attention",
                                   kernel_source=f"cpu_attention_with_kv_cache[{isa}]",
                                   batch_size=b, isl=1, step=ctx, latency=best_ms(run)))
            print(f"decode b={b}: ctx 16 {decode[-len(DECODE_CTX)]['latency']:.3f} ms, "
                  f"ctx {DECODE_CTX[-1]} {decode[-1]['latency']:.3f} ms", flush=True)
        for b in PREFILL_CHUNKS:
            for n in PREFILL_LEN:
                if b * n * n * heads * hd * 4 / 2 / 20e9 > max_call_s:
                    break
                run, isa = _attention(torch, ops, heads, kvh, hd, [n] * b, [n] * b, torch_dtype, cold)
                prefill.append(dict(common, op_name="context_attention",
                                    kernel_source=f"cpu_attention_with_kv_cache[{isa}]",
                                    batch_size=b, isl=n, step=0, latency=best_ms(run)))
            print(f"prefill b={b}: up to isl {prefill[-1]['isl']} {prefill[-1]['latency']:.3f} ms", flush=True)


def write(path: Path, rows: list[dict], version: str, device: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [dict(r, version=version, device=device) for r in rows]
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {len(rows)} rows to {path}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="the system's folder under scoville's data/kernels")
    ap.add_argument("--max-call-s", type=float, default=0.15, help="skip shapes whose one call takes longer")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (vLLM's CPU worker here uses one)")
    ap.add_argument("--dtype", choices=("bfloat16", "float32"), default="bfloat16",
                    help="the dtype the server runs (`vllm serve --dtype`): float32 on a CPU without AVX-512 BF16, "
                         "where vLLM's BF16 GEMMs run ~10x slower than its FP32 ones")
    ap.add_argument("--warm-cache", action="store_true",
                    help="leave the operands cached between repeats (how the tables before 2026-12-05 were timed); "
                         "default: cycle through copies of them, so each call finds them out of the last-level "
                         "cache, as a served step does")
    args = ap.parse_args()
    import torch
    import vllm

    torch.set_num_threads(args.threads)
    version = vllm.__version__.split("+")[0]
    device = f"{platform.processor() or platform.machine()} ({os.cpu_count()} vCPU, {args.threads} thread)"
    gemm: list[dict] = []
    decode: list[dict] = []
    prefill: list[dict] = []
    t0 = time.time()
    cold = not args.warm_cache
    measure_gemm(torch, gemm, args.max_call_s, args.dtype, cold)
    measure_attention(torch, decode, prefill, args.max_call_s, args.dtype, cold)
    write(args.out / "gemm" / "vllm" / version / "gemm_perf.csv", gemm, version, device)
    write(args.out / "attention" / "vllm" / version / "generation_attention_perf.csv", decode, version, device)
    write(args.out / "attention" / "vllm" / version / "context_attention_perf.csv", prefill, version, device)
    with open("/proc/cpuinfo") as f:
        model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "unknown")
    (args.out / "SOURCE.md").write_text(
        f"Measured by `bench/measure_cpu_kernels.py` on {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC "
        f"in {time.time() - t0:.0f} s: vLLM {vllm.__version__}, torch {torch.__version__}, {model}, "
        f"{args.dtype}, {CACHE_NOTE[cold]}, "
        f"{args.threads} torch thread(s), affinity {sorted(os.sched_getaffinity(0))}, "
        f"load average {os.getloadavg()[0]:.2f} at the end. Best of >= 5 repeats per point; times in ms.\n")


if __name__ == "__main__":
    main()
