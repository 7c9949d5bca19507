"""Hardware catalog: shipped systems load, units are the documented ones, user YAML errors are one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from scoville.catalog.hardware import list_hardware, load_hardware
from scoville.errors import UserError

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


def test_unknown_name_lists_choices():
    with pytest.raises(UserError, match="h200"):
        load_hardware("h900")
