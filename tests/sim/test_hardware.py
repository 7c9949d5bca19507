"""Hardware catalog: shipped systems load, units are the documented ones, user YAML errors are one line."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import msgspec
import numpy as np
import pytest

from scoville.catalog.hardware import hardware_file, list_hardware, load_hardware
from scoville.errors import UserError
from scoville.sim.config import SimConfig
from scoville.sim.cost import Parallel, StepCost
from scoville.sim.engine import step_cost
from scoville.sim.kernels import tables
from scoville.sim.kernels.aiter_fit import amd_allreduce_timings

SHIPPED = ["b200", "b300", "gb200", "gb300", "h100", "h200", "jalapeno", "mi355x"]


def test_every_issue_system_is_shipped_and_loads():
    assert set(SHIPPED) <= set(list_hardware())
    for name in SHIPPED:
        hw = load_hardware(name.upper())  # names are case-insensitive
        assert hw.name == name
        assert hw.sources, f"{name} must name its sources"
        assert 0 < hw.eff("memory") <= 1 and 0 < hw.eff("compute") <= 1


def test_dense_not_sparse_flops_and_unidirectional_links():
    # The sparse H100 FP8 figure is 3,958; NVLink 5 is 1,800 GB/s bidirectional.
    assert load_hardware("h100").flops_tflops["fp8"] == 1979
    assert load_hardware("gb200").scaleup_bandwidth_gbps == 900
    assert load_hardware("gb300").scaleup_domain == 72


def test_capacity_is_usable_decimal_gb_not_marketing_gib():
    # nvidia-smi reports 284,208 MiB on GB300: 298.0 decimal GB.
    assert load_hardware("gb300").hbm_capacity_gb == pytest.approx(284208 * 1.048576 / 1000, rel=1e-3)
    assert load_hardware("h200").hbm_bytes == pytest.approx(150.76e9)


def test_power_modes_and_inferencex_presets():
    gb = load_hardware("gb200")
    assert gb.power_watts("rated") == 1200 and gb.power_watts("all-in") == 2100
    assert gb.cost_per_hour["hyperscaler"] == pytest.approx(2.21)
    jal = load_hardware("jalapeno")
    assert jal.power_watts("measured") == 550
    with pytest.raises(UserError, match="all-in"):
        jal.power_watts("all-in")


def test_fp4_falls_back_to_fp8_on_hopper():
    h = load_hardware("h200")
    assert h.peak_flops("fp4") == h.peak_flops("fp8") == 1979e12


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "mychip.yaml"
    p.write_text(text)
    return p


GOOD = """
vendor: me
family: blackwell
flops_tflops: {fp4: 20000, bf16: 5000}
hbm_capacity_gb: 300
hbm_bandwidth_tbps: 20
scaleup_bandwidth_gbps: 1800
scaleup_domain: 72
scaleout_bandwidth_gbps: 200
rated_watts: 1800
"""


def test_user_yaml_needs_no_code(tmp_path):
    hw = load_hardware(str(_write(tmp_path, GOOD)))
    assert hw.name == "mychip" and hw.hbm_bandwidth_tbps == 20
    assert hw.eff("memory") == load_hardware("b200").eff("memory")  # inherits its family's factors


@pytest.mark.parametrize(
    "text, field",
    [
        (GOOD.replace("hbm_bandwidth_tbps: 20", "hbm_bandwidth_tbps: fast"), "hbm_bandwidth_tbps"),
        (GOOD.replace("rated_watts: 1800", ""), "rated_watts"),
        (GOOD.replace("scaleup_domain: 72", "scaleup_domain: 72\nhbm_speed: 3"), "hbm_speed"),
        (GOOD + "efficiency: {memroy: 0.9}\n", "memroy"),
        (GOOD + "kernel_time_factors: {gemm.fp9: {compute: 2, memory: 1, sigma: 0.1}}\n", "gemm.fp9"),
        (GOOD + "kernel_time_factors: {gemm.fp8: {compute: 0, memory: 1, sigma: 0.1}}\n", "gemm.fp8.compute"),
        (GOOD + "kernel_time_factors: {gemm.fp8: {compute: 2, memory: 1}}\n", "sigma"),
        (GOOD + "scaleup_topology: ring\n", "scaleup_topology"),
        (GOOD.replace("hbm_capacity_gb: 300", "hbm_capacity_gb: -3"), "hbm_capacity_gb"),
        ("flops_tflops: [1, 2\n", "YAML"),
    ],
)
def test_bad_user_yaml_is_one_line_user_error_naming_file_and_field(tmp_path, text, field):
    path = _write(tmp_path, text)
    with pytest.raises(UserError) as exc:
        load_hardware(str(path))
    msg = str(exc.value)
    assert "\n" not in msg and str(path) in msg and field in msg


def test_a_kernel_class_fitted_for_a_family_or_a_file_replaces_the_generic_factors_for_that_class_only(tmp_path):
    """cdna3's block-scaled FP8 GEMMs and MoE carry their own factors (fitted on AMD's tuned tables), its BF16 GEMMs
    the family's generic ones; a user's file may set a class of its own, and the rest of its family's stay in
    force."""
    mi300x = load_hardware("mi300x")
    generic = (mi300x.eff("compute_time_factor"), mi300x.eff("memory_time_factor"))
    assert mi300x.time_factors("gemm.bfloat16") == generic
    assert mi300x.time_factors("gemm.fp8_block") != generic and mi300x.time_factors("moe.fp8_block") != generic
    assert "gemm.fp8_block" in mi300x.to_dict()["kernel_time_factors_in_force"]
    own = load_hardware(str(_write(tmp_path, GOOD.replace("family: blackwell", "family: cdna3")
                                   + "kernel_time_factors: {moe.fp8_block: {compute: 3, memory: 1.5, sigma: 0.2}}\n")))
    assert own.time_factors("moe.fp8_block") == (3, 1.5)
    assert own.time_factors("gemm.fp8_block") == mi300x.time_factors("gemm.fp8_block")


def test_the_kernel_classes_a_file_may_name_are_the_transfer_model_s():
    """The catalog names the kernel kinds and formats itself (it may not import the simulator); they must stay those
    the transfer model prices, or a fitted factor would never be read."""
    from scoville.catalog.hardware import KERNEL_FORMATS, KERNEL_KINDS
    from scoville.sim.kernels.transfer import load_transfer
    from scoville.sim.kernels.work import KERNEL_WEIGHT_BYTES

    assert set(KERNEL_FORMATS) == set(KERNEL_WEIGHT_BYTES)
    assert {cls.partition(".")[0] for cls in load_transfer().ops} == set(KERNEL_KINDS)


def test_a_mesh_gives_a_group_only_the_links_to_its_peers():
    """Infinity Fabric joins each MI300X to each of its 7 peers by one 64 GB/s link: a TP2 pair has one of them, a
    TP4 group three, the whole domain all seven; behind NVSwitch any group has the whole figure. AMD's timings of
    its own all-reduce show it (bench/bench_amd_kernels.py: TP2 at 8 MiB 181 us, the mesh 215, a switch 36)."""
    mi300x, h100 = load_hardware("mi300x"), load_hardware("h100")
    full = mi300x.scaleup_bandwidth_gbps * 1e9
    assert mi300x.scaleup_topology == "mesh" and h100.scaleup_topology == "switch"
    assert [mi300x.scaleup_bytes_per_s(n) for n in (2, 4, 8)] == pytest.approx([full / 7, full * 3 / 7, full])
    assert h100.scaleup_bytes_per_s(2) == h100.scaleup_bandwidth_gbps * 1e9
    switched = msgspec.structs.replace(mi300x, scaleup_topology="switch")
    big = np.array([8 * 2.0**20])
    mesh_tp2 = StepCost("llama-3.1-70b", mi300x, Parallel(tp=2)).ops.allreduce(big)[0]
    switch_tp2 = StepCost("llama-3.1-70b", switched, Parallel(tp=2)).ops.allreduce(big)[0]
    mesh_tp8 = StepCost("llama-3.1-70b", mi300x, Parallel(tp=8)).ops.allreduce(big)[0]
    switch_tp8 = StepCost("llama-3.1-70b", switched, Parallel(tp=8)).ops.allreduce(big)[0]
    assert mesh_tp2 > 4 * switch_tp2 and mesh_tp8 == pytest.approx(switch_tp8)
    assert "mesh: 1 of 7 links" in StepCost("llama-3.1-70b", mi300x, Parallel(tp=2)).ops.provenance["allreduce"]


def test_the_mesh_reads_amd_s_own_all_reduce_timings_and_a_switch_would_not():
    """AMD's timings of its custom all-reduce on MI300X (``data/reference/amd_allreduce.yaml``, from its quick-reduce
    PRs) are what the mesh topology is checked on: the transfer reads every size within 0.6-1.3x of them, where a
    switch's full bandwidth for every pair would be 2x fast or more from 4 MiB up."""
    name, timings = amd_allreduce_timings()
    mesh = load_hardware(name)
    switch = msgspec.structs.replace(mesh, scaleup_topology="switch")
    for tp, timed in timings.items():
        sizes, amd = np.array(list(timed), dtype=float), np.array(list(timed.values()))
        ratios = {}
        for name, hw in (("mesh", mesh), ("switch", switch)):
            allreduce = StepCost("llama-3.1-70b", hw, Parallel(tp=int(tp))).ops.allreduce
            assert allreduce is not None
            ratios[name] = allreduce(sizes) * 1e6 / amd
        assert np.all((ratios["mesh"] > 0.6) & (ratios["mesh"] < 1.3)), (tp, ratios["mesh"])
        assert np.all(ratios["switch"][sizes >= 4 * 2**20] < 0.5), (tp, ratios["switch"])


def test_unknown_name_lists_choices():
    with pytest.raises(UserError, match="h200"):
        load_hardware("h900")


def _own_tables_yaml(tmp_path: Path, folder: str, scale: float) -> Path:
    """The Zen 4 entry with its shipped kernel tables copied to ``tmp_path / folder``, every time × ``scale``,
    and named there by a path relative to the YAML (what a user's measure_cpu_kernels.py --out gives)."""
    for src in (tables.OWN_ROOT / "epyc_zen4_2vcpu").rglob("*.csv"):
        dst = tmp_path / folder / src.relative_to(tables.OWN_ROOT / "epyc_zen4_2vcpu")
        dst.parent.mkdir(parents=True, exist_ok=True)
        with src.open() as f_in, dst.open("w", newline="") as f_out:
            rows = csv.DictReader(f_in)
            out = csv.DictWriter(f_out, fieldnames=rows.fieldnames or [])
            out.writeheader()
            out.writerows({**r, "latency": float(r["latency"]) * scale} for r in rows)
    text = re.sub(r"(?m)^kernel_tables: .*$", f"kernel_tables: ./{folder}",
                  hardware_file("epyc-zen4-2vcpu").read_text())
    path = tmp_path / f"zen4-{folder}.yaml"
    path.write_text(text)
    return path


def test_kernel_tables_may_be_a_folder_of_ones_own(tmp_path: Path):
    """A user's own measured tables, named by a folder relative to the YAML, price the kernels as the shipped
    copy of the same tables does; tables timed twice as slow price them twice as slow."""
    same, slower = _own_tables_yaml(tmp_path, "same", 1.0), _own_tables_yaml(tmp_path, "slower", 2.0)
    assert load_hardware(str(same)).kernel_tables == str((tmp_path / "same").resolve())
    model = tmp_path / "config.json"
    model.write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 512,
                                 "intermediate_size": 1408, "num_hidden_layers": 6, "num_attention_heads": 8,
                                 "num_key_value_heads": 4, "head_dim": 64, "vocab_size": 32000,
                                 "max_position_embeddings": 4096, "torch_dtype": "bfloat16"}))

    def kernel_seconds(hardware: str) -> list[float]:
        """Kernel time of a 512-token prefill step and of an 8-sequence decode step at 512 tokens of context."""
        cfg = SimConfig(hardware=hardware, model=str(model))
        cost = step_cost(cfg, cfg.parallel)
        steps = (cost.breakdown(512, 1, 512 * 513 / 2, 512, 0, 0), cost.breakdown(8, 8, 8 * 512, 8 * 512, 8, 8 * 512))
        return [float(sum(b[k] for k in ("attn_proj", "attn_core", "ffn", "lm_head"))) for b in steps]

    shipped = kernel_seconds("epyc-zen4-2vcpu")
    assert kernel_seconds(str(same)) == pytest.approx(shipped, rel=1e-9)
    prefill, decode = (a / b for a, b in zip(kernel_seconds(str(slower)), shipped, strict=True))
    assert 1.5 < prefill <= 2.0 and 1.5 < decode <= 2.0, (prefill, decode)   # elementwise kernels are not tabled


def test_a_missing_kernel_tables_folder_is_one_line(tmp_path: Path):
    path = tmp_path / "mine.yaml"
    path.write_text(re.sub(r"(?m)^kernel_tables: .*$", "kernel_tables: ./not-measured",
                           hardware_file("epyc-zen4-2vcpu").read_text()))
    with pytest.raises(UserError, match=r"kernel_tables folder .*not-measured does not exist; give the folder that "
                                        r"bench/measure_cpu_kernels.py --out wrote"):
        load_hardware(str(path))
