"""Accelerator/system catalog: datasheet figures in YAML files, no code per system.

A simulator that must predict hardware nobody has profiled can only start from
the datasheet, so every figure here is a *peak* with its unit and source in the
YAML file, and what fraction of the peak real kernels reach lives apart, in a
handful of per-*family* efficiency factors (``data/hardware/families.yaml``),
fitted once on public reference points and overridable per file. Users add a
system by writing one YAML file (``load_hardware("my_chip.yaml")``).

Units (fixed, so a YAML never has to say them twice):

* ``flops_tflops``: dense tensor TFLOPS (10^12 FLOP/s) per accelerator, no sparsity, per precision key
  (``fp4`` = NVFP4/MXFP4, ``fp8``, ``int8``, ``bf16``, ``fp16``; ``fp32`` where a model is served in FP32).
* ``hbm_capacity_gb``: usable capacity in decimal GB (10^9 bytes) as the driver reports it
  (nvidia-smi MiB x 1.048576 / 1000), not the marketing figure; ``hbm_bandwidth_tbps`` in TB/s (10^12 B/s).
* ``scaleup_bandwidth_gbps`` / ``scaleout_bandwidth_gbps``: GB/s (10^9 *bytes*/s), *unidirectional*, per
  accelerator (NVLink 5 = 900; a 400 Gbit/s NIC = 50). ``scaleup_topology`` says how a group of the domain's GPUs
  reaches it: ``switch`` (NVSwitch: any group, even two GPUs, at the full figure) or ``mesh`` (AMD's Infinity Fabric:
  one link to each peer, the figure being their sum, so n of the domain's d GPUs use (n-1)/(d-1) of it).
* latencies in microseconds; powers in watts per accelerator; cost in $ per accelerator-hour.
"""

from __future__ import annotations

import math
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import msgspec
import yaml

from scoville.errors import UserError

# Factors a family (or one system's YAML) may set; anything else in a YAML is a typo and is rejected.
# Kernel times no longer come from these: they come from measured kernel tables or the transfer model
# (scoville.sim.kernels). What remains is what no kernel table can say about a platform.
EFFICIENCY_KEYS = {
    "kernel_factor": "multiplies transfer-model kernel times: this platform's kernels relative to the NVIDIA stacks "
                     "the transfer was fitted on (1.0 = as good)",
    "kernel_sigma": "uncertainty (log-space) of kernel_factor, added to every transfer-model operator's own",
    "compute_time_factor": "multiplies the transfer model's compute roofline time: the NVIDIA stacks' achieved "
                           "fraction of peak FLOPS over this platform's, both from one microbenchmark (1.0 = as good)",
    "memory_time_factor": "multiplies the transfer model's memory roofline time: the NVIDIA stacks' achieved "
                          "fraction of HBM bandwidth over this platform's, both from one microbenchmark",
    "compute": "achievable fraction of dense peak FLOPS at saturation (power model: what 'busy' means)",
    "memory": "achievable fraction of HBM bandwidth at saturation (power model)",
    "scaleup": "achievable fraction of scale-up link bandwidth for a prefill-to-decode KV copy",
    "scaleout": "achievable fraction of scale-out NIC bandwidth for a prefill-to-decode KV copy",
}


# Kernel classes a family's ``kernel_time_factors`` may name: a transfer-model operator kind and a kernel format
# (``scoville.sim.kernels.work.KERNEL_WEIGHT_BYTES``), e.g. ``gemm.fp8_block``.
KERNEL_KINDS = ("gemm", "moe", "bmm", "gqa_decode", "gqa_prefill", "mla_decode", "mla_prefill")
KERNEL_FORMATS = ("bfloat16", "fp8", "fp8_block", "nvfp4", "w4a8_mxfp4_mxfp8", "w4a16_mxfp4", "int4_wo", "w4a16_int4",
                  "float32")


class TimeFactors(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Multipliers on one kernel class's transfer-model compute and memory roofline times, where this platform's own
    kernels were timed per shape (a vendor's tuned-kernel tables) and fitted against the transfer: for that class
    they replace ``compute_time_factor`` / ``memory_time_factor`` (a generic microbenchmark's) and ``kernel_factor``,
    and ``sigma``, the fit's spread, replaces the transfer's held-out error and ``kernel_sigma``."""

    compute: float
    memory: float
    sigma: float            # log-space spread of the fit's residuals: the class's uncertainty on this platform
    source: str = ""


def _check_time_factors(where: str, factors: dict[str, TimeFactors]) -> None:
    for cls, f in factors.items():
        kind, _, fmt = cls.partition(".")
        if kind not in KERNEL_KINDS or fmt not in KERNEL_FORMATS:
            raise ValueError(f"{where}.{cls} is not a kernel class: write KIND.FORMAT with KIND one of "
                             f"{', '.join(KERNEL_KINDS)} and FORMAT one of {', '.join(KERNEL_FORMATS)}")
        for name, value in (("compute", f.compute), ("memory", f.memory)):
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{where}.{cls}.{name} must be a finite number > 0, got {value}")
        if not (math.isfinite(f.sigma) and f.sigma >= 0):
            raise ValueError(f"{where}.{cls}.sigma must be a finite number >= 0, got {f.sigma}")


class MissingRate(UserError):
    """The entry lacks a rate the deployment needs (an FP32 model on an entry without ``flops_tflops.fp32``): no
    layout of it would have one, so a search stops with this instead of trying the next layout."""


class Hardware(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One accelerator as a serving system sees it (per GPU/package, not per superchip or rack)."""

    name: str
    display_name: str
    vendor: str
    family: str
    flops_tflops: dict[str, float]
    hbm_capacity_gb: float
    hbm_bandwidth_tbps: float
    scaleup_bandwidth_gbps: float
    scaleup_domain: int
    scaleout_bandwidth_gbps: float
    rated_watts: float
    scaleup_latency_us: float = 3.0
    scaleout_latency_us: float = 10.0
    all_in_watts: float | None = None
    measured_watts: float | None = None
    idle_watts: float | None = None
    runtime_reserve_gb: float = 3.9
    cost_per_hour: dict[str, float] = {}
    efficiency: dict[str, float] = {}
    scaleup_topology: Literal["switch", "mesh"] = "switch"
    # per kernel class (``gemm.fp8_block``): this file's own fitted time factors, over its family's
    kernel_time_factors: dict[str, TimeFactors] = {}
    # Measured kernel tables, if any: an aiconfigurator-core or scoville system (b200_sxm, epyc_zen4_2vcpu ...),
    # or a folder of a user's own (bench/measure_cpu_kernels.py --out), absolute once parsed
    kernel_tables: str | None = None
    # Log-space spread of those tables across the machines the entry stands for, beyond a table's own error:
    # 0 where the tables' machine is the entry (a GPU SKU); shared cloud slices of one CPU model differ
    kernel_tables_sigma: float = 0.0
    preliminary: bool = False
    notes: str = ""
    sources: list[str] = []

    def __post_init__(self) -> None:
        positive = {
            "hbm_capacity_gb": self.hbm_capacity_gb,
            "hbm_bandwidth_tbps": self.hbm_bandwidth_tbps,
            "scaleup_bandwidth_gbps": self.scaleup_bandwidth_gbps,
            "scaleout_bandwidth_gbps": self.scaleout_bandwidth_gbps,
            "rated_watts": self.rated_watts,
            "scaleup_domain": self.scaleup_domain,
        }
        positive.update({f: v for f, v in (("rated_watts", self.rated_watts), ("all_in_watts", self.all_in_watts),
                                           ("measured_watts", self.measured_watts)) if v is not None})
        for field, value in positive.items():
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{field} must be a finite number > 0, got {value}")
        for field, value in (("scaleup_latency_us", self.scaleup_latency_us),
                             ("scaleout_latency_us", self.scaleout_latency_us),
                             ("runtime_reserve_gb", self.runtime_reserve_gb),
                             ("kernel_tables_sigma", self.kernel_tables_sigma)):
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{field} must be a finite number >= 0, got {value}")
        for key, value in self.flops_tflops.items():
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"flops_tflops.{key} must be a finite number > 0, got {value}")
        if not self.flops_tflops:
            raise ValueError("flops_tflops needs at least one precision, e.g. {bf16: 989}")
        for key, value in self.efficiency.items():
            if key not in EFFICIENCY_KEYS:
                raise ValueError(f"efficiency.{key} is not a known factor (known: {', '.join(EFFICIENCY_KEYS)})")
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"efficiency.{key} must be a positive number, got {value!r}")
        _check_time_factors("kernel_time_factors", self.kernel_time_factors)
        if self.family not in _families():
            known = ", ".join(sorted(k for k in _families() if k != "default"))
            raise ValueError(f"family {self.family!r} is unknown (known: {known}); "
                             "add it to data/hardware/families.yaml or pick the closest")

    # -- derived figures the cost model uses -------------------------------------------------
    @property
    def hbm_bytes(self) -> float:
        return self.hbm_capacity_gb * 1e9

    @property
    def hbm_bytes_per_s(self) -> float:
        return self.hbm_bandwidth_tbps * 1e12

    def scaleup_bytes_per_s(self, ranks: int) -> float:
        """The scale-up bandwidth (bytes/s, each way) a GPU has towards the others of a group of ``ranks`` GPUs in
        its domain: all of it behind a switch; on a mesh, only the links to those peers (a pair of MI300X shares
        one 64 GB/s link, a TP4 group three), which AMD's own all-reduce timings on MI300X show
        (``data/hardware/mi300x.yaml``)."""
        if self.scaleup_topology == "switch" or self.scaleup_domain < 2:
            return self.scaleup_bandwidth_gbps * 1e9
        peers = min(max(ranks, 2), self.scaleup_domain) - 1
        return self.scaleup_bandwidth_gbps * 1e9 * peers / (self.scaleup_domain - 1)

    def peak_flops(self, precision: str) -> float:
        """Dense peak FLOP/s for a precision; falls back to the nearest wider format the chip has.

        A chip without FP4 tensor cores (Hopper) runs FP4 weights by upcasting to FP8/BF16, so that
        is the rate it reaches. FP32 has nothing wider to fall back to: an entry without it cannot price a model
        served in FP32, and says so.
        """
        if precision == "fp32":
            if "fp32" not in self.flops_tflops:
                raise MissingRate(f"{self.name}: flops_tflops has no fp32 rate, which a model served in FP32 runs at; "
                                f"add flops_tflops.fp32 to its hardware file or serve the model in bf16")
            return self.flops_tflops["fp32"] * 1e12
        order = ["fp4", "fp6", "fp8", "int8", "bf16", "fp16"]
        start = order.index(precision) if precision in order else order.index("bf16")
        for key in order[start:]:
            if key in self.flops_tflops:
                return self.flops_tflops[key] * 1e12
        return max(self.flops_tflops.values()) * 1e12

    def eff(self, key: str) -> float:
        """Efficiency factor: this file's override, else its family's value, else the global prior."""
        if key in self.efficiency:
            return self.efficiency[key]
        fam = _families().get(self.family, {})
        if key in fam:
            return fam[key]
        return _families()["default"][key]

    def kernel_time_factors_in_force(self) -> dict[str, TimeFactors]:
        """Every kernel class fitted on this platform's own kernels: its family's, with this file's over them."""
        return {**_family_time_factors().get(self.family, {}), **self.kernel_time_factors}

    def own_time_factors(self, kernel_class: str) -> TimeFactors | None:
        """The factors fitted on this platform's own kernels of a class, if any."""
        return self.kernel_time_factors_in_force().get(kernel_class)

    def time_factors(self, kernel_class: str) -> tuple[float, float]:
        """(compute, memory) multipliers on a kernel class's transfer-model roofline times: the class's own fitted
        factors where its kernels were timed, else the platform's ``compute_time_factor`` / ``memory_time_factor``."""
        own = self.own_time_factors(kernel_class)
        if own is not None:
            return own.compute, own.memory
        return self.eff("compute_time_factor"), self.eff("memory_time_factor")

    def platform_factor(self) -> float:
        """Multiplier on transfer-model kernel times for this platform (``kernel_factor``)."""
        return self.eff("kernel_factor")

    def platform_sigma(self) -> float:
        """Log-space uncertainty of :meth:`platform_factor`."""
        return self.eff("kernel_sigma")

    def power_watts(self, mode: str = "rated") -> float:
        """Power per accelerator for per-kW metrics: ``rated`` (chip TDP), ``all-in`` (InferenceX), ``measured``."""
        if mode == "rated":
            return self.rated_watts
        if mode in ("all-in", "all_in", "allin"):
            if self.all_in_watts is None:
                raise UserError(f"hardware {self.name} has no all-in power; "
                                "add all_in_watts to its YAML or use --power rated")
            return self.all_in_watts
        if mode == "measured":
            if self.measured_watts is None:
                raise UserError(f"hardware {self.name} has no measured power; add measured_watts or use --power rated")
            return self.measured_watts
        raise UserError(f"unknown power mode {mode!r}; use rated, all-in or measured")

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for manifests, with the efficiency factors and kernel-class factors actually in force spelled
        out (the ``*_in_force`` entries: derived from the family, not fields of a hardware file)."""
        d = msgspec.to_builtins(self)
        d["efficiency_in_force"] = {k: self.eff(k) for k in EFFICIENCY_KEYS}
        d["kernel_time_factors_in_force"] = {c: msgspec.to_builtins(f)
                                             for c, f in sorted(self.kernel_time_factors_in_force().items())}
        return d


_NOT_SYSTEMS = {"families", "frameworks", "kernel_transfer"}


@lru_cache(maxsize=1)
def _data_dir() -> Path:
    """The shipped entries' folder (fixed for the process; looked up once: a search loads hardware per candidate)."""
    return Path(str(resources.files("scoville") / "data" / "hardware"))


@lru_cache(maxsize=1)
def _families_file() -> dict[str, Any]:
    """``families.yaml`` as parsed, once a process: its efficiencies and kernel-class factors are read from it."""
    raw: dict[str, Any] = yaml.safe_load((_data_dir() / "families.yaml").read_text())
    return raw


@lru_cache(maxsize=1)
def _families() -> dict[str, dict[str, float]]:
    raw = _families_file()
    fams = {k: v["efficiency"] for k, v in raw.items() if isinstance(v, dict) and "efficiency" in v}
    missing = set(EFFICIENCY_KEYS) - set(fams["default"])
    if missing:  # a packaging bug, not a user error
        raise RuntimeError(f"families.yaml default lacks {sorted(missing)}")
    return fams


@lru_cache(maxsize=1)
def _family_time_factors() -> dict[str, dict[str, TimeFactors]]:
    """Each family's per-kernel-class time factors (``kernel_time_factors:`` in families.yaml)."""
    out = {}
    for name, fam in _families_file().items():
        if isinstance(fam, dict) and fam.get("kernel_time_factors"):
            factors = msgspec.convert(fam["kernel_time_factors"], dict[str, TimeFactors])
            _check_time_factors(f"families.yaml {name}.kernel_time_factors", factors)
            out[name] = factors
    return out


def list_hardware() -> list[str]:
    """Names of the shipped systems."""
    return sorted(p.stem for p in _data_dir().glob("*.yaml") if p.stem not in _NOT_SYSTEMS)


def _parse(path: Path) -> Hardware:
    """Parse (cached per file and modification time: a search builds many cost models of one system)."""
    try:
        stamp = path.stat().st_mtime_ns
    except OSError as e:
        raise UserError(f"cannot read hardware file {path}: {e.strerror}") from None
    return _parse_cached(str(path.absolute()), stamp)


@lru_cache(maxsize=64)
def _parse_cached(name: str, stamp: int) -> Hardware:
    path = Path(name)
    try:
        raw = yaml.safe_load(path.read_bytes().decode("utf-8"))
    except OSError as e:
        raise UserError(f"cannot read hardware file {path}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise UserError(f"{path}: not a text file (not UTF-8); "
                        "a hardware file is YAML like data/hardware/h200.yaml") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise UserError(f"{path}:{where} is not valid YAML ({getattr(e, 'problem', e)}); fix the syntax") from None
    if not isinstance(raw, dict):
        raise UserError(f"{path}: a hardware file must be a YAML mapping of fields (name, flops_tflops, ...)")
    raw.setdefault("name", path.stem)
    raw.setdefault("display_name", raw["name"])
    tables = raw.get("kernel_tables")
    if isinstance(tables, str) and ("/" in tables or tables.startswith((".", "~")) or (path.parent / tables).is_dir()):
        folder = (path.parent / Path(tables).expanduser()).resolve()
        if not folder.is_dir():
            raise UserError(f"{path}: kernel_tables folder {folder} does not exist; give the folder that "
                            "bench/measure_cpu_kernels.py --out wrote, or a system name such as h100_sxm")
        raw["kernel_tables"] = str(folder)
    try:
        return msgspec.convert(raw, Hardware, strict=False)
    except msgspec.ValidationError as e:
        msg = str(e).replace("$.", "field ").replace(" - at `", " (at `")
        if "(at `" in msg:
            msg += ")"
        raise UserError(f"{path}: {msg}; see data/hardware/h200.yaml for the format") from None
    except ValueError as e:
        raise UserError(f"{path}: {e}") from None


def hardware_file(name_or_path: str) -> Path:
    """The YAML file of a shipped system by name (case-insensitive: h100 ... jalapeno) or of a user's by path."""
    p = Path(name_or_path).expanduser()
    if p.suffix in (".yaml", ".yml") or p.exists():
        if not p.exists():
            raise UserError(f"hardware file {p} does not exist")
        return p
    key = name_or_path.strip().lower().replace("_", "-")
    aliases = {"h100-sxm": "h100", "h200-sxm": "h200", "b200-sxm": "b200", "b300-sxm": "b300",
               "gb200-nvl72": "gb200", "gb300-nvl72": "gb300", "jalapeño": "jalapeno"}
    key = aliases.get(key, key)
    path = _data_dir() / f"{key}.yaml"
    if key in _NOT_SYSTEMS or not path.exists():
        raise UserError(f"unknown hardware {name_or_path!r}; "
                        f"choose one of {', '.join(list_hardware())} or give a YAML path")
    return path


def load_hardware(name_or_path: str) -> Hardware:
    """A shipped system by name or a user YAML by path (:func:`hardware_file`)."""
    return _parse(hardware_file(name_or_path))
