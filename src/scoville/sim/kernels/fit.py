"""Fit the transfer model on measured kernel tables, and say how well it transfers.

For each operator class every measured time on every NVIDIA system with tables becomes a sample
``(t_c, t_m, t)``: the roofline times of the operator's work on that system's *datasheet* (our
catalog YAML, the same figures a datasheet-only chip is described by) and the measured time. One set
of coefficients per class is fitted on all systems together (least squares on log time, soft-L1 so a
few odd kernels do not steer it), and the transfer error is measured honestly: refit without one
whole *generation* (Ampere, Ada, Hopper, Blackwell) and predict that generation's tables. That
held-out error is what a prediction for an unprofiled chip can expect, and it is shipped as the
class's ``sigma``.

Needs ``aiconfigurator-core`` (the tables) and SciPy (the least squares): ``pip install
'scoville[silicon]'``. Run through ``bench/bench_kernel_transfer.py`` (prints the error tables;
``--write`` refreshes ``data/hardware/kernel_transfer.yaml``).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np
import pyarrow.compute as pc

from scoville.catalog.hardware import Hardware, load_hardware
from scoville.errors import UserError
from scoville.sim.kernels import tables, work
from scoville.sim.kernels.transfer import CommCoeffs, OpCoeffs, TransferModel

# Measured systems -> (catalog name, generation). Generations are held out together: twins such as
# B200/GB200 would otherwise make the held-out error look better than a truly new chip would see.
FIT_SYSTEMS: dict[str, tuple[str, str]] = {
    "a100_sxm": ("a100", "ampere"), "l40s": ("l40s", "ada"),
    "h100_sxm": ("h100", "hopper"), "h200_sxm": ("h200", "hopper"),
    "b200_sxm": ("b200", "blackwell"), "b300_sxm": ("b300", "blackwell"),
    "gb200": ("gb200", "blackwell"), "gb300": ("gb300", "blackwell"),
}
GEMM_FORMATS = ("bfloat16", "fp8", "fp8_block", "nvfp4")
MOE_FORMATS = ("bfloat16", "fp8_block", "nvfp4", "w4a8_mxfp4_mxfp8", "w4a16_mxfp4", "int4_wo")
MAX_SAMPLES = 2000          # per (system, framework, class): enough to pin 5 coefficients, quick to fit


@dataclass
class Samples:
    """Roofline times and measured times of one class, per system."""

    tc: dict[str, np.ndarray] = field(default_factory=dict)
    tm: dict[str, np.ndarray] = field(default_factory=dict)
    t: dict[str, np.ndarray] = field(default_factory=dict)

    def add(self, system: str, tc: np.ndarray, tm: np.ndarray, t: np.ndarray, rng: np.random.Generator) -> None:
        ok = np.isfinite(t) & (t > 0) & np.isfinite(tc) & np.isfinite(tm)
        tc, tm, t = tc[ok], tm[ok], t[ok]
        if t.size > MAX_SAMPLES:
            keep = rng.choice(t.size, MAX_SAMPLES, replace=False)
            tc, tm, t = tc[keep], tm[keep], t[keep]
        for store, arr in ((self.tc, tc), (self.tm, tm), (self.t, t)):
            store[system] = np.concatenate([store[system], arr]) if system in store else arr

    def pooled(self, systems: Iterable[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        names = [s for s in systems if s in self.t]
        if not names:
            return np.empty(0), np.empty(0), np.empty(0)
        return (np.concatenate([self.tc[s] for s in names]), np.concatenate([self.tm[s] for s in names]),
                np.concatenate([self.t[s] for s in names]))


def _hw(system: str) -> Hardware:
    return load_hardware(FIT_SYSTEMS[system][0])


def _rate(hw: Hardware, dtype: str) -> float:
    return hw.peak_flops(work.rate_key(dtype))


def _col(t, name: str) -> np.ndarray:
    return t[name].to_numpy(zero_copy_only=False).astype(np.float64)


_NOT_SHAPE = {"framework", "version", "device", "op_name", "kernel_source", "latency", "backend", "step_time"}


def fastest_per_shape(system: str, op: str, framework: str, filename: str):
    """A table with one row per shape: the fastest kernel measured for it (what a framework would pick)."""
    path = tables.table_path(system, op, framework, filename)
    if path is None:
        return None
    t = tables.read(path)
    keys = [c for c in t.column_names if c not in _NOT_SHAPE]
    return t.group_by(keys).aggregate([("latency", "min")]).rename_columns(keys + ["latency"])


def collect(rng: np.random.Generator) -> dict[str, Samples]:
    """Samples of every operator class from every measured system and framework."""
    out: dict[str, Samples] = {}

    def put(cls: str, system: str, flops: np.ndarray, nbytes: np.ndarray, rate: float, hw: Hardware,
            lat_ms: np.ndarray) -> None:
        out.setdefault(cls, Samples()).add(system, flops / rate, nbytes / hw.hbm_bytes_per_s, lat_ms * 1e-3, rng)

    for system in FIT_SYSTEMS:
        hw = _hw(system)
        for dtype in GEMM_FORMATS:      # the fastest kernel any framework measured, as the measured backend uses
            cube = tables.KernelTables(system, "vllm").gemm(dtype)
            if cube is None:
                continue
            ms, ns, ks, t = cube
            m, n, k = (a.ravel() for a in np.meshgrid(ms, ns, ks, indexing="ij"))
            real = (m <= 16384) & (n <= 32768) & (k <= 32768) & (n >= 256) & (k >= 256)
            f, b = work.gemm(m[real], n[real], k[real], dtype)
            put(f"gemm.{dtype}", system, f, b, _rate(hw, dtype), hw, t.ravel()[real] * 1e3)
        for fw in tables.FRAMEWORKS:
            t = fastest_per_shape(system, "moe", fw, "moe_perf.parquet")
            if t is not None:
                t = t.filter(pc.equal(t["distribution"], "power_law_1.01"))
                for dtype in MOE_FORMATS:
                    s = t.filter(pc.equal(t["moe_dtype"], dtype))
                    if s.num_rows:
                        f, b = work.moe(_col(s, "num_tokens"), _col(s, "hidden_size"), _col(s, "inter_size"),
                                        _col(s, "topk"), _col(s, "num_experts"), _col(s, "moe_tp_size"),
                                        _col(s, "moe_ep_size"), dtype)
                        put(f"moe.{dtype}", system, f, b, _rate(hw, dtype), hw, _col(s, "latency"))
            t = fastest_per_shape(system, "attention", fw, "generation_attention_perf.parquet")
            if t is not None:
                if "window_size" in t.column_names:
                    t = t.filter(pc.equal(t["window_size"], 0))
                for kv in ("bfloat16", "fp8"):
                    s = t.filter(pc.equal(t["kv_cache_dtype"], kv))
                    if s.num_rows:
                        f, b = work.gqa_decode(_col(s, "batch_size"), _col(s, "step"), _col(s, "num_heads"),
                                               _col(s, "num_key_value_heads"), _col(s, "head_dim"), kv)
                        put(f"gqa_decode.{kv}", system, f, b, hw.peak_flops(work.attention_rate_key(kv)), hw,
                            _col(s, "latency"))
            t = fastest_per_shape(system, "attention", fw, "context_attention_perf.parquet")
            if t is not None:
                if "window_size" in t.column_names:
                    t = t.filter(pc.equal(t["window_size"], 0))
                f, b = work.gqa_prefill(_col(t, "batch_size"), _col(t, "isl"), _col(t, "num_heads"),
                                        _col(t, "num_key_value_heads"), _col(t, "head_dim"))
                put("gqa_prefill.bfloat16", system, f, b, hw.peak_flops("bf16"), hw, _col(t, "latency"))
            t = fastest_per_shape(system, "mla_bmm", fw, "mla_bmm_perf.parquet")
            if t is not None:
                f, b = work.bmm(_col(t, "num_tokens"), _col(t, "num_heads"), 128, 512)
                put("bmm.bfloat16", system, f, b, hw.peak_flops("bf16"), hw, _col(t, "latency"))
        t = fastest_per_shape(system, "mla", "sglang", "generation_mla_perf.parquet")
        if t is not None:
            t = t.filter(pc.equal(t["tp_size"], 1))
            for kv in ("bfloat16", "fp8"):
                s = t.filter(pc.equal(t["kv_cache_dtype"], kv))
                if s.num_rows:
                    f, b = work.mla_decode(_col(s, "batch_size"), _col(s, "step"), _col(s, "num_heads"), 512, 64, kv)
                    put(f"mla_decode.{kv}", system, f, b, hw.peak_flops(work.attention_rate_key(kv)), hw,
                        _col(s, "latency"))
        t = fastest_per_shape(system, "mla", "sglang", "context_mla_perf.parquet")
        if t is not None:
            t = t.filter(pc.equal(t["tp_size"], 1))
            f, b = work.mla_prefill(_col(t, "batch_size"), _col(t, "isl"), _col(t, "num_heads"), 192, 128)
            put("mla_prefill.bfloat16", system, f, b, hw.peak_flops("bf16"), hw, _col(t, "latency"))
    return out


def _comm_samples(rng: np.random.Generator) -> dict[str, dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]]:
    """{class: {system: (bytes on the wire per rank ÷ link bandwidth, log2 ranks, seconds)}}."""
    out: dict[str, dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]] = {"allreduce": {}, "alltoall": {}}
    for system in FIT_SYSTEMS:
        hw = _hw(system)
        kt = tables.KernelTables(system, "vllm")
        for gpus in (2, 4, 8):
            link = hw.scaleup_bytes_per_s(gpus)
            for cls, got in (("allreduce", kt.allreduce(gpus) or kt.nccl("all_reduce", gpus)),
                             ("alltoall", kt.nccl("alltoall", gpus))):
                if got is None:
                    continue
                size, lat = got
                wire = (2.0 if cls == "allreduce" else 1.0) * (gpus - 1) / gpus * size
                prev = out[cls].get(system)
                x, r, y = wire / link, np.full(size.size, np.log2(gpus)), lat
                if prev is not None:
                    x, r, y = (np.concatenate(p) for p in zip(prev, (x, r, y), strict=True))
                out[cls][system] = (x, r, y)
    return out


def _fit_op(tc: np.ndarray, tm: np.ndarray, t: np.ndarray) -> tuple[float, ...]:
    from scipy.optimize import least_squares

    def model(q: np.ndarray) -> np.ndarray:
        c = OpCoeffs(ec=float(np.exp(q[0])), tau_c_us=float(np.exp(q[1])), em=float(np.exp(q[2])),
                     tau_m_us=float(np.exp(q[3])), p=float(1.0 + np.exp(q[4])), sigma=0.0)
        return np.log(c.time(tc, tm) / t)

    x0 = np.log([0.6, 3.0, 0.7, 3.0, 2.0])
    res = least_squares(model, x0, loss="soft_l1", f_scale=0.1, bounds=(np.log([0.02, 1e-3, 0.02, 1e-3, 1e-2]),
                                                                         np.log([1.2, 500.0, 1.2, 500.0, 20.0])))
    q = res.x
    return float(np.exp(q[0])), float(np.exp(q[1])), float(np.exp(q[2])), float(np.exp(q[3])), float(1.0 + np.exp(q[4]))


def _coeffs(params: tuple[float, ...], sigma: float, samples: int) -> OpCoeffs:
    ec, tc, em, tm, p = params
    return OpCoeffs(ec=round(ec, 4), tau_c_us=round(tc, 3), em=round(em, 4), tau_m_us=round(tm, 3), p=round(p, 3),
                    sigma=round(sigma, 4), samples=samples)


@dataclass
class HeldOut:
    """Error of a class on one held-out generation (fitted without it)."""

    cls: str
    generation: str
    n: int
    median_abs: float     # median |pred/meas - 1|
    p90_abs: float
    bias: float           # median pred/meas - 1


def _errors(pred: np.ndarray, meas: np.ndarray) -> tuple[float, float, float, np.ndarray]:
    ratio = pred / meas
    err = np.abs(ratio - 1.0)
    return float(np.median(err)), float(np.quantile(err, 0.9)), float(np.median(ratio) - 1.0), np.log(ratio)


def robust_sigma(log_err: np.ndarray) -> float:
    """Typical size of a log error: its median (the bias a held-out generation sees) and its spread
    (1.4826 x median absolute deviation, the normal-equivalent standard deviation), combined. Robust to
    the few pathological kernels a table holds, which an RMS would let set everyone's band."""
    med = float(np.median(log_err))
    mad = float(np.median(np.abs(log_err - med)))
    return float(np.hypot(med, 1.4826 * mad))


def fit_all(seed: int = 0, progress: Callable[[str], None] | None = None) -> tuple[TransferModel, list[HeldOut]]:
    """Fit every class on all systems; hold out each generation in turn to measure transfer error."""
    if tables.data_dir() is None:
        raise UserError("the measured kernel tables are not installed; pip install 'scoville[silicon]'")
    rng = np.random.default_rng(seed)
    samples = collect(rng)
    generations = sorted({g for _, g in FIT_SYSTEMS.values()})
    ops: dict[str, OpCoeffs] = {}
    report: list[HeldOut] = []
    for cls, smp in sorted(samples.items()):
        if progress:
            progress(cls)
        logs = []
        for gen in generations:
            held = [s for s, (_, g) in FIT_SYSTEMS.items() if g == gen and s in smp.t]
            rest = [s for s in smp.t if s not in held]
            if not held or not rest:
                continue
            params = _fit_op(*smp.pooled(rest))
            tc, tm, t = smp.pooled(held)
            pred = _coeffs(params, 0.0, 0).time(tc, tm)
            med, p90, bias, lr = _errors(pred, t)
            report.append(HeldOut(cls, gen, int(t.size), med, p90, bias))
            logs.append(lr)
        tc, tm, t = smp.pooled(smp.t)
        params = _fit_op(tc, tm, t)
        if logs:
            sigma = robust_sigma(np.concatenate(logs))
        else:   # one generation only (Blackwell-only formats): the in-sample spread, widened
            lr = np.log(_coeffs(params, 0.0, 0).time(tc, tm) / t)
            sigma = 1.5 * robust_sigma(lr)
            report.append(HeldOut(cls, "in-sample only", int(t.size), *_errors(np.exp(lr) * t, t)[:3]))
        ops[cls] = _coeffs(params, sigma, int(t.size))
    comm: dict[str, CommCoeffs] = {}
    for cls, per_system in _comm_samples(rng).items():
        if not per_system:
            continue
        x = np.concatenate([v[0] for v in per_system.values()])
        r = np.concatenate([v[1] for v in per_system.values()])
        y = np.concatenate([v[2] for v in per_system.values()])
        a = np.stack([np.full_like(x, 1e-6), r * 1e-6, x], axis=1)
        w = 1.0 / y                                   # relative error: small messages matter as much as large
        coef, *_ = np.linalg.lstsq(a * w[:, None], np.ones_like(y), rcond=None)
        pred = a @ coef
        lr = np.log(np.maximum(pred, 1e-9) / y)
        comm[cls] = CommCoeffs(alpha_us=round(float(coef[0]), 3), alpha_log2_us=round(float(coef[1]), 3),
                               beta=round(float(coef[2]), 4), sigma=round(float(np.sqrt(np.mean(lr ** 2))), 4),
                               samples=int(y.size))
    version = tables.package_version() or "unknown"
    fitted_on = tuple(s for s in FIT_SYSTEMS if tables.table_path(s, "gemm", "vllm", "gemm_perf.parquet"))
    source = f"aiconfigurator-core {version} measured tables, fitted {_dt.date.today().isoformat()}"
    model = TransferModel(ops=ops, comm=comm, source=source, fitted_on=fitted_on)
    return model, report


def to_yaml(model: TransferModel) -> str:
    """The coefficient file's text."""
    import msgspec
    import yaml

    body = {
        "source": model.source,
        "fitted_on": list(model.fitted_on),
        "ops": {k: msgspec.to_builtins(v) for k, v in sorted(model.ops.items())},
        "comm": {k: msgspec.to_builtins(v) for k, v in sorted(model.comm.items())},
    }
    head = ("# Transfer-model coefficients per operator class (scoville.sim.kernels.transfer), fitted on measured\n"
            "# kernel tables of several NVIDIA generations by `python bench/bench_kernel_transfer.py --write`.\n"
            "# sigma = RMS log error when the class's generation was held out of the fit (its uncertainty).\n")
    return head + yaml.safe_dump(body, sort_keys=False)
