"""Power sources for measured runs: rated, all-in (catalog), NVML sampler, external CSV meter."""

from scoville.power.csv_meter import read_power_csv
from scoville.power.nvml import NvmlSampler
from scoville.power.sources import PowerError, PowerPlan, plan_power

__all__ = ["PowerError", "PowerPlan", "plan_power", "NvmlSampler", "read_power_csv"]
