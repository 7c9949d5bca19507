"""scoville: measure, predict and compare LLM inference frontiers.

The Python API (docs/python-api.md) is re-exported here and loads on first use, so ``import scoville`` (and
the CLI's start-up) stays cheap: ``scoville.simulate``, ``scoville.sweep``, ``scoville.serve``,
``scoville.open_run``, ``scoville.runs``, ``scoville.compare``, ``scoville.report``, and the typed specs.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "Run": "scoville.api", "open_run": "scoville.api", "runs": "scoville.api", "compare": "scoville.api",
    "report": "scoville.api", "simulate": "scoville.api", "serve": "scoville.api", "sweep": "scoville.api",
    "SweepSpec": "scoville.measurement",
    "SimulateSpec": "scoville.simulation", "WorkloadSpec": "scoville.workload.options", "LoadSpec": "scoville.load",
    "UserError": "scoville.errors",
}
__all__ = ["__version__", "Run", "open_run", "runs", "compare", "report", "simulate", "serve", "sweep",
           "SweepSpec", "SimulateSpec",
           "WorkloadSpec", "LoadSpec", "UserError"]

if TYPE_CHECKING:
    from scoville.api import Run, compare, open_run, report, runs, serve, simulate, sweep
    from scoville.errors import UserError
    from scoville.load import LoadSpec
    from scoville.measurement import SweepSpec
    from scoville.simulation import SimulateSpec
    from scoville.workload.options import WorkloadSpec


def __getattr__(name: str) -> Any:
    """Load an export's module on first use (PEP 562)."""
    if name not in _EXPORTS:
        raise AttributeError(f"module 'scoville' has no attribute {name!r}")
    value = getattr(import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value
