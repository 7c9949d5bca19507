"""Fitting a CDNA family's GEMM and fused-MoE time factors on AITER-format tuned tables
(``scoville.sim.kernels.aiter_fit``).

The tables here are written by the test in AITER's own CSV layout, their times made by the transfer model with
known factors, so the fit has a right answer to find; the real tables are not shipped (bench_amd_kernels.py)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from scoville.catalog.hardware import load_hardware
from scoville.errors import UserError
from scoville.sim.kernels import aiter_fit, work
from scoville.sim.kernels.transfer import load_transfer

pytest.importorskip("scipy")

GEMM_HEADER = ["gfx", "cu_num", "M", "N", "K", "libtype", "kernelId", "splitK", "us", "kernelName", "tflops", "bw",
               "errRatio"]
MOE_HEADER = ["cu_num", "token", "model_dim", "inter_dim", "expert", "topk", "act_type", "dtype", "q_dtype_a",
              "q_dtype_w", "q_type", "use_g1u1", "doweight_stage1", "block_m", "ksplit", "us1", "kernelName1", "err1",
              "us2", "kernelName2", "err2", "us", "run_1stage", "tflops", "bw", "_tag"]


def _gemm_table(root: Path, name: str, rows: list[dict[str, object]]) -> None:
    path = root / "aiter" / "configs" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        out = csv.DictWriter(f, fieldnames=GEMM_HEADER, restval="")
        out.writeheader()
        out.writerows(rows)


def _shapes() -> list[tuple[int, int, int]]:
    rng = np.random.default_rng(0)
    m, n, k = 2 ** rng.integers(0, 14, 300), 256 * rng.integers(1, 64, 300), 256 * rng.integers(1, 64, 300)
    return [(int(a), int(b), int(c)) for a, b, c in np.stack([m, n, k], axis=1)]


def _timed_as(compute: float, memory: float, gfx: str = "gfx942", cu: int = 304) -> list[dict[str, object]]:
    """AITER rows for ``_shapes()`` whose times are the transfer's for MI300X's datasheet with these factors."""
    hw, coeffs = load_hardware("mi300x"), load_transfer().op("gemm.fp8_block")
    rows = []
    for m, n, k in _shapes():
        flops, nbytes = work.gemm(m, n, k, "fp8_block")
        t = coeffs.time(flops / hw.peak_flops("fp8") * compute, nbytes / hw.hbm_bytes_per_s * memory)
        rows.append({"gfx": gfx, "cu_num": cu, "M": m, "N": n, "K": k, "us": t * 1e6})
    return rows


def test_the_fit_recovers_the_factors_the_tables_were_timed_with(tmp_path: Path):
    """Other GPUs' rows, failed tunes (zero, empty, not a number) and untuned lists are ignored; a shape tuned in
    two tables counts once, at its faster time."""
    rows = _timed_as(1.7, 1.3)
    noise = [{**rows[0], "us": 0}, {**rows[1], "us": ""}, {**rows[2], "us": "inf"}, {**rows[3], "us": "n/a"}]
    _gemm_table(tmp_path, "a8w8_blockscale_tuned_gemm.csv", rows + noise + _timed_as(0.5, 0.5, "gfx950", 256))
    _gemm_table(tmp_path, "model_configs/a8w8_blockscale_tuned_gemm_ds_v3.csv", [{**r, "us": r["us"] * 3}
                                                                             for r in rows[:50]])
    _gemm_table(tmp_path, "a8w8_blockscale_untuned_gemm.csv", _timed_as(9.0, 9.0))
    fits = aiter_fit.fit_family(tmp_path, "cdna3", load_transfer(), "test tables")
    assert [f.cls for f in fits] == ["gemm.fp8_block"]
    fit = fits[0]
    assert fit.n == len(set(_shapes()))
    assert fit.factors.compute == pytest.approx(1.7, rel=0.02) and fit.factors.memory == pytest.approx(1.3, rel=0.02)
    assert fit.ratio_median == pytest.approx(1.0, abs=0.01)
    assert fit.factors.source == "test tables tuned GEMMs, gfx942 304 CUs"


def test_the_tables_name_their_kernel_class_by_file(tmp_path: Path):
    """Block-scaled FP8, per-token FP8 and BF16 tables are fitted as their own classes; batched GEMMs are not."""
    rows = _timed_as(1.0, 1.0)
    for name in ("a8w8_blockscale_bpreshuffle_tuned_gemm.csv", "a8w8_bpreshuffle_tuned_gemm.csv",
                 "model_configs/dsv3_bf16_tuned_gemm.csv", "bf16_tuned_batched_gemm.csv"):
        _gemm_table(tmp_path, name, rows)
    hw = load_hardware("mi300x")
    found = aiter_fit.gemm_samples(tmp_path, aiter_fit.DEVICES["cdna3"], hw)
    assert sorted(found) == ["gemm.bfloat16", "gemm.fp8", "gemm.fp8_block"]
    assert found["gemm.bfloat16"].files == ("dsv3_bf16_tuned_gemm.csv",)


def test_fused_moe_rows_of_the_device_are_read_per_weight_format(tmp_path: Path):
    path = tmp_path / "aiter" / "configs" / "model_configs" / "a8w8_blockscale_tuned_fmoe_ds_v3.csv"
    path.parent.mkdir(parents=True)
    base = {"model_dim": 7168, "inter_dim": 2048, "expert": 33, "topk": 9, "q_type": "QuantType.per_1x128",
            "q_dtype_w": "torch.float8_e4m3fnuz"}
    with path.open("w", newline="") as f:
        out = csv.DictWriter(f, fieldnames=MOE_HEADER, restval="")
        out.writeheader()
        out.writerows([{**base, "cu_num": 304, "token": 64, "us": 363.5},
                       {**base, "cu_num": 304, "token": 128, "us": 407.8},
                       {**base, "cu_num": 80, "token": 64, "us": 500.0},
                       {**base, "cu_num": 304, "token": 256, "us": 0.0},
                       {**base, "cu_num": 304, "token": 512, "us": 600.0, "q_type": "QuantType.per_Token"},
                       {**base, "cu_num": 304, "token": 64, "us": 150.0, "q_type": "QuantType.per_1x32",
                        "q_dtype_w": "torch.float4_e2m1fn_x2"}])
    mi300x = load_hardware("mi300x")
    s = aiter_fit.moe_samples(tmp_path, aiter_fit.DEVICES["cdna3"], mi300x)
    assert s is not None and list(s.t * 1e6) == pytest.approx([363.5, 407.8])
    assert np.all(s.tm > s.tc)      # a few dozen tokens over 33 experts: weight reads dominate
    fp4 = aiter_fit.moe_samples(tmp_path, aiter_fit.DEVICES["cdna3"], mi300x, "mxfp4")
    assert fp4 is not None and list(fp4.t * 1e6) == pytest.approx([150.0])
    assert fp4.tm[0] < s.tm[0]      # the same shape's FP4 weights are about half the FP8 bytes


def _moe_table(root: Path, rows: list[dict[str, object]]) -> None:
    path = root / "aiter" / "configs" / "model_configs" / "a8w8_blockscale_tuned_fmoe_test.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        out = csv.DictWriter(f, fieldnames=MOE_HEADER, restval="")
        out.writeheader()
        out.writerows(rows)


def _moe_timed_as(compute: float, memory: float, tokens: list[int]) -> list[dict[str, object]]:
    """Block-scaled FP8 fused-MoE rows of a DeepSeek-style TP8 rank (257 experts of 256 wide, top 9) whose times
    are the transfer's on MI300X's datasheet with these factors."""
    hw, coeffs = load_hardware("mi300x"), load_transfer().op("moe.fp8_block")
    rows = []
    for n in tokens:
        flops, nbytes = work.moe(n, 7168, 256, 9, 257, 1.0, 1.0, "fp8_block")
        t = coeffs.time(flops / hw.peak_flops(work.rate_key("fp8_block")) * compute,
                        nbytes / hw.hbm_bytes_per_s * memory)
        rows.append({"cu_num": 304, "token": n, "model_dim": 7168, "inter_dim": 256, "expert": 257, "topk": 9,
                     "q_type": "QuantType.per_1x128", "q_dtype_w": "torch.float8_e4m3fnuz", "us": t * 1e6})
    return rows


def test_fused_moe_is_fitted_per_format_from_decode_to_prefill_sizes(tmp_path: Path):
    """A format's rows from one token to prefill sizes pin both factors (the compute one from the large batches);
    a format with fewer shapes than MIN_MOE_SHAPES keeps the family's generic factors."""
    _gemm_table(tmp_path, "a8w8_blockscale_tuned_gemm.csv", _timed_as(1.0, 1.0))
    _moe_table(tmp_path, _moe_timed_as(0.4, 1.1, [2 ** i for i in range(17)]))
    fits = {f.cls: f for f in aiter_fit.fit_family(tmp_path, "cdna3", load_transfer(), "test tables")}
    assert sorted(fits) == ["gemm.fp8_block", "moe.fp8_block"]
    moe = fits["moe.fp8_block"]
    assert moe.n == 17 and moe.compute_bound > 0
    assert moe.factors.compute == pytest.approx(0.4, rel=0.03) and moe.factors.memory == pytest.approx(1.1, rel=0.03)
    assert moe.factors.source == "test tables tuned fused MoE (fp8_block), gfx942 304 CUs"

    few = tmp_path / "few"
    _gemm_table(few, "a8w8_blockscale_tuned_gemm.csv", _timed_as(1.0, 1.0))
    _moe_table(few, _moe_timed_as(0.4, 1.1, [1, 64, 8192])[: aiter_fit.MIN_MOE_SHAPES - 1])
    assert [f.cls for f in aiter_fit.fit_family(few, "cdna3", load_transfer(), "x")] == ["gemm.fp8_block"]


def test_a_folder_that_is_not_an_aiter_checkout_is_one_line(tmp_path: Path):
    with pytest.raises(UserError, match="ROCm/aiter") as exc:
        aiter_fit.fit_family(tmp_path, "cdna3", load_transfer(), "x")
    assert "\n" not in str(exc.value)
    with pytest.raises(UserError, match="cdna3, cdna4"):
        aiter_fit.fit_family(tmp_path, "hopper", load_transfer(), "x")
