"""The transfer model: operator time on hardware nobody profiled, from its datasheet alone.

For every operator class the time is a soft roofline with latency floors,

    t = ( ((t_c + τ_c) / e_c)^p + ((t_m + τ_m) / e_m)^p )^(1/p)

where ``t_c`` = FLOPs ÷ peak tensor rate and ``t_m`` = bytes ÷ HBM bandwidth are the datasheet roofline
times (``work.py``), ``e_c``/``e_m`` the best fraction of peak the class reaches, ``τ_c``/``τ_m`` the
fixed cost (launch, tail, synchronisation) that makes small kernels fall short of it, and ``p`` how
sharply the compute- and memory-bound regimes meet. So efficiency is a function of size (through
τ), arithmetic intensity (through the ratio t_c/t_m) and precision (one set per kernel format).

Collectives use ``t = α + β · bytes / link_bandwidth`` with α growing with log2(ranks).

The coefficients are fitted once on the measured tables of several NVIDIA generations (Ampere, Ada,
Hopper, Blackwell; ``fit.py``) and shipped in ``data/hardware/kernel_transfer.yaml`` with each class's
leave-one-generation-out error, which becomes that operator's uncertainty.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import yaml


class OpCoeffs(msgspec.Struct, frozen=True, kw_only=True):
    """Fitted coefficients of one operator class (times in microseconds)."""

    ec: float
    tau_c_us: float
    em: float
    tau_m_us: float
    p: float
    sigma: float            # log-space spread of the leave-one-generation-out error (the op's uncertainty)
    samples: int = 0

    def time(self, tc: Any, tm: Any) -> Any:
        """Seconds from roofline compute and memory times (scalars or arrays)."""
        a = (tc + self.tau_c_us * 1e-6) / self.ec
        b = (tm + self.tau_m_us * 1e-6) / self.em
        p = self.p
        if np.ndim(a) == 0 and np.ndim(b) == 0:
            return (float(a) ** p + float(b) ** p) ** (1.0 / p)
        return (np.asarray(a) ** p + np.asarray(b) ** p) ** (1.0 / p)


class CommCoeffs(msgspec.Struct, frozen=True, kw_only=True):
    """``t = (alpha_us + alpha_log2_us · log2(ranks))·1e-6 + beta · bytes_on_wire / link_bytes_per_s``."""

    alpha_us: float
    alpha_log2_us: float
    beta: float
    sigma: float
    samples: int = 0

    def time(self, nbytes: Any, ranks: int, link_bytes_per_s: float) -> Any:
        lat = (self.alpha_us + self.alpha_log2_us * math.log2(max(ranks, 2))) * 1e-6
        return lat + self.beta * nbytes / link_bytes_per_s


@dataclass(frozen=True)
class TransferModel:
    """All fitted classes plus where they came from."""

    ops: dict[str, OpCoeffs]
    comm: dict[str, CommCoeffs]
    source: str
    fitted_on: tuple[str, ...]

    def op(self, cls: str) -> OpCoeffs:
        """Coefficients of ``cls`` (e.g. ``gemm.fp8_block``); a format never measured borrows its nearest kin."""
        if cls in self.ops:
            return self.ops[cls]
        kind, _, fmt = cls.partition(".")
        for alt in _KIN.get(fmt, ()):
            if f"{kind}.{alt}" in self.ops:
                return self.ops[f"{kind}.{alt}"]
        raise KeyError(f"no transfer coefficients for {cls!r} (have {', '.join(sorted(self.ops))})")


# A kernel format without its own fit borrows the closest measured one (same weight width, then same math).
_KIN = {
    "w4a16_int4": ("int4_wo", "w4a16_mxfp4", "bfloat16"),
    "int4_wo": ("w4a16_mxfp4", "w4a16_int4", "bfloat16"),
    "w4a16_mxfp4": ("int4_wo", "bfloat16"),
    "w4a8_mxfp4_mxfp8": ("nvfp4", "fp8_block"),
    "nvfp4": ("w4a8_mxfp4_mxfp8", "fp8_block"),
    "fp8": ("fp8_block", "bfloat16"),
    "fp8_block": ("fp8", "bfloat16"),
    # no FP32 tables on any GPU collection: an FP32 kernel (a CPU serving FP32) is taken to reach BF16's share of
    # its own roofline, which is FP32's rate and bytes
    "float32": ("bfloat16",),
}

TRANSFER_FILE = "kernel_transfer.yaml"


def transfer_path() -> Path:
    return Path(str(resources.files("scoville") / "data" / "hardware" / TRANSFER_FILE))


@lru_cache(maxsize=4)
def load_transfer(path: str | None = None) -> TransferModel:
    """The shipped (or a given) coefficient file."""
    p = Path(path) if path else transfer_path()
    raw = yaml.safe_load(p.read_text())
    ops = {k: msgspec.convert(v, OpCoeffs) for k, v in (raw.get("ops") or {}).items()}
    comm = {k: msgspec.convert(v, CommCoeffs) for k, v in (raw.get("comm") or {}).items()}
    return TransferModel(ops=ops, comm=comm, source=str(raw.get("source", "")),
                         fitted_on=tuple(raw.get("fitted_on") or ()))
