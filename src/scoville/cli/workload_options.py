"""Workload flags shared by ``sweep``, ``run`` and ``simulate``: traces and session knobs (and ``--repeats``).

Declared once so the measuring client and the simulator spell and explain them identically; the commands
put the given ones into a ``scoville.workload.options.WorkloadSpec``, which validates them and resolves the
workload.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

TraceOption = Annotated[Path | None, typer.Option(
    "--trace", rich_help_panel="Workload",
    help="Replay a trace: AgentX session JSON(s)/folder, Mooncake JSONL, Azure CSV or scoville JSONL.")]
TraceFormatOption = Annotated[str | None, typer.Option(
    "--trace-format", rich_help_panel="Workload",
    help="agentx | mooncake | azure | scoville (default: detected from the file).")]
TimeScaleOption = Annotated[float | None, typer.Option(
    "--time-scale", rich_help_panel="Workload", help="Multiply the trace's recorded times (0.5 = twice as fast).")]
SampleOption = Annotated[float | None, typer.Option(
    "--sample", rich_help_panel="Workload", help="Keep this fraction of the trace's sessions (seeded).")]
MaxSessionsOption = Annotated[int | None, typer.Option(
    "--max-sessions", rich_help_panel="Workload",
    help="Keep at most this many of the trace's sessions (earliest first).")]
IdleGapCapOption = Annotated[float | None, typer.Option(
    "--idle-gap-cap", rich_help_panel="Workload",
    help="Cap every idle gap of the trace (arrivals and think times), seconds.")]
ReplayOption = Annotated[str | None, typer.Option(
    "--replay", rich_help_panel="Workload",
    help="timed (trace arrival times) | agentx (concurrency = live session trees, random start turn).")]
TraceBlockSizeOption = Annotated[int | None, typer.Option(
    "--trace-block-size", rich_help_panel="Workload",
    help="Override the trace's prefix-block size (tokens per hash id).")]
ThinkScaleOption = Annotated[float | None, typer.Option(
    "--think-scale", rich_help_panel="Workload",
    help="Multiply a session scenario's think/tool times (0 = back to back).")]

RepeatsOption = Annotated[int, typer.Option(
    "--repeats", rich_help_panel="Load", help="Measure every load this many times (fresh prompts each time); "
                                              "figures then carry 95% bootstrap intervals across the repeats.")]
