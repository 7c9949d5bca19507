"""The measuring client: streamed OpenAI requests, closed/open-loop drivers, worker processes, sweeps.

Library entry points (the CLI's ``sweep``/``run`` and other modules use these):

* ``run_sweep(Sweep(...), runs_root) -> SweepResult`` — measure every point into a new run directory;
* ``resume_sweep(run_dir, api_key=...)`` — continue an interrupted or killed run;
* ``ClientConfig`` — the target (URL, model, API kind; the key is never stored);
* ``probe(cfg)`` — fail fast on an unreachable or unusable server.
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> submodule; imported on first use, so ``scoville.client.errors`` or ``.config`` alone (the CLI's
# option parsing, the simulator) does not load aiohttp and the whole measuring stack
_EXPORTS = {"ClientConfig": "config", "ClientError": "errors", "probe": "probe", "Sweep": "sweep",
            "SweepInterrupted": "sweep", "SweepResult": "sweep", "resume_sweep": "sweep", "run_sweep": "sweep"}
__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'scoville.client' has no attribute {name!r}")
    return getattr(importlib.import_module(f"scoville.client.{_EXPORTS[name]}"), name)
