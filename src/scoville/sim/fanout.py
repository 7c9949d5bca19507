"""Distributed simulation: a sweep's points fan out as independent tasks on an executor the caller passes in.

Why this is sound: the simulator runs every load point on a fresh engine
seeded by ``(seed, point.index)`` with sessions drawn from
``workload.sessions(..., stream=point.index)`` (``scoville.sim.point``), so
no point depends on another except for *where it sits on the run clock*
(point k starts ``POINT_GAP_S`` after point k-1's last request finished).
Each task therefore simulates its point from ``t = 0``; the coordinator then
lays the points end to end exactly as ``simulate_run`` does, by shifting each
point's timestamps. The same tasks give the same bits on every executor;
against the sequential driver the only difference is floating-point rounding
of ``t + shift`` (1e-12 s scale), which no metric can see.

The executor (``scoville.executor``: local processes or Ray) only maps a function over items; it knows
nothing of the simulator, which lives here and not in ``executor/`` so neither package imports the other
back. The config search runs in one process: its steady-state estimates take milliseconds each, less than
shipping a candidate to a worker would.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from scoville.load import LoadPoint
from scoville.sim.config import SimConfig
from scoville.sim.point import POINT_GAP_S, PointResult, simulate_point

if TYPE_CHECKING:
    from scoville.executor.base import Executor

_TIME_COLUMNS = ("t_sent", "t_first_token", "t_done")


def _simulate_item(item: tuple[dict[str, Any], Any, LoadPoint, int, bool]) -> PointResult:
    """Executor entry point: one point on a fresh engine from t = 0 (configurations travel as dicts)."""
    config, workload, point, seed, model_power = item
    return simulate_point(SimConfig.model_validate(config), workload, point, seed=seed, model_power=model_power)


def shift_times(table: pa.Table, dt: float) -> pa.Table:
    """Every timestamp of a records table moved by ``dt`` seconds (nulls stay null)."""
    for name in _TIME_COLUMNS:
        i = table.schema.get_field_index(name)
        table = table.set_column(i, name, pc.add(table.column(name), dt))
    i = table.schema.get_field_index("token_times")
    lists = table.column("token_times").combine_chunks()
    moved = pa.ListArray.from_arrays(lists.offsets, pc.add(lists.values, dt), mask=lists.is_null())
    return table.set_column(i, "token_times", moved)


def simulate_points(executor: Executor, configs: list[SimConfig], workload: Any, points: list[LoadPoint], *,
                    seed: int = 0, model_power: bool = False) -> list[PointResult]:
    """``simulate_point`` of every (config, point) pair as a task, placed on one run clock.

    ``configs`` has one configuration per point (the search's winners) or a
    single one for all. The results are what ``simulate_run``'s sequential
    loop produces, ready for ``RunWriter.write_point``.
    """
    if len(configs) == 1:
        configs = configs * len(points)
    if len(configs) != len(points):
        raise ValueError("give one configuration, or one per point")
    items = [(c.model_dump(), workload, p, seed, model_power) for c, p in zip(configs, points, strict=True)]
    out, t = [], 0.0
    for res in executor.map(_simulate_item, items):
        placed = PointResult(table=shift_times(res.table, t), t_start=res.t_start + t, t_end=res.t_end + t,
                             counters=res.counters, watts_per_accelerator=res.watts_per_accelerator)
        out.append(placed)
        t = placed.t_end + POINT_GAP_S
    return out
