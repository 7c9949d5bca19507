"""Workload flags shared by ``sweep``, ``run`` and ``simulate``: traces and session knobs (and ``--repeats``).

Declared once so the measuring client and the simulator spell, explain and
validate them identically; ``workload_kwargs`` turns the given ones into
``scoville.workload.scenarios.resolve_workload`` keyword arguments.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

TraceOption = Annotated[Optional[Path], typer.Option(
    "--trace", rich_help_panel="Workload", help="Replay a trace: AgentX session JSON(s)/folder, Mooncake JSONL, Azure CSV or scoville JSONL.")]
TraceFormatOption = Annotated[Optional[str], typer.Option(
    "--trace-format", rich_help_panel="Workload", help="agentx | mooncake | azure | scoville (default: detected from the file).")]
TimeScaleOption = Annotated[Optional[float], typer.Option(
    "--time-scale", rich_help_panel="Workload", help="Multiply the trace's recorded times (0.5 = twice as fast).")]
SampleOption = Annotated[Optional[float], typer.Option(
    "--sample", rich_help_panel="Workload", help="Keep this fraction of the trace's sessions (seeded).")]
MaxSessionsOption = Annotated[Optional[int], typer.Option(
    "--max-sessions", rich_help_panel="Workload", help="Keep at most this many of the trace's sessions (earliest first).")]
IdleGapCapOption = Annotated[Optional[float], typer.Option(
    "--idle-gap-cap", rich_help_panel="Workload", help="Cap every idle gap of the trace (arrivals and think times), seconds.")]
ReplayOption = Annotated[Optional[str], typer.Option(
    "--replay", rich_help_panel="Workload", help="timed (trace arrival times) | agentx (concurrency = live session trees, random start turn).")]
TraceBlockSizeOption = Annotated[Optional[int], typer.Option(
    "--trace-block-size", rich_help_panel="Workload", help="Override the trace's prefix-block size (tokens per hash id).")]
ThinkScaleOption = Annotated[Optional[float], typer.Option(
    "--think-scale", rich_help_panel="Workload", help="Multiply a session scenario's think/tool times (0 = back to back).")]

RepeatsOption = Annotated[int, typer.Option(
    "--repeats", rich_help_panel="Load", help="Measure every load this many times (fresh prompts each time); "
                                              "figures then carry 95% bootstrap intervals across the repeats.")]


def workload_kwargs(*, trace: Path | None, trace_format: str | None, time_scale: float | None,
                    sample: float | None, max_sessions: int | None, idle_gap_cap: float | None,
                    replay: str | None, trace_block_size: int | None, think_scale: float | None) -> dict[str, Any]:
    """The given flags as resolve_workload keywords (flags left out are not passed, so defaults hold)."""
    options = {"time_scale": time_scale, "sample": sample, "max_sessions": max_sessions,
               "idle_gap_cap_s": idle_gap_cap, "replay": replay, "block_size": trace_block_size,
               "think_scale": think_scale}
    kwargs: dict[str, Any] = {k: v for k, v in options.items() if v is not None}
    if trace is not None:
        kwargs["trace"] = trace
    if trace_format is not None:
        kwargs["trace_format"] = trace_format
    return kwargs
