"""The measuring client: streamed OpenAI requests, closed/open-loop drivers, worker processes, sweeps.

Library entry points (the CLI's ``sweep``/``run`` and other modules use these):

* ``run_sweep(Sweep(...), runs_root) -> SweepResult`` — measure every point into a new run directory;
* ``resume_sweep(run_dir, api_key=...)`` — continue an interrupted or killed run;
* ``ClientConfig`` — the target (URL, model, API kind; the key is never stored);
* ``probe(cfg)`` — fail fast on an unreachable or unusable server.
"""

from scoville.client.config import ClientConfig
from scoville.client.errors import ClientError
from scoville.client.probe import probe
from scoville.client.sweep import Sweep, SweepInterrupted, SweepResult, resume_sweep, run_sweep

__all__ = ["ClientConfig", "ClientError", "probe", "Sweep", "SweepInterrupted", "SweepResult", "resume_sweep",
           "run_sweep"]
