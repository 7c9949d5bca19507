"""Utilisation-based accelerator power: idle + dynamic power from compute and memory activity.

Rated power (the InferenceX-compatible default) says what a chip *may* draw; measured board power
during serving is lower and depends on what the step does: a compute-bound prefill runs the tensor
cores near their limit (close to rated), a bandwidth-bound decode mostly pays for HBM and data
movement (Splitwise measured about 0.55-0.7 of TDP in decode, ~0.1 idle). So

    watts = idle + (rated - idle) * min(1, compute_util / compute_eff + memory_weight * memory_util / memory_eff)

where ``compute_util`` and ``memory_util`` are achieved fractions of *peak* FLOPS and HBM bandwidth and
``compute_eff``/``memory_eff`` the family's achievable fractions (running at the achievable peak is what
"saturated" means). ``memory_weight`` (0.7) is what a saturated HBM stream costs relative to saturated tensor
cores, chosen so a bandwidth-bound decode lands in Splitwise's 0.55-0.7 x TDP (DeepSeek-R1 decode on GB300:
~0.66). The one public measured point, Jalapeno's ~550 W sustained of 700 W rated (0.79), is approached on average
over its three 8k/1k scenarios at 256 in flight (gpt-oss ~700 W, DeepSeek-R1/Kimi ~420 W; mean ~515 W, 6% under).
Those figures predate capping gpt-oss's sliding-window layers at their window in ``StepCost.utilization``; with
the cap a 256 x 8.7k-context gpt-oss decode step on Jalapeno models ~545 W instead of rated 700 W, so that mean is
now lower (not re-measured over the full scenarios).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scoville.catalog.hardware import Hardware, load_hardware


class PowerModel:
    """Board power of one accelerator as a function of its utilisation."""

    def __init__(self, hardware: Hardware | str, memory_weight: float = 0.7) -> None:
        self.hw = load_hardware(hardware) if isinstance(hardware, str) else hardware
        self.idle = self.hw.idle_watts if self.hw.idle_watts is not None else 0.13 * self.hw.rated_watts
        self.rated = self.hw.rated_watts
        self.memory_weight = memory_weight
        self.compute_eff = self.hw.eff("compute")
        self.memory_eff = self.hw.eff("memory")

    def watts(self, compute_util: Any, memory_util: Any) -> Any:
        """Watts per accelerator; arrays broadcast (one value per step)."""
        cu = np.clip(np.asarray(compute_util, dtype=np.float64), 0.0, 1.0)
        mu = np.clip(np.asarray(memory_util, dtype=np.float64), 0.0, 1.0)
        activity = np.minimum(1.0, cu / self.compute_eff + self.memory_weight * mu / self.memory_eff)
        w = self.idle + (self.rated - self.idle) * activity
        return float(w) if np.ndim(w) == 0 else w

    def energy_joules(self, durations: Any, compute_util: Any, memory_util: Any) -> float:
        """Energy of a sequence of steps (per accelerator)."""
        return float(np.sum(np.asarray(durations, dtype=np.float64) * self.watts(compute_util, memory_util)))
