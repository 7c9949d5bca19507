"""Distributed simulation gives the local results: sweep points as tasks.

(The configuration search itself runs in one process: its steady-state estimator prices a candidate in
milliseconds, so fanning candidates out would cost more in shipping than it saves.)"""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc
import pytest

from scoville.executor import LocalExecutor, make_executor
from scoville.load import concurrency_sweep
from scoville.metrics import PointContext, point_metrics
from scoville.sim.config import SimConfig
from scoville.sim.fanout import shift_times, simulate_points
from scoville.sim.point import POINT_GAP_S, simulate_point
from scoville.workload.synthetic import SyntheticWorkload

BASE = SimConfig(hardware="h200", model="llama-3.1-8b")
WORKLOAD = SyntheticWorkload(isl=512, osl=48, seed=4)
POINTS = concurrency_sweep([1, 4, 16], requests_per_concurrency=3, warmup_per_concurrency=1)


def sequential_chain():
    """What simulate_run's loop does: each point starts POINT_GAP_S after the previous one ended."""
    out, t = [], 0.0
    for p in POINTS:
        res = simulate_point(BASE, WORKLOAD, p, seed=2, t_start=t)
        out.append(res)
        t = res.t_end + POINT_GAP_S
    return out


@pytest.fixture(scope="module")
def local_points(local_pool):
    assert isinstance(local_pool, LocalExecutor) and local_pool.max_workers == 2
    return simulate_points(local_pool, [BASE], WORKLOAD, POINTS, seed=2)


def test_fanned_out_points_equal_the_sequential_run(local_points):
    for got, want, p in zip(local_points, sequential_chain(), POINTS, strict=True):
        assert got.table.num_rows == want.table.num_rows == p.total_requests
        for name in ("request_id", "warmup", "ok", "input_tokens", "output_tokens", "token_counts"):
            assert got.table.column(name).equals(want.table.column(name)), name
        for name in ("t_sent", "t_first_token", "t_done"):
            np.testing.assert_allclose(got.table.column(name).to_numpy(), want.table.column(name).to_numpy(),
                                       rtol=0, atol=1e-9)
        np.testing.assert_allclose(pc.list_flatten(got.table.column("token_times")).to_numpy(),
                                   pc.list_flatten(want.table.column("token_times")).to_numpy(), rtol=0, atol=1e-9)
        assert got.t_start == pytest.approx(want.t_start, abs=1e-9)
        ctx = PointContext(concurrency=p.concurrency)
        m_got, m_want = point_metrics(got.table, ctx), point_metrics(want.table, ctx)
        for key in ("ttft_s_median", "tpot_s_median", "interactivity", "total_throughput"):
            assert m_got[key] == pytest.approx(m_want[key], rel=1e-9)


def test_shift_times_moves_every_timestamp_and_keeps_nulls(local_points):
    table = local_points[0].table
    moved = shift_times(table, 10.0)
    assert pc.min(moved.column("t_sent")).as_py() == pytest.approx(pc.min(table.column("t_sent")).as_py() + 10.0)
    flat, flat0 = (pc.list_flatten(t.column("token_times")).to_numpy() for t in (moved, table))
    np.testing.assert_allclose(flat - flat0, 10.0)
    assert moved.column("t_first_token").null_count == table.column("t_first_token").null_count


@pytest.mark.ray
def test_points_on_ray_are_bit_identical_to_local(ray_cluster, local_points):
    ex = make_executor("ray")
    try:
        remote = simulate_points(ex, [BASE], WORKLOAD, POINTS, seed=2)
    finally:
        ex.close()
    for got, want in zip(remote, local_points, strict=True):
        assert got.table.equals(want.table)
        assert (got.t_start, got.t_end) == (want.t_start, want.t_end)
