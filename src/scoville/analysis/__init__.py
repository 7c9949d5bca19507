"""Pareto frontiers, monotone interpolation, iso-interactivity comparisons, goodput and cost.

Reads only the run schema (manifests and metrics rows), never the client or
the simulator, so measured and simulated runs mix freely.
"""

from scoville.analysis.compare import Comparison, compare, parse_interactivities, y_metric
from scoville.analysis.cost import tokens_per_usd, usd_per_mtok
from scoville.analysis.frontier import Frontier, FrontierPoint, direction_of, frontier, pareto
from scoville.analysis.goodput import goodput, parse_slo
from scoville.analysis.interp import Steffen
from scoville.analysis.runs import System, load_system, load_systems, point_rows

__all__ = [
    "Comparison", "Frontier", "FrontierPoint", "Steffen", "System", "compare", "direction_of", "frontier",
    "goodput", "load_system", "load_systems", "parse_interactivities", "parse_slo", "pareto", "point_rows",
    "tokens_per_usd", "usd_per_mtok", "y_metric",
]
