"""Fit an AMD family's kernel time factors on AMD's own tuned-kernel tables (ROCm/aiter).

No aiconfigurator-core table covers an AMD GPU, so CDNA parts are priced by the transfer model (NVIDIA-fitted
efficiency on the datasheet roofline) times per-family factors. AITER, the kernel library SGLang and vLLM run on
ROCm, ships the result of tuning its GEMMs and fused MoE for each shape it serves: ``aiter/configs/**/*tuned_gemm*.csv``
one row per (GPU, M, N, K), ``*tuned*fmoe*.csv`` one per (CUs, tokens, hidden, intermediate, experts, top-k, format),
each with the winning kernel's measured time in microseconds (``us``). Those rows are kernel-level
measurements of exactly the kernels a served model runs, so they may set the factors (``families.yaml``
``kernel_time_factors``): for each kernel class, the compute and memory multipliers that bring the transfer's time
for each row's shape to the time AITER measured, fitted by least squares on log time (soft-L1, as ``fit.py``).

The fused-MoE tables are fitted the same way, per weight format (``MOE_FORMATS``). Their rows route tokens
uniformly at random, where the NVIDIA tables the transfer's MoE classes were fitted on route by a power law
(exponent 1.01); aiconfigurator times both routings on the same kernels, and there the power law runs at 0.87-1.2x
the balanced time (median by tokens an expert; ``bench/bench_amd_kernels.py`` prints it). That is small beside the
gap the fit closes (the transfer with the family's generic factors read AITER's prefill-sized MoE 3-5x slow on
CDNA3), so the rows are read as timed and the routing's share stays inside the fit's spread.

The tables are not shipped (the package carries only the fitted factors and their source): point ``fit_family``
at a checkout of https://github.com/ROCm/aiter (``bench/bench_amd_kernels.py --aiter DIR``). What is shipped of
AMD's own timings is its custom all-reduce's on MI300X (``amd_allreduce_timings``), which check the mesh topology
of AMD entries (``Hardware.scaleup_topology``).
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import yaml

from scoville.catalog.hardware import Hardware, TimeFactors, load_hardware
from scoville.errors import UserError
from scoville.sim.kernels import work
from scoville.sim.kernels.fit import robust_sigma
from scoville.sim.kernels.transfer import OpCoeffs, TransferModel


@dataclass(frozen=True)
class Device:
    """A GPU as AITER's tables name it (``gfx`` target, compute-unit count) and the catalog entry of its family."""

    family: str
    gfx: str
    cu_num: int
    hardware: str


DEVICES = {
    "cdna3": Device("cdna3", "gfx942", 304, "mi300x"),    # MI300X and MI325X: one CDNA3 die, 304 CUs
    "cdna4": Device("cdna4", "gfx950", 256, "mi355x"),    # MI355X (MI350X shares the die at lower clocks)
}

# The GEMM tables by file name -> the transfer-model class their kernels are (weights x activations):
# a8w8 block-scaled FP8 (DeepSeek-style 128x128 scales), a8w8 per-token FP8, BF16, and a4w4 MXFP4 (CDNA4's FP4
# tensor cores, W4A4 as the transfer's nvfp4 class). Batched GEMMs (bmm), MXFP8 and mixed-width variants are left out.
GEMM_TABLES = (
    (re.compile(r"a8w8_blockscale.*tuned_gemm"), "gemm.fp8_block"),
    (re.compile(r"(?:^|_)a8w8_(?:bpreshuffle_)?(?:cktile_)?tuned_gemm"), "gemm.fp8"),
    (re.compile(r"(?:^|_)bf16_tuned_gemm"), "gemm.bfloat16"),
    (re.compile(r"a4w4_blockscale_tuned_gemm"), "gemm.nvfp4"),
)
# The fused-MoE tables' weight formats -> (the rows' q_type and weight dtype, the transfer class that format runs as):
# DeepSeek's block-scaled FP8, and MXFP4 (weights and activations in FP4 with 1x32 scales, CDNA4 only), which the
# transfer prices as the W4A8 MXFP4 class (same weight bytes; a decode step's experts are weight-bound either way).
MOE_FORMATS = {
    "fp8_block": ("per_1x128", "float8", "moe.fp8_block"),
    "mxfp4": ("per_1x32", "float4", "moe.w4a8_mxfp4_mxfp8"),
}
# Fewest tuned shapes of a MoE format the fit takes: two factors and a spread need decode- and prefill-sized rows
MIN_MOE_SHAPES = 8


@dataclass(frozen=True)
class Samples:
    """One class's shapes on one device: datasheet roofline times (compute, memory) and AITER's measured time,
    all in seconds, one entry per distinct shape (the fastest time where several tables tuned it)."""

    tc: np.ndarray
    tm: np.ndarray
    t: np.ndarray
    files: tuple[str, ...]


@dataclass(frozen=True)
class ClassFit:
    """A class's fitted factors and how the transfer then reads AITER's times (ratio = predicted / measured)."""

    cls: str
    factors: TimeFactors
    n: int
    compute_bound: int           # rows whose compute roofline exceeds their memory roofline
    ratio_median: float
    ratio_p10: float
    ratio_p90: float
    before_median: float         # the same read with the family's generic compute/memory_time_factor


def _tables(root: Path) -> list[Path]:
    configs = root / "aiter" / "configs"
    found = sorted(p for p in configs.rglob("*.csv") if "untuned" not in p.name) if configs.is_dir() else []
    if not found:
        raise UserError(f"no AITER tuned tables under {configs}: pass the root of a checkout of "
                        "https://github.com/ROCm/aiter (git clone --depth 1 https://github.com/ROCm/aiter)")
    return found


def _rows(path: Path) -> Iterator[dict[str, str]]:
    with path.open(newline="") as f:
        yield from csv.DictReader(f)


def _number(row: dict[str, str], key: str) -> float | None:
    try:
        value = float(row.get(key) or "nan")
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def gemm_samples(root: Path, device: Device, hw: Hardware) -> dict[str, Samples]:
    """Every tuned GEMM shape of ``device`` in the AITER checkout at ``root``, per transfer class. Rows whose tune
    failed (time zero, missing or not a number) are skipped."""
    best: dict[str, dict[tuple[int, int, int], float]] = {}
    files: dict[str, set[str]] = {}
    for path in _tables(root):
        cls = next((c for pattern, c in GEMM_TABLES if pattern.search(path.name)), None)
        if cls is None:
            continue
        for row in _rows(path):
            # the BF16 tables also hold FP16 rows (a ``dtype`` column the quantized tables do not have)
            if (row.get("gfx") != device.gfx or row.get("cu_num") != str(device.cu_num)
                    or "bfloat16" not in row.get("dtype", "bfloat16")):
                continue
            us, m, n, k = (_number(row, key) for key in ("us", "M", "N", "K"))
            if us is None or us <= 0 or not m or not n or not k:
                continue
            shape = (int(m), int(n), int(k))
            shapes = best.setdefault(cls, {})
            shapes[shape] = min(us, shapes.get(shape, math.inf))
            files.setdefault(cls, set()).add(path.name)
    out = {}
    for cls, shapes in best.items():
        m, n, k = np.array(list(shapes), dtype=float).T
        kernel = cls.partition(".")[2]
        flops, nbytes = work.gemm(m, n, k, kernel)
        out[cls] = Samples(tc=flops / hw.peak_flops(work.rate_key(kernel)), tm=nbytes / hw.hbm_bytes_per_s,
                           t=np.array(list(shapes.values())) * 1e-6, files=tuple(sorted(files[cls])))
    return out


def moe_samples(root: Path, device: Device, hw: Hardware, fmt: str = "fp8_block") -> Samples | None:
    """AITER's tuned fused-MoE shapes of ``device`` in weight format ``fmt`` (``MOE_FORMATS``; routed over ``expert``
    experts, ``topk`` a token, intermediate ``inter_dim`` as the rank holds it), as the transfer's class for that
    format sees them; None where AITER tuned none."""
    q_type, weights, cls = MOE_FORMATS[fmt]
    best: dict[tuple[int, ...], float] = {}
    names: set[str] = set()
    for path in _tables(root):
        if "fmoe" not in path.name:
            continue
        for row in _rows(path):
            if (row.get("cu_num") != str(device.cu_num) or q_type not in (row.get("q_type") or "")
                    or weights not in (row.get("q_dtype_w") or "")):
                continue
            values = [_number(row, key) for key in ("us", "token", "model_dim", "inter_dim", "expert", "topk")]
            if any(v is None or v <= 0 for v in values):
                continue
            us, *shape = (float(v) for v in values if v is not None)
            key = tuple(int(v) for v in shape)
            best[key] = min(us, best.get(key, math.inf))
            names.add(path.name)
    if not best:
        return None
    tokens, hidden, inter, experts, topk = np.array(list(best), dtype=float).T
    kernel = cls.partition(".")[2]
    flops, nbytes = work.moe(tokens, hidden, inter, topk, experts, 1.0, 1.0, kernel)
    return Samples(tc=flops / hw.peak_flops(work.rate_key(kernel)), tm=nbytes / hw.hbm_bytes_per_s,
                   t=np.array(list(best.values())) * 1e-6, files=tuple(sorted(names)))


def predicted(coeffs: OpCoeffs, s: Samples, compute: float, memory: float) -> np.ndarray:
    """The transfer's time for each sample with the given factors (seconds)."""
    return np.asarray(coeffs.time(s.tc * compute, s.tm * memory))


def fit_class(cls: str, s: Samples, transfer: TransferModel, before: tuple[float, float],
              source: str) -> ClassFit:
    """The (compute, memory) factors that make the transfer read ``s`` best, in log time, and the spread of what
    is left (``fit.robust_sigma``), which becomes the class's uncertainty on that platform."""
    from scipy.optimize import least_squares

    coeffs = transfer.op(cls)

    def residual(q: np.ndarray) -> np.ndarray:
        return np.log(predicted(coeffs, s, math.exp(q[0]), math.exp(q[1])) / s.t)

    q = least_squares(residual, np.zeros(2), loss="soft_l1", f_scale=0.1, bounds=(np.log(0.05), np.log(20.0))).x
    compute, memory = round(math.exp(q[0]), 3), round(math.exp(q[1]), 3)
    ratio = predicted(coeffs, s, compute, memory) / s.t
    sigma = round(robust_sigma(np.log(ratio)), 3)
    factors = TimeFactors(compute=compute, memory=memory, sigma=sigma, source=source)
    return ClassFit(cls=cls, factors=factors, n=len(s.t), compute_bound=int(np.sum(s.tc > s.tm)),
                    ratio_median=float(np.median(ratio)), ratio_p10=float(np.quantile(ratio, 0.1)),
                    ratio_p90=float(np.quantile(ratio, 0.9)),
                    before_median=float(np.median(predicted(coeffs, s, *before) / s.t)))


def fit_family(root: Path, family: str, transfer: TransferModel, checkout: str) -> list[ClassFit]:
    """Fit every GEMM class and fused-MoE format AITER tuned on ``family``'s GPU (a MoE format with fewer than
    ``MIN_MOE_SHAPES`` shapes is left to the generic factors); each factor's record names ``checkout`` (the tables'
    commit), the kind of table and the device."""
    if family not in DEVICES:
        raise UserError(f"no AITER device for family {family!r}; known: {', '.join(DEVICES)}")
    device = DEVICES[family]
    hw = load_hardware(device.hardware)
    before = (hw.eff("compute_time_factor"), hw.eff("memory_time_factor"))
    where = f"{device.gfx} {device.cu_num} CUs"
    fits = [fit_class(cls, s, transfer, before, f"{checkout} tuned GEMMs, {where}")
            for cls, s in sorted(gemm_samples(root, device, hw).items())]
    for fmt, (_, _, cls) in MOE_FORMATS.items():
        moe = moe_samples(root, device, hw, fmt)
        if moe is not None and len(moe.t) >= MIN_MOE_SHAPES:
            fits.append(fit_class(cls, moe, transfer, before, f"{checkout} tuned fused MoE ({fmt}), {where}"))
    return fits


def amd_allreduce_timings() -> tuple[str, dict[int, dict[float, float]]]:
    """AMD's timings of its custom all-reduce (``data/reference/amd_allreduce.yaml``, from its quick-reduce PRs): the
    system they were taken on and, per TP size, microseconds by message size in bytes."""
    raw = yaml.safe_load((resources.files("scoville") / "data" / "reference" / "amd_allreduce.yaml").read_text())
    return raw["hardware"], {int(tp): {float(size): float(us) for size, us in sizes.items()}
                             for tp, sizes in raw["latency_us"].items()}
