"""One load plan through the measuring client (against the emulator) and through the simulator: the two drivers
re-implement closed and open loop, warm-up, request caps, session lanes and arrivals, so they must decide alike.

Compared per point: which requests were sent (ids, sessions, turns), which were warm-up, how many, and (where
no timing decides it: open-loop arrivals, one closed-loop lane) the order they were sent in.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from scoville.client.config import ClientConfig
from scoville.client.workers import run_point_here
from scoville.load import LoadPoint
from scoville.results.store import read_requests
from scoville.sim.config import SimConfig
from scoville.sim.driver import simulate_run
from scoville.workload.scenarios import resolve_workload
from scoville.workload.synthetic import scenario

SEED = 3
POINTS = [LoadPoint(index=0, concurrency=1, num_requests=4, warmup_requests=1),
          LoadPoint(index=1, concurrency=2, num_requests=6, warmup_requests=2),
          LoadPoint(index=2, rate=50.0, concurrency=3, num_requests=8, warmup_requests=1)]
ORDERED = {0, 2}    # one lane, and arrivals: their send order is the plan's, not the servers' timing


def _client(emu: Any, workload: Any, points: list[LoadPoint]) -> list[dict[str, Any]]:
    records: list = []
    cfg = ClientConfig(base_url=emu.base_url, model=emu.model)
    t0 = time.perf_counter()
    for point in points:
        run_point_here(cfg, workload, point, t0=t0, t_start=time.perf_counter() - t0, on_record=records.append,
                       seed=SEED)
    return [{"point": r.point, "request_id": r.request_id, "session_id": r.session_id, "turn": r.turn,
             "warmup": r.warmup, "t_sent": r.t_sent} for r in records]


def _simulated(workload: Any, points: list[LoadPoint], tmp_path: Any) -> list[dict[str, Any]]:
    run = simulate_run(SimConfig.parse({"hardware": "h200", "model": "llama-3.1-8b"}), workload, points, tmp_path,
                       seed=SEED)
    return read_requests(run).to_pylist()


def _sent(records: list[dict[str, Any]], point: int) -> list[tuple]:
    mine = [r for r in records if r["point"] == point]
    return sorted((r["request_id"], r["session_id"], r["turn"], r["warmup"]) for r in mine)


def _order(records: list[dict[str, Any]], point: int) -> list[str]:
    return [r["request_id"] for r in sorted((r for r in records if r["point"] == point), key=lambda r: r["t_sent"])]


@pytest.mark.slow
@pytest.mark.parametrize("workload", [
    scenario(None, isl=64, osl=8, seed=20261204),
    resolve_workload("chat-multiturn", seed=20261204, think_scale=0.0),
], ids=["single-turn", "sessions"])
def test_client_and_simulator_send_the_same_requests(emu, tmp_path, workload):
    points = POINTS if getattr(workload, "kind", None) == "synthetic" else POINTS[:2]
    client, simulated = _client(emu, workload, points), _simulated(workload, points, tmp_path)
    for point in points:
        sent = _sent(client, point.index)
        assert sent == _sent(simulated, point.index)
        assert len(sent) == point.num_requests + point.warmup_requests
        assert sum(warmup for *_, warmup in sent) == point.warmup_requests
        if point.index in ORDERED:
            assert _order(client, point.index) == _order(simulated, point.index)
