"""Measured kernel tables: NVIDIA's ``aiconfigurator-core`` package, and scoville's own for other chips.

``pip install 'scoville[silicon]'`` brings the package; its ``systems/data/<system>/<op>/<framework>/
<version>/*.parquet`` files hold kernel times measured on H100, H200, B200, B300, GB200, GB300, A100,
L40S and more, per serving framework. Nothing is copied: this module finds the installed folder,
picks the newest version of each table for the requested framework, and hands back numpy arrays.

Chips the package does not cover but that scoville has measured itself (the CPU the real-vLLM check
runs on, ``bench/measure_cpu_kernels.py``) keep their tables in ``scoville/data/kernels/<system>/`` in
the same layout and columns, as CSV: small, diffable, and readable without the extra. A system lives in
one place: scoville's own folder when it has one, else the package. A user's own measured tables live
wherever they were written: a hardware YAML's ``kernel_tables`` may name that folder by its absolute path
(``catalog.hardware`` resolves a relative one against the YAML), read like scoville's own.

Times in the tables are milliseconds; everything leaving this module is seconds. Where several
kernels were measured for one shape (CUTLASS, DeepGEMM, Triton ...), the fastest is kept: serving
frameworks autotune or pick per shape, and the slow alternatives are not what a deployment runs.
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import yaml

from scoville.sim.kernels import work
from scoville.sim.kernels.cache import cached

FRAMEWORKS = ("vllm", "sglang", "trtllm")
OWN_ROOT = Path(__file__).resolve().parents[2] / "data" / "kernels"   # scoville's own measured systems


@lru_cache(maxsize=1)
def data_dir() -> Path | None:
    """``aiconfigurator_core/systems/data`` of the installed package, or None when it is not installed."""
    spec = importlib.util.find_spec("aiconfigurator_core")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "systems" / "data"
    return path if path.is_dir() else None


@lru_cache(maxsize=1)
def package_version() -> str | None:
    """Version of the installed aiconfigurator-core (recorded in provenance; keys the disk cache)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("aiconfigurator-core")
    except PackageNotFoundError:
        return None


def _csv_tables(root: Path) -> bool:
    """Whether the tables under ``root`` are CSV in scoville's layout (its own or a user's), not the package's."""
    return root != data_dir()


@lru_cache(maxsize=64)
def root_for(system: str) -> Path | None:
    """The folder holding ``system``'s tables: the parent of a user's folder, scoville's own when it measured the
    system, else the package's (``root / system`` is then the system's folder in every case)."""
    if Path(system).is_absolute():            # a user's folder of tables, not a system by name
        return Path(system).parent if Path(system).is_dir() else None
    if (OWN_ROOT / system).is_dir():
        return OWN_ROOT
    root = data_dir()
    return root if root is not None and (root / system).is_dir() else None


@lru_cache(maxsize=64)
def tables_version(system: str) -> str | None:
    """What keys ``system``'s slices in the disk cache: the package version, or for scoville's own tables and a
    user's folder a digest of their files (a re-measured table is a new version; computed once a process, so
    tables re-timed into the same folder are seen by the next process); either with a digest of this module, since
    a slice is the tables read through this code (a changed query must not return the old one's slices)."""
    root = root_for(system)
    if root is None:
        return None
    code = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:8]
    if not _csv_tables(root):
        version = package_version()
        return None if version is None else f"{version}-{code}"
    digest = hashlib.sha256()
    for path in sorted((root / system).rglob("*.csv")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return f"scoville-{digest.hexdigest()[:16]}-{code}"


def _version_key(v: str) -> tuple:
    try:
        from packaging.version import Version

        return (0, Version(v))
    except Exception:  # an unparseable folder name sorts before every real version
        return (-1, v)


@lru_cache(maxsize=256)
def table_paths(system: str, op: str, framework: str, filename: str) -> tuple[Path, ...]:
    """Every ``<op>/<framework>/<version>/<filename>`` measured on ``system``, newest version first.

    Newer collections are sometimes partial (one format re-measured, the rest reused from an older
    version), so lookups walk this list until a version holds the slice they need. ``filename`` names the
    Parquet file; scoville's own tables hold the same columns as ``.csv``.
    """
    root = root_for(system)
    if root is None:
        return ()
    base = root / system / op / framework
    if not base.is_dir():
        return ()
    if _csv_tables(root):
        filename = Path(filename).with_suffix(".csv").name
    versions = sorted((p for p in base.iterdir() if (p / filename).is_file()), key=lambda p: _version_key(p.name))
    return tuple(v / filename for v in reversed(versions))


def table_path(system: str, op: str, framework: str, filename: str) -> Path | None:
    """The newest ``<op>/<framework>/<version>/<filename>`` measured on ``system``, if any."""
    paths = table_paths(system, op, framework, filename)
    return paths[0] if paths else None


@lru_cache(maxsize=64)
def read(path: Path) -> pa.Table:
    """One table, Parquet or CSV (cached: the cost models of a search share them)."""
    if path.suffix == ".csv":
        import pyarrow.csv as pcsv  # imported on first use: a warm disk cache never needs it

        return pcsv.read_csv(path)
    import pyarrow.parquet as pq

    return pq.read_table(path)


def _relative(path: Path) -> str:
    """A table's path as provenance: relative to the package data, or marked as scoville's own."""
    if path.is_relative_to(OWN_ROOT):
        return "scoville/data/kernels/" + str(path.relative_to(OWN_ROOT))
    root = data_dir()
    return str(path.relative_to(root)) if root is not None and path.is_relative_to(root) else str(path)


# aiconfigurator-core's whole-MLA-module tables per phase: the file and the column of its second size (the decode
# step's context, the prefill's prompt length; the first is the batch)
MLA_MODULE_TABLES = {"decode": ("mla_generation_module_perf.parquet", "step"),
                     "prefill": ("mla_context_module_perf.parquet", "isl")}
# SGLang times its attention layer in its wide-EP collections: at a rank's heads, under the attention backend it ran
# (``kernel_source``), without the fused q/kv down-projection its communicator runs outside the layer, and its
# prompts as a server runs them, eagerly (no CUDA graph outside decode). Prefill only: its decode layer runs under
# CUDA graphs, where the core table prices it.
SGLANG_MLA_MODULE_TABLES = {"prefill": ("wideep_context_mla_perf.parquet", "isl")}


@lru_cache(maxsize=64)
def times_serving(path: Path, framework: str) -> bool:
    """Whether the collection holding the module table ``path`` timed the module as a server runs it: always for
    TensorRT-LLM (its modules are its own attention classes); for vLLM only where the package's
    ``collection_meta.yaml`` records the fused-op re-collection (``norm_dispatch`` on the table) or a collection
    on the serving runtime (``provenance: local``): its older collections ran an unfused native norm chain that
    serving never runs (+34% at their anchor cell, ai-dynamo/aiconfigurator#1423). Cached: every cost model built
    for an MLA shape asks it again of the same few files."""
    if framework != "vllm":
        return True
    meta_path = path.with_name("collection_meta.yaml")
    meta = yaml.safe_load(meta_path.read_text()) if meta_path.is_file() else {}
    table = (meta.get("tables") or {}).get(path.stem) or {}
    return meta.get("provenance") == "local" or "norm_dispatch" in table


def _where(t: pa.Table, **eq: object) -> pa.Table:
    mask = None
    for col, value in eq.items():
        m = pc.equal(t[col], value)
        mask = m if mask is None else pc.and_(mask, m)
    return t.filter(mask) if mask is not None else t


def _np(t: pa.Table, col: str) -> np.ndarray:
    return t[col].to_numpy(zero_copy_only=False).astype(np.float64)


@dataclass(frozen=True)
class Grid:
    """Fastest measured time (s) on a full grid ``x × y`` of the two free sizes of a table slice.

    Cells the table lacks (collections stop short of the largest shapes) are filled from the measured ones,
    scaled in proportion to the work from the nearest measured shape (see ``_fill_gaps``).
    """

    x: np.ndarray
    y: np.ndarray
    t: np.ndarray   # (len(x), len(y)) seconds

    @classmethod
    def of(cls, t: pa.Table, xcol: str, ycol: str) -> Grid | None:
        if t.num_rows == 0:
            return None
        x, y, lat = _np(t, xcol), _np(t, ycol), _np(t, "latency") * 1e-3
        ok = (x > 0) & (y > 0) & (lat > 0) & np.isfinite(lat)
        x, y, lat = x[ok], y[ok], lat[ok]
        if x.size == 0:
            return None
        xs, ys = np.unique(x), np.unique(y)
        grid = np.full((xs.size, ys.size), np.inf)
        np.minimum.at(grid, (np.searchsorted(xs, x), np.searchsorted(ys, y)), lat)
        _fill_gaps(grid, xs, ys)
        return cls(xs, ys, grid)


def _fill_gaps(grid: np.ndarray, xs: np.ndarray, ys: np.ndarray) -> None:
    """Fill unmeasured cells (inf) of a time grid over sizes ``xs`` × ``ys``, in place.

    Collections skip the largest shapes (out of memory), so the holes sit at the big end: a cell past
    the last measured one of its column is that cell's time scaled in proportion to the size (large
    kernels are throughput-bound: twice the work, twice the time); a cell before the first measured one
    takes that first time (small kernels are launch-bound). Rows are tried first, then columns, then
    whatever is still empty copies its nearest neighbour along the row.
    """
    for arr, sizes in ((grid, xs), (grid.T, ys)):
        for col in range(arr.shape[1]):
            line = arr[:, col]
            good = np.flatnonzero(np.isfinite(line))
            if good.size == 0 or good.size == line.size:
                continue
            first, last = good[0], good[-1]
            line[:first] = np.where(np.isfinite(line[:first]), line[:first], line[first])
            tail = np.arange(last + 1, line.size)
            line[tail] = np.where(np.isfinite(line[tail]), line[tail], line[last] * sizes[tail] / sizes[last])
            inner = np.flatnonzero(~np.isfinite(line))
            if inner.size:   # a hole between measured sizes: log-log interpolation across it
                line[inner] = np.exp(np.interp(np.log(sizes[inner]), np.log(sizes[good]), np.log(line[good])))
    if not np.isfinite(grid).all():
        finite = np.isfinite(grid)
        fill = grid[finite].max() if finite.any() else 1.0
        grid[~finite] = fill


class KernelTables:
    """The measured tables of one system and framework (``b200_sxm``, ``vllm``).

    Every query returns the slice from the newest table version that holds it (``None`` when none does)
    and is cached per process: a configuration search builds dozens of cost models over the same tables.
    """

    def __init__(self, system: str, framework: str) -> None:
        self.system, self.framework = system, framework
        self.sources: dict[str, str] = {}

    def source(self, op: str) -> str:
        """``<system>/<op>/<framework>/<version>/<file>`` that answered the last ``op`` query."""
        return self.sources.get(op, f"{self.system}/{op}")

    def _first(self, op: str, filename: str, query: Callable[[pa.Table], object], framework: str | None = None,
               label: str | None = None) -> object:
        result, src = _first_slice(self.system, op, framework or self.framework, filename, query)
        if result is not None and src:
            self.sources[label or op] = src
        return result

    # -- dense GEMM: time over (m, n, k) ---------------------------------------------------------------
    def gemm(self, dtype: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """(m, n, k, seconds[m, n, k]) for one kernel format: the fastest kernel any framework measured for
        the shape (a GEMM library is not framework-specific, and taking the fastest also drops the odd
        collection where one framework's only kernel for a format is pathologically slow at small m)."""
        return _gemm_cube(self.system, dtype)

    # -- MoE: time over global tokens ------------------------------------------------------------------
    def moe(self, hidden: int, inter: int, topk: int, experts: int, tp: int, ep: int, dtype: str,
            distribution: str, framework: str | None = None,
            kernel: str = "") -> tuple[np.ndarray, np.ndarray] | None:
        """Routed-expert time over global tokens from ``framework``'s table (default: this one's), the fastest of
        its kernels per token count, or of those whose ``kernel_source`` contains ``kernel``."""
        key = (hidden, inter, topk, experts, tp, ep, dtype, distribution, kernel)
        return self._first("moe", "moe_perf.parquet", _Query("moe", key),  # type: ignore[return-value]
                           framework=framework, label=f"moe:{kernel}" if kernel else "moe")

    def marlin_moe_rate(self, dtype: str, distribution: str) -> tuple[np.ndarray, np.ndarray] | None:
        """vLLM's Marlin MoE kernel (weight-only ``dtype`` experts dequantised in the GEMM) as the FLOP rate it
        reached over tokens per expert, from every shape its table timed it at on one rank: a grouped GEMM's
        arithmetic intensity is set by the tokens each expert sees, not by the expert's width, so the rate carries
        to another model's experts. vLLM tables only."""
        return self._first("moe", "moe_perf.parquet", _Query("marlin_rate", (dtype, distribution)),  # type: ignore[return-value]
                           framework="vllm", label="marlin_moe")

    def wideep_moe(self, hidden: int, inter: int, topk: int, experts: int, ep: int, dtype: str,
                   distribution: str, slots: int = 0) -> tuple[np.ndarray, np.ndarray] | None:
        """TensorRT-LLM's WideEP expert compute (the MoE module its wide expert-parallel deployments run), time over
        global tokens: with no load balancer (``slots`` 0: one slot per expert), or under it over ``slots`` slots
        (the ``wideep_moe_eplb`` runs, whose distributions carry an ``_eplb`` suffix); TensorRT-LLM tables only."""
        key = (hidden, inter, topk, experts, ep, dtype, distribution, slots)
        return self._first("moe", "wideep_moe_perf.parquet", _Query("wideep_moe", key),  # type: ignore[return-value]
                           framework="trtllm", label="wideep_moe")

    def deepep_moe(self, hidden: int, inter: int, topk: int, experts: int, ep: int, dtype: str,
                   distribution: str) -> tuple[np.ndarray, np.ndarray] | None:
        """SGLang's DeepEP expert compute (``DeepEPMoE``, the experts its DP-attention deployments run behind
        DeepEP), time over global tokens (a rank's tokens × EP, as collected): the decode table (low-latency mode,
        up to 128 tokens a rank) and, beyond its largest batch, the prefill table (normal mode, which SGLang's
        ``--deepep-mode auto`` runs for extend batches); SGLang tables only."""
        query = _Query("moe", (hidden, inter, topk, experts, 1, ep, dtype, distribution, ""))   # same columns
        decode: tuple[np.ndarray, np.ndarray] | None = self._first(  # type: ignore[assignment]
            "moe", "wideep_generation_moe_perf.parquet", query, framework="sglang", label="deepep_moe")
        if decode is None:
            return None
        prefill: tuple[np.ndarray, np.ndarray] | None = self._first(  # type: ignore[assignment]
            "moe", "wideep_context_moe_perf.parquet", query, framework="sglang", label="deepep_moe_prefill")
        tokens, seconds = decode
        if prefill is not None:
            more = prefill[0] > tokens[-1]
            tokens, seconds = np.concatenate([tokens, prefill[0][more]]), np.concatenate([seconds, prefill[1][more]])
        return tokens, seconds

    # -- attention cores: time over (batch, context) -----------------------------------------------------
    def gqa_decode(self, heads: int, kv_heads: int, head_dim: int, kv_dtype: str, window: int = 0) -> Grid | None:
        return self._first("attention", "generation_attention_perf.parquet",  # type: ignore[return-value]
                           _Query("gqa_decode", (heads, kv_heads, head_dim, kv_dtype, window)), label="gqa_decode")

    def gqa_prefill(self, heads: int, kv_heads: int, head_dim: int, dtype: str = "bfloat16") -> Grid | None:
        """Prefill attention, the rows run in ``dtype`` where the table has them (prefill attention runs in BF16
        whatever the cache format on GPUs; an FP32 model's in FP32), else the rows of any other cache format
        but FP32 (single-precision timings never stand for a half-precision kernel)."""
        return self._first("attention", "context_attention_perf.parquet",  # type: ignore[return-value]
                           _Query("gqa_prefill", (heads, kv_heads, head_dim, dtype)), label="gqa_prefill")

    def mla_decode(self, heads: int, kv_dtype: str) -> Grid | None:
        """MLA decode core (no projections), from the serving framework's own table (``_mla_core``)."""
        return self._mla_core("generation_mla_perf.parquet", _Query("mla", (heads, kv_dtype, "step")), "mla_decode")

    def mla_prefill(self, heads: int, kv_dtype: str) -> Grid | None:
        return self._mla_core("context_mla_perf.parquet", _Query("mla", (heads, kv_dtype, "isl")), "mla_prefill")

    def _mla_core(self, filename: str, query: _Query, label: str) -> Grid | None:
        """SGLang's and TensorRT-LLM's MLA tables time the core alone, each with its own kernel, and the kernels
        differ by format: on H200 with an FP8 cache SGLang's decode core is ~9x TensorRT-LLM's at 8k context.
        A framework is costed on its own kernel; vLLM, which has no core table, on TensorRT-LLM's (on Blackwell
        vLLM runs those trtllm-gen kernels through FlashInfer), then SGLang's."""
        order = dict.fromkeys((self.framework, "trtllm", "sglang"))
        for framework in order:
            got = self._first("mla", filename, query, framework=framework, label=label)
            if got is not None:
                return got  # type: ignore[return-value]
        return None

    def mla_module(self, phase: str, heads: int, gemm: str, kv_dtype: str, backend: str = "") -> Grid | None:
        """DeepSeek-V3's whole MLA attention layer (projections, absorbed products or K/V decompression, core,
        norms and RoPE, as the framework's attention class runs them) at ``heads`` a rank: ``phase`` "decode" over
        (batch, context) of one decode step, "prefill" over (prompts, prompt length). From this framework's own
        table only (a module is one stack's code), and only from a collection that timed what a server runs
        (``times_serving``). SGLang's (``SGLANG_MLA_MODULE_TABLES``) under its attention ``backend``, less the q/kv
        down-projection."""
        label = f"mla_module_{phase}"
        if self.framework == "sglang":
            if phase not in SGLANG_MLA_MODULE_TABLES:
                return None
            filename, ycol = SGLANG_MLA_MODULE_TABLES[phase]
            query = _Query("mla_module", (heads, gemm, kv_dtype, ycol, backend))
            return self._first("mla", filename, query, label=label)  # type: ignore[return-value]
        filename, ycol = MLA_MODULE_TABLES[phase]
        grid = self._first("mla", filename, _Query("mla_module", (heads, gemm, kv_dtype, ycol, "")), label=label)
        if grid is None:
            return None
        path = next(p for p in table_paths(self.system, "mla", self.framework, filename)
                    if _relative(p) == self.source(label))
        return grid if times_serving(path, self.framework) else None  # type: ignore[return-value]

    def mla_bmm(self, op: str, heads: int) -> tuple[np.ndarray, np.ndarray] | None:
        """MLA's absorbed projections (``mla_gen_pre`` q→latent, ``mla_gen_post`` latent→v) over tokens."""
        return self._first("mla_bmm", "mla_bmm_perf.parquet", _Query("bmm", (op, heads)))  # type: ignore[return-value]

    # -- collectives: time over bytes ----------------------------------------------------------------------
    def allreduce(self, gpus: int) -> tuple[np.ndarray, np.ndarray] | None:
        """The framework's all-reduce (custom kernel under CUDA graphs where measured), time over bytes."""
        return self._first("comm", "custom_allreduce_perf.parquet", _Query("allreduce", (gpus,)),  # type: ignore[return-value]
                           label="allreduce")

    def nvlink_alltoall(self, hidden: int, topk: int, ep: int, dispatch_dtype: str
                        ) -> tuple[np.ndarray, np.ndarray] | None:
        """TensorRT-LLM's NVLink all-to-all of wide expert parallelism: one MoE layer's prepare, dispatch and
        combine with ``dispatch_dtype`` activations, time over tokens per rank: per token count the faster of
        its one- and two-sided MNNVL kernels, each timed whole (never one kernel's phase with the other's)."""
        return self._first("comm", "trtllm_alltoall_perf.parquet",  # type: ignore[return-value]
                           _Query("nvlink_a2a", (hidden, topk, ep, dispatch_dtype)), label="nvlink_alltoall")

    def deepep_exchange(self, hidden: int, topk: int, experts: int, nodes: int, mode: str
                        ) -> tuple[np.ndarray, np.ndarray] | None:
        """DeepEP's dispatch + combine of one MoE layer over ``nodes`` 8-GPU nodes, time over tokens per rank: its
        low-latency kernels (``mode="ll"``) or its normal ones (``"normal"``: each phase's notify and transmit, at
        the fastest SM count timed). SGLang's collection timed them; DeepEP is one library, whichever framework
        calls it (TensorRT-LLM runs its fork), so this is no framework's own table."""
        return self._first("comm", f"wideep_deepep_{mode}_perf.parquet",  # type: ignore[return-value]
                           _Query(f"deepep_{mode}", (hidden, topk, experts, nodes)), framework="sglang",
                           label=f"deepep_{mode}")

    def trtllm_deepep(self, hidden: int, topk: int, experts: int, dispatch_dtype: str
                      ) -> tuple[np.ndarray, np.ndarray] | None:
        """TensorRT-LLM's own DeepEP (its fork's high-throughput kernels, what ``TRTLLM_FORCE_ALLTOALL_METHOD=DeepEP``
        runs) on one 8-GPU node: one MoE layer's ``dispatch_dtype`` dispatch and BF16 combine, time over tokens per
        rank. Its collection timed one node only."""
        return self._first("comm", "moe_a2a_perf.parquet",  # type: ignore[return-value]
                           _Query("trtllm_deepep", (hidden, topk, experts, dispatch_dtype)), framework="trtllm",
                           label="trtllm_deepep")

    def elementwise(self) -> tuple[float, float] | None:
        """(launch floor in seconds, streaming bytes/s) of a simple elementwise kernel on this system, or None.

        No table times norms or residual adds; the FP8 quantize tables (``quantize/*/scale_matrix_perf``: read a
        BF16 activation, write FP8, over m x k) time the same kind of kernel. Floor: the median time of the
        smallest tenth of shapes; rate: 3 bytes an element over the largest tenth. Each is the best any
        framework's collection reached, as GEMMs take the fastest kernel per shape (SGLang's collection runs at a
        tenth of the others' rate and four times their floor: not its serving path).
        """
        got = _elementwise_rates(self.system)
        if got is None:
            return None
        floor, rate, source = got
        self.sources["elementwise"] = str(source)
        return float(floor), float(rate)

    def nccl(self, op: str, gpus: int) -> tuple[np.ndarray, np.ndarray] | None:
        """NCCL ``all_reduce`` / ``alltoall`` / ``all_gather`` time over bytes (newest NCCL measured)."""
        return self._first("comm", "nccl_perf.parquet", _Query("nccl", (op, gpus)), framework="nccl",  # type: ignore[return-value]
                           label=f"nccl_{op}")


def _strings(t: pa.Table, col: str) -> list[str]:
    return sorted(str(v) for v in pc.unique(t[col]).to_pylist()) if t.num_rows else []


def _nvlink_total(t: pa.Table) -> tuple[np.ndarray, np.ndarray] | None:
    """One all-to-all kernel's MoE-layer time over tokens per rank: its prepare (the two-sided kernel has one),
    dispatch and combine, on the token counts all of them were timed at. More tokens never move faster, so a
    single-token time above a larger batch's is timing noise and takes the larger batch's."""
    prepare, dispatch, combine = (_where(t, op_name=op)
                                  for op in ("alltoall_prepare", "alltoall_dispatch", "alltoall_combine"))
    if not dispatch.num_rows or not combine.num_rows:
        return None
    return _phases_total([p for p in (prepare, dispatch, combine) if p.num_rows], 1e-3)


def _phases_total(phases: list[pa.Table], seconds_per_unit: float) -> tuple[np.ndarray, np.ndarray] | None:
    """One kernel's phases (each a table of ``num_tokens`` and ``latency`` rows) summed into one time over tokens
    per rank, on the token counts every phase was timed at (None below two): the fastest row per count, and more
    tokens never moving faster (``_never_faster_with_more``)."""
    curves = [_fastest_over(_np(p, "num_tokens"), _np(p, "latency") * seconds_per_unit) for p in phases]
    tokens = curves[0][0]
    for x, _ in curves[1:]:
        tokens = np.intersect1d(tokens, x)
    if tokens.size < 2:
        return None
    total = np.sum([lat[np.searchsorted(x, tokens)] for x, lat in curves], axis=0)
    return tokens, _never_faster_with_more(total)


def _deepep_total(t: pa.Table, low_latency: bool, hidden: int, topk: int, experts: int,
                  nodes: int) -> tuple[np.ndarray, np.ndarray] | None:
    """One MoE layer's DeepEP dispatch + combine over tokens per rank on ``nodes`` nodes: the low-latency table's
    two averages, or the normal table's notify and transmit of both phases at the fastest SM count timed. More
    tokens never move faster, so a smaller batch's time above a larger one's is noise and takes the larger's."""
    s = _where(t, node_num=nodes, hidden_size=hidden, num_topk=topk, num_experts=experts)
    if not s.num_rows:
        return None
    phases = (("dispatch_avg_t_us", "combine_avg_t_us") if low_latency else
              ("dispatch_transmit_us", "dispatch_notify_us", "combine_transmit_us", "combine_notify_us"))
    tokens, best = _fastest_over(_np(s, "num_token"), np.sum([_np(s, c) for c in phases], axis=0) * 1e-6)
    return tokens, _never_faster_with_more(best)


def _trtllm_deepep_total(t: pa.Table, hidden: int, topk: int, experts: int,
                         dispatch_dtype: str) -> tuple[np.ndarray, np.ndarray] | None:
    """TensorRT-LLM's DeepEP high-throughput dispatch (``dispatch_dtype``) + BF16 combine on one node, over the
    token counts both phases were timed at (``KernelTables.trtllm_deepep``)."""
    s = _where(t, comm_backend="trtllm_deepep_ht", node_num=1, hidden_size=hidden, topk=topk, num_experts=experts)
    dispatch = _where(s, phase="dispatch", comm_dtype=dispatch_dtype)
    combine = _where(s, phase="combine", comm_dtype="bfloat16")
    if not dispatch.num_rows or not combine.num_rows:
        return None
    return _phases_total([dispatch, combine], 1e-6)       # this table's latency is in microseconds


def _never_faster_with_more(seconds: np.ndarray) -> np.ndarray:
    """Times over a rising token grid with the noise taken out: a batch never moves faster than a larger one, so
    each takes the least of its own time and every larger batch's."""
    return np.minimum.accumulate(seconds[::-1])[::-1]


def _fastest_rows(s: pa.Table, xcol: str, x_scale: float = 1.0) -> tuple[np.ndarray, np.ndarray] | None:
    """A slice's times (``latency``, ms) over ``xcol`` × ``x_scale`` as ``_fastest_over`` reads them; None when the
    slice is empty."""
    return _fastest_over(_np(s, xcol) * x_scale, _np(s, "latency") * 1e-3) if s.num_rows else None


def _fastest_over(x: np.ndarray, lat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    xu = np.unique(x)
    best = np.full(xu.size, np.inf)
    np.minimum.at(best, np.searchsorted(xu, x), lat)
    return xu, best


def _gqa_prefill(t: pa.Table, heads: int, kv_heads: int, head_dim: int, dtype: str) -> Grid | None:
    """Full-attention prefill rows of one head layout (``KernelTables.gqa_prefill``): those run in ``dtype`` where
    the table has them, else any format but FP32."""
    eq: dict[str, object] = dict(num_heads=heads, num_key_value_heads=kv_heads, head_dim=head_dim)
    if "window_size" in t.column_names:
        eq["window_size"] = 0
    s = _where(t, **eq)
    if "kv_cache_dtype" in s.column_names and s.num_rows:
        if pc.any(pc.equal(s["kv_cache_dtype"], dtype)).as_py():
            s = _where(s, kv_cache_dtype=dtype)
        elif dtype != "float32":
            s = s.filter(pc.not_equal(s["kv_cache_dtype"], "float32"))
    return Grid.of(s, "batch_size", "isl")


def _marlin_rate(t: pa.Table, dtype: str, distribution: str) -> tuple[np.ndarray, np.ndarray] | None:
    """(tokens per expert, the highest FLOP/s vLLM's Marlin MoE kernel reached there) over every one-rank shape of
    ``dtype`` experts the table timed it at (``KernelTables.marlin_moe_rate``)."""
    s = _where(t, moe_dtype=dtype, moe_tp_size=1, moe_ep_size=1, distribution=distribution)
    s = s.filter(pc.match_substring(s["kernel_source"], "marlin")) if s.num_rows else s
    if not s.num_rows:
        return None
    tokens, topk, experts = _np(s, "num_tokens"), _np(s, "topk"), _np(s, "num_experts")
    flops = work.moe_flops(tokens, _np(s, "hidden_size"), _np(s, "inter_size"), topk)
    # the lowest negated rate at each tokens-per-expert is the highest rate
    per_expert, negated_best = _fastest_over(tokens * topk / experts, -flops / (_np(s, "latency") * 1e-3))
    return per_expert, -negated_best


def _mla_module(t: pa.Table, heads: int, gemm: str, kv: str, ycol: str, backend: str) -> Grid | None:
    """A module table's grid at one shape: TensorRT-LLM's and vLLM's at BF16 attention math; SGLang's under its
    attention ``backend``, where the collection names the GEMM format (older ones do not: not comparable)."""
    if not backend:
        return Grid.of(_where(t, mla_dtype="bfloat16", gemm_type=gemm, kv_cache_dtype=kv, num_heads=heads),
                       "batch_size", ycol)
    if "gemm_type" not in t.column_names:
        return None
    return Grid.of(_where(t, kernel_source=backend, gemm_type=gemm, kv_cache_dtype=kv, num_heads=heads),
                   "batch_size", ycol)


@dataclass(frozen=True)
class _Query:
    """One slice of a table (hashable, so slices cache per process)."""

    kind: str
    key: tuple

    def __call__(self, t: pa.Table) -> object:
        k = self.key
        if self.kind == "moe":
            hidden, inter, topk, experts, tp, ep, dtype, dist, kernel = k
            s = _where(t, hidden_size=hidden, inter_size=inter, topk=topk, num_experts=experts, moe_tp_size=tp,
                       moe_ep_size=ep, moe_dtype=dtype, distribution=dist)
            if kernel and s.num_rows:
                s = s.filter(pc.match_substring(s["kernel_source"], kernel))
            return _fastest_rows(s, "num_tokens")
        if self.kind == "marlin_rate":
            return _marlin_rate(t, *k)
        if self.kind == "wideep_moe":
            hidden, inter, topk, experts, ep, dtype, dist, slots = k
            s = _where(t, op_name="wideep_moe_eplb" if slots else "wideep_moe", hidden_size=hidden, inter_size=inter,
                       topk=topk, num_experts=experts, num_slots=slots or experts, moe_tp_size=1, moe_ep_size=ep,
                       moe_dtype=dtype, distribution=dist)
            return _fastest_rows(s, "num_tokens")
        if self.kind == "gqa_decode":
            heads, kvh, hd, kv, window = k
            eq: dict[str, object] = dict(num_heads=heads, num_key_value_heads=kvh, head_dim=hd, kv_cache_dtype=kv)
            if "window_size" in t.column_names:
                eq["window_size"] = window
            return Grid.of(_where(t, **eq), "batch_size", "step")
        if self.kind == "gqa_prefill":
            return _gqa_prefill(t, *k)
        if self.kind == "mla":
            heads, kv, ycol = k
            # num_heads is per rank (tp_size only labels the model it was cut from): the kernel sees those heads
            return Grid.of(_where(t, num_heads=heads, kv_cache_dtype=kv), "batch_size", ycol)
        if self.kind == "mla_module":
            return _mla_module(t, *k)
        if self.kind == "bmm":
            op, heads = k
            s = _where(t, op_name=op, num_heads=heads)
            return _fastest_rows(s, "num_tokens")
        if self.kind == "allreduce":
            (gpus,) = k
            s = _where(t, num_gpus=gpus)
            if "backend" in s.column_names and s.num_rows:
                graphs = pc.match_substring(s["backend"], "graph")
                if pc.any(graphs).as_py():
                    s = s.filter(graphs)
            return _fastest_rows(s, "message_size", 2.0)
        if self.kind == "nvlink_a2a":
            hidden, topk, ep, dtype = k
            s = _where(t, hidden_size=hidden, topk=topk, moe_ep_size=ep, moe_dtype=dtype)
            totals = [c for src in _strings(s, "kernel_source") if (c := _nvlink_total(_where(s, kernel_source=src)))]
            if not totals:
                return None
            return _fastest_over(np.concatenate([x for x, _ in totals]), np.concatenate([y for _, y in totals]))
        if self.kind in ("deepep_ll", "deepep_normal"):
            return _deepep_total(t, self.kind == "deepep_ll", *k)
        if self.kind == "trtllm_deepep":
            return _trtllm_deepep_total(t, *k)
        if self.kind == "nccl":
            op, gpus = k
            s = _where(t, op_name=op, num_gpus=gpus, nccl_dtype="half")
            return _fastest_rows(s, "message_size", 2.0)
        raise ValueError(f"unknown table query {self.kind!r}")


@lru_cache(maxsize=4096)
def _first_slice(system: str, op: str, framework: str, filename: str, query: _Query) -> tuple[object, str | None]:
    key = f"slice|{system}|{op}|{framework}|{filename}|{query.kind}|{query.key}"
    packed = cached(tables_version(system), key,
                    lambda: _pack(*_first_slice_uncached(system, op, framework, filename, query)))
    return _unpack(packed)


def _first_slice_uncached(system: str, op: str, framework: str, filename: str,
                          query: _Query) -> tuple[object, str | None]:
    for path in table_paths(system, op, framework, filename):
        result = query(read(path))
        if result is not None:
            return result, _relative(path)
    return None, None


def _pack(result: object, source: str | None) -> tuple[np.ndarray, ...] | None:
    """A slice as arrays for the disk cache: (kind, source, *arrays); a slice no table holds is cached too."""
    if result is None:
        return (np.array("none"), np.array(""))
    if isinstance(result, Grid):
        return (np.array("grid"), np.array(source or ""), result.x, result.y, result.t)
    return (np.array("pair"), np.array(source or ""), *result)  # type: ignore[misc]


def _unpack(packed: tuple[np.ndarray, ...] | None) -> tuple[object, str | None]:
    if packed is None:
        return None, None
    kind, source, *arrays = packed
    if str(kind) == "none":
        return None, None
    result: object = Grid(*arrays) if str(kind) == "grid" else tuple(arrays)
    return result, str(source) or None


def _cached_or_none(system: str, key: str, compute: Callable[[], tuple[np.ndarray, ...] | None]) -> Any:
    """``compute()``'s arrays through the disk cache, where an answer of None is cached too (as a one-array
    marker) so that a table that lacks the slice is not re-read on every start."""
    packed = cached(tables_version(system), key, lambda: compute() or (np.array("none"),))
    return None if packed is None or len(packed) == 1 else packed


@lru_cache(maxsize=32)
def _gemm_cube(system: str, dtype: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    return _cached_or_none(system, f"gemm|{system}|{dtype}", lambda: _gemm_cube_uncached(system, dtype))


@lru_cache(maxsize=32)
def _elementwise_rates(system: str) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    return _cached_or_none(system, f"elementwise|{system}", lambda: _elementwise_rates_uncached(system))


def _elementwise_rates_uncached(system: str) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(floor seconds, bytes/s, sources) from the quantize collections: the lowest floor and the highest rate
    any framework's reached (``KernelTables.elementwise``)."""
    floors: list[tuple[float, str]] = []
    rates: list[tuple[float, str]] = []
    for fw in FRAMEWORKS:
        path = table_path(system, "quantize", fw, "scale_matrix_perf.parquet")
        if path is None:
            continue
        t = read(path)
        elements = _np(t, "m") * _np(t, "k")
        lat = _np(t, "latency") * 1e-3
        ok = lat > 0
        if ok.sum() < 20:
            continue
        elements, lat = elements[ok], lat[ok]
        small, large = elements <= np.quantile(elements, 0.1), elements >= np.quantile(elements, 0.9)
        floors.append((float(np.median(lat[small])), _relative(path)))
        rates.append((float(np.median(3.0 * elements[large] / lat[large])), _relative(path)))
    if not floors:
        return None
    floor, rate = min(floors), max(rates)
    sources = floor[1] if floor[1] == rate[1] else f"floor {floor[1]}, rate {rate[1]}"
    return np.array(floor[0]), np.array(rate[0]), np.array(sources)


def _gemm_cube_uncached(system: str, dtype: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    parts = []
    for fw in FRAMEWORKS:
        for path in table_paths(system, "gemm", fw, "gemm_perf.parquet"):
            t = _read_gemm(path, dtype)
            if t.num_rows:
                parts.append(t)
                break
    if not parts:
        return None
    t = pa.concat_tables(parts)
    m, n, k = (_np(t, c) for c in ("m", "n", "k"))
    lat = _np(t, "latency") * 1e-3
    mu, nu, ku = np.unique(m), np.unique(n), np.unique(k)
    cube = np.full((mu.size, nu.size, ku.size), np.inf)
    np.minimum.at(cube, (np.searchsorted(mu, m), np.searchsorted(nu, n), np.searchsorted(ku, k)), lat)
    for j in range(nu.size):
        _fill_gaps(cube[:, j, :], mu, ku)
    return mu, nu, ku, cube


def _read_gemm(path: Path, dtype: str) -> pa.Table:
    """The (m, n, k, latency) rows of one GEMM format; Parquet tables are large, so filtered while read."""
    if path.suffix == ".csv":
        return _where(read(path), gemm_dtype=dtype).select(["m", "n", "k", "latency"])
    import pyarrow.parquet as pq

    return pq.read_table(path, columns=["m", "n", "k", "latency"], filters=[("gemm_dtype", "=", dtype)])
