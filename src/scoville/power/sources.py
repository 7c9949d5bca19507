"""Which power a measured run's per-kW figures use, and the system facts around it.

* ``rated``  — accelerators × rated W per accelerator (``--rated-watts`` or the
  hardware catalog's chip rating); boundary ``chip``.
* ``all-in`` — accelerators × InferenceX's all-in W per accelerator (host,
  network and cooling share included) from the catalog; boundary ``rack``.
* ``nvml``   — board power sampled from the GPUs during the run; boundary ``board``.
* ``csv``    — an external meter's samples from a file; boundary as given (default ``node``).

The plan is recorded in the manifest as ``power`` = {source, boundary,
watts_per_accelerator, ...} and ``system`` = {hardware, accelerators,
rated_watts_per_accelerator, power_boundary, cost_per_accelerator_hour}, which
is what ``scoville.metrics.context_from_manifest`` reads back.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from scoville.catalog.hardware import Hardware, load_hardware
from scoville.errors import UserError
from scoville.results.manifest import Manifest

SOURCES = ("rated", "all-in", "nvml", "csv", "none")
BOUNDARIES = ("chip", "board", "node", "rack")
_DEFAULT_BOUNDARY = {"rated": "chip", "all-in": "rack", "nvml": "board", "csv": "node", "none": "chip"}
# the catalog price a run is costed at when none is given: measured, emulated, simulated
DEFAULT_COST_PRESET = "neocloud"


def default_boundary(source: str) -> str:
    """Whose power a source covers unless told otherwise (the simulator's utilisation ``model``: the chip's)."""
    return _DEFAULT_BOUNDARY.get(source, "chip")


NO_POWER_BASIS = "no power basis: pass --hardware or --rated-watts"


def power_basis_text(source: str | None, boundary: str | None) -> str:
    """What a per-kW figure means, as every output prints it: "rated, chip boundary"; a run recorded without
    a power source says how to get one rather than "none (chip boundary)"."""
    if not source or source == "none":
        return NO_POWER_BASIS
    return f"{source}, {boundary or 'unknown'} boundary"


def manifest_power_basis(manifest: Manifest) -> str:
    """``power_basis_text`` of a run: its power source, and the boundary it recorded (or its system's)."""
    return power_basis_text(manifest.power.source, manifest.power.boundary or manifest.system.power_boundary)


class PowerError(UserError):
    """A power source that cannot be used as asked; message says how to fix it."""


@dataclass
class PowerPlan:
    source: str
    boundary: str
    watts_per_accelerator: float | None = None
    csv_path: str | None = None
    nvml_devices: list[int] | None = None

    def manifest(self) -> dict[str, Any]:
        d: dict[str, Any] = {"source": self.source, "boundary": self.boundary,
                             "watts_per_accelerator": self.watts_per_accelerator}
        if self.csv_path:
            d["csv_path"] = self.csv_path
        if self.nvml_devices is not None:
            d["nvml_devices"] = self.nvml_devices
        return d


def _catalog(hardware: str | None, required: bool = False) -> Hardware | None:
    """The catalog entry of ``hardware``; None when not given, or not in the catalog and not ``required``.

    A measured system need not be in the catalog (``--rated-watts`` suffices);
    only the figures taken from the catalog make its absence an error.
    """
    if not hardware:
        return None
    try:
        return load_hardware(hardware)
    except UserError:
        if required:
            raise
        return None


CATALOG_BASES = {"rated": "rated chip", "all-in": "all-in, rack"}


def catalog_watts(hardware: str | None) -> dict[str, float]:
    """W per accelerator the catalog gives ``hardware`` on each ``CATALOG_BASES`` basis (empty when not in it):
    the bases a reader switches between to see how much of a per-kW claim is the power boundary."""
    hw = _catalog(hardware)
    if hw is None:
        return {}
    watts = {"rated": hw.rated_watts}
    if hw.all_in_watts:
        watts["all-in"] = hw.all_in_watts
    return watts


def cost_per_hour(value: str | None, hardware: str | None) -> float | None:
    """``--cost-per-hour``: dollars per accelerator-hour, or a catalog preset name (hyperscaler, neocloud, rental)."""
    if value is None:
        return None
    try:
        dollars = float(value)
    except ValueError:
        hw = _catalog(hardware, required=True)
        presets = hw.cost_per_hour if hw is not None else {}
        if value not in presets:
            known = ", ".join(presets) or "none (give --hardware)"
            raise PowerError(f"--cost-per-hour {value!r} is neither a number nor a preset of {hardware}; "
                             f"presets: {known}") from None
        return float(presets[value])
    if not (math.isfinite(dollars) and dollars > 0):  # float() also reads "nan" and "inf"
        raise PowerError("--cost-per-hour must be a positive number of dollars per accelerator-hour")
    return dollars


def plan_power(
    source: str,
    *,
    hardware: str | None,
    accelerators: int,
    rated_watts: float | None = None,
    csv_path: str | None = None,
    boundary: str | None = None,
    nvml_devices: list[int] | None = None,
) -> PowerPlan:
    """Resolve ``--power`` and friends into a PowerPlan (one-line PowerError when impossible)."""
    if source not in SOURCES:
        raise PowerError(f"unknown --power {source!r}; use one of {', '.join(SOURCES[:-1])}")
    if accelerators < 1:
        raise PowerError("--accelerators must be >= 1")
    if boundary is not None and boundary not in BOUNDARIES:
        raise PowerError(f"unknown power boundary {boundary!r}; use one of {', '.join(BOUNDARIES)}")
    needs_catalog = source == "all-in" or (source == "rated" and rated_watts is None)
    hw = _catalog(hardware, required=needs_catalog)
    plan = PowerPlan(source=source, boundary=boundary or _DEFAULT_BOUNDARY[source])
    if source == "rated":
        watts = rated_watts if rated_watts is not None else (hw.rated_watts if hw is not None else None)
        if not watts or not (math.isfinite(watts) and watts > 0):
            raise PowerError("--power rated needs --rated-watts W or a --hardware name from the catalog (e.g. h200)")
        plan.watts_per_accelerator = float(watts)
    elif source == "all-in":
        if hw is None:
            raise PowerError("--power all-in needs a --hardware name from the catalog (e.g. h200)")
        plan.watts_per_accelerator = float(hw.power_watts("all-in"))
    elif source == "csv":
        if not csv_path:
            raise PowerError("--power csv needs --power-csv FILE (columns t or timestamp, watts, optional device)")
        plan.csv_path = str(csv_path)
    elif source == "nvml":
        plan.nvml_devices = nvml_devices
    return plan


def system_info(hardware: str | None, accelerators: int, plan: PowerPlan, cost: float | None) -> dict[str, Any]:
    """The manifest ``system`` block of a measured run."""
    hw = _catalog(hardware)
    rated = plan.watts_per_accelerator if plan.source == "rated" else (hw.rated_watts if hw is not None else None)
    return {
        "hardware": hw.name if hw is not None else hardware,
        "accelerators": accelerators,
        "rated_watts_per_accelerator": rated,
        "power_boundary": plan.boundary,
        "cost_per_accelerator_hour": cost,
    }
