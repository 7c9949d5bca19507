"""Power sources for measured runs: rated, all-in (catalog), NVML sampler, external CSV meter."""

from scoville.power.sources import PowerError, PowerPlan, plan_power
from scoville.power.nvml import NvmlSampler
from scoville.power.csv_meter import read_power_csv

__all__ = ["PowerError", "PowerPlan", "plan_power", "NvmlSampler", "read_power_csv"]
