"""Every output names the power basis of its per-kW figures, and a run without one says how to get one."""

from __future__ import annotations

from scoville.cli.measure_cmd import power_note
from scoville.cli.point_table import model_text
from scoville.power.sources import (
    NO_POWER_BASIS,
    manifest_power_basis,
    power_basis_text,
)
from scoville.results.manifest import Manifest, Model, Power, System


def test_a_run_without_a_power_source_says_how_to_get_one_everywhere():
    assert power_basis_text("none", "chip") == NO_POWER_BASIS
    assert power_basis_text(None, None) == NO_POWER_BASIS
    note = power_note(Power(source="none", boundary="chip"))
    assert note.startswith(NO_POWER_BASIS) and "none" not in note.replace(NO_POWER_BASIS, "")
    assert manifest_power_basis(Manifest(power=Power(source="none", boundary="chip"))) == NO_POWER_BASIS
    assert manifest_power_basis(Manifest()) == NO_POWER_BASIS


def test_a_power_source_is_named_with_its_boundary_and_watts():
    note = power_note(Power(source="rated", boundary="chip", watts_per_accelerator=700.0))
    assert note == "power: rated, chip boundary, 700 W/accelerator — per-kW figures above use it"
    nvml = Manifest(power=Power(source="nvml"), system=System(power_boundary="board"))
    assert manifest_power_basis(nvml) == "nvml, board boundary"


def test_a_model_without_a_recorded_precision_is_served_as_its_checkpoint():
    assert model_text(Model(name="llama-3.1-8b")) == "llama-3.1-8b (checkpoint precision)"
    assert model_text(Model(name="deepseek-r1", precision="fp8")) == "deepseek-r1 (fp8)"
