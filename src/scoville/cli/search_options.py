"""The "Search" flags of ``sweep`` (``--slo``, ``--search``, ``--predict``, ...).

Declared here so measure_cmd.py only adds them to its signature; ``scoville.search_plan.build_search`` checks
how they combine and builds the search they ask for.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

PANEL = "Search"

SloOption = Annotated[str | None, typer.Option(
    "--slo", rich_help_panel=PANEL, help="Limits such as ttft_p90=2s,tpot_p90=50ms (METRIC_STAT: ttft, tpot, e2e, "
    "itl; mean, median, p90, p99); also sets each point's goodput.")]
SearchOption = Annotated[bool, typer.Option(
    "--search", rich_help_panel=PANEL, help="Find the highest concurrency meeting --slo (bracket, then bisect).")]
SearchRateOption = Annotated[float | None, typer.Option(
    "--search-rate", rich_help_panel=PANEL, help="Search request rates instead, in steps of this many req/s.")]
SearchMaxOption = Annotated[float | None, typer.Option(
    "--search-max", rich_help_panel=PANEL, help="Highest load tried (default 1024 users, or 1024 rate steps).")]
PredictOption = Annotated[str | None, typer.Option(
    "--predict", rich_help_panel=PANEL, help="Start at the simulator's knee for HARDWARE/MODEL (or a SimConfig "
    "file), e.g. h200/llama-3.1-8b.")]
ProfileOption = Annotated[Path | None, typer.Option(
    "--profile", rich_help_panel=PANEL, help="Calibration profile for --predict (`scoville calibrate`).")]
SearchRepeatsOption = Annotated[int, typer.Option(
    "--search-repeats", rich_help_panel=PANEL, min=1, help="Attempts at most at a load within 10% of a limit "
    "(decided by majority).")]
