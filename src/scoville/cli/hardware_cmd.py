"""``scoville hardware``: the systems the simulator knows, and where each of one system's numbers comes from.

A prediction for a chip is only as good as its entry: the datasheet figures, how a group of its GPUs reaches the
others, and how its kernels are priced (measured tables, its own kernels' timings fitted per class, or the
NVIDIA-fitted transfer times its family's factors). This prints them with their sources, so that a reader can see
what a ``simulate --hardware NAME`` stands on before trusting it.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from scoville.catalog.hardware import EFFICIENCY_KEYS, Hardware, list_hardware, load_hardware
from scoville.sim.kernels.tables import root_for

console = Console()


def pricing(hw: Hardware) -> str:
    """How the simulator times this system's kernels, in a few words: its measured tables, or the NVIDIA-fitted
    transfer on its datasheet (with the kernel classes fitted on its own kernels' timings, if any)."""
    if hw.kernel_tables and root_for(hw.kernel_tables) is not None:
        return f"tables: {hw.kernel_tables}"
    own = sorted(hw.kernel_time_factors_in_force())
    return "transfer" + (f" (own: {', '.join(own)})" if own else "")


def _summary(hw: Hardware) -> dict[str, Any]:
    return {"name": hw.name, "display_name": hw.display_name, "vendor": hw.vendor, "family": hw.family,
            "dense_tflops": hw.flops_tflops, "hbm_gb": hw.hbm_capacity_gb, "hbm_tbps": hw.hbm_bandwidth_tbps,
            "scaleup_gbps": hw.scaleup_bandwidth_gbps, "scaleup_domain": hw.scaleup_domain,
            "scaleup_topology": hw.scaleup_topology, "rated_watts": hw.rated_watts, "pricing": pricing(hw),
            "preliminary": hw.preliminary}


def _headline_rate(hw: Hardware) -> str:
    """The narrowest floating-point format's dense rate (what a listing compares chips by)."""
    fmt = next((f for f in ("fp4", "fp8", "bf16", "fp16", "fp32") if f in hw.flops_tflops),
               next(iter(hw.flops_tflops)))
    return f"{hw.flops_tflops[fmt]:g} {fmt}"


# One system's figures in the order a reader checks them; the rest of the entry (factors, sources) follows them.
_FIGURES = ("vendor", "family", "flops_tflops", "hbm_capacity_gb", "hbm_bandwidth_tbps", "scaleup_bandwidth_gbps",
            "scaleup_domain", "scaleup_topology", "scaleup_latency_us", "scaleout_bandwidth_gbps",
            "scaleout_latency_us", "rated_watts", "all_in_watts", "measured_watts", "idle_watts", "cost_per_hour",
            "runtime_reserve_gb", "kernel_tables", "kernel_tables_sigma", "preliminary")


def _shown(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}" for k, v in value.items())
    return f"{value:g}" if isinstance(value, float) else str(value)


def hardware_cmd(
    name: Annotated[str | None, typer.Argument(help="A system of the catalog or a hardware YAML: show every figure "
                                                    "and its source.")] = None,
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """List the systems the simulator knows, or one system's figures, kernel pricing and sources."""
    if name is None:
        systems = [load_hardware(n) for n in list_hardware()]
        if json_out:
            print(json.dumps([_summary(hw) for hw in systems], indent=2))
            return
        table = Table(header_style="bold")
        for column in ("system", "family", "dense TFLOPS", "HBM GB, TB/s", "scale-up GB/s", "kernels priced from"):
            table.add_column(column)
        for hw in systems:
            mesh = " mesh" if hw.scaleup_topology == "mesh" else ""
            table.add_row(hw.name, hw.family, _headline_rate(hw),
                          f"{hw.hbm_capacity_gb:.0f}, {hw.hbm_bandwidth_tbps:g}",
                          f"{hw.scaleup_bandwidth_gbps:g} x{hw.scaleup_domain}{mesh}", escape(pricing(hw)))
        console.print(table)
        console.print("`scoville hardware NAME` shows one system's figures with their sources; --hardware also takes "
                      "a YAML of your own (docs/simulator.md#adding-hardware)")
        return
    hw = load_hardware(name)
    full = hw.to_dict()
    if json_out:
        print(json.dumps(full | {"pricing": pricing(hw)}, indent=2))
        return
    table = Table(title=f"{hw.display_name} ({hw.name})", header_style="bold")
    table.add_column("figure")
    table.add_column("value")
    for key in _FIGURES:
        if full.get(key) not in (None, {}):
            table.add_row(key, escape(_shown(full[key])))
    table.add_row("kernels priced from", escape(pricing(hw)))
    in_force = full["efficiency_in_force"]
    table.add_row("family factors", escape(", ".join(f"{k} {in_force[k]:g}" for k in EFFICIENCY_KEYS)))
    for cls, factors in full["kernel_time_factors_in_force"].items():
        table.add_row(f"own {cls}", escape(f"x{factors['compute']:g} compute, x{factors['memory']:g} memory, "
                                           f"sigma {factors['sigma']:g}: {factors['source']}"))
    console.print(table)
    for source in hw.sources:
        console.print(f"  source: {escape(source)}")
    if hw.notes:
        console.print(f"  note: {escape(hw.notes)}")


def register(app: typer.Typer) -> None:
    """Add ``hardware`` to the CLI."""
    app.command("hardware")(hardware_cmd)
