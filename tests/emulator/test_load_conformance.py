"""One load plan through the measuring client (against the emulator) and through the simulator: both follow one
load policy (``scoville.load_policy.PointLoad``), so they must send alike.

The emulator serves the simulator's engine in real time, so the two see the same server. Compared per point:
which requests were sent (ids, sessions, turns), which were warm-up, how many (the plan's count, or the arrivals
before a duration cut-off), and, where no server timing decides it (one closed-loop lane, open-loop arrivals),
the order they were sent in. The plan covers a closed loop of one lane and of two, open-loop arrivals at a rate
behind an in-flight cap, a duration cut-off, and a request cap that ends a multi-turn session part-way.
Everything goes to the emulator on 127.0.0.1 and is bounded (at most 14 requests a point, a few seconds).
"""

from __future__ import annotations

import time
from typing import Any

import msgspec
import numpy as np
import pytest

from scoville.client.config import ClientConfig
from scoville.client.workers import run_point_here
from scoville.load import LoadPoint, session_start_offsets
from scoville.load_policy import point_sessions
from scoville.results.store import read_requests
from scoville.sim.config import SimConfig
from scoville.sim.driver import simulate_run
from scoville.workload.scenarios import resolve_workload
from scoville.workload.synthetic import scenario

SEED = 3
CLOSED_ONE_LANE = LoadPoint(index=0, concurrency=1, num_requests=4, warmup_requests=1)
CLOSED_TWO_LANES = LoadPoint(index=1, concurrency=2, num_requests=6, warmup_requests=2)
OPEN_CAPPED = LoadPoint(index=2, rate=50.0, concurrency=3, num_requests=8, warmup_requests=1)
OPEN_SLOW = LoadPoint(index=3, rate=5.0, num_requests=12, warmup_requests=2)   # cut by a duration (below)
MIN_GAP_S = 0.3   # the cut-off sits mid-way in a gap this wide: a client late by < MIN_GAP_S/2 still decides alike


def cut_by_duration(point: LoadPoint) -> tuple[LoadPoint, int]:
    """``point`` with a duration ending mid-way in its widest gap between arrivals (after its third), and how
    many arrivals come before it; the plan alone decides the count, not how fast anything answered."""
    offsets = session_start_offsets(point, point.total_requests, SEED)
    gaps = np.diff(offsets)
    k = 3 + int(np.argmax(gaps[3:-1]))             # the cut falls between arrival k and k+1
    assert gaps[k] >= MIN_GAP_S, "the plan has no gap wide enough to cut in"
    return msgspec.structs.replace(point, duration_s=float(offsets[k] + gaps[k] / 2)), k + 1


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


def _compare(client: list[dict[str, Any]], simulated: list[dict[str, Any]], point: LoadPoint, expected: int,
             ordered: bool) -> None:
    sent = _sent(client, point.index)
    assert sent == _sent(simulated, point.index)
    assert len(sent) == expected
    assert sum(warmup for *_, warmup in sent) == min(point.warmup_requests, expected)
    if ordered:
        assert _order(client, point.index) == _order(simulated, point.index)


@pytest.mark.slow
def test_single_turn_plan_sends_the_same_requests_in_the_same_order(emu, tmp_path):
    timed, before_cut = cut_by_duration(OPEN_SLOW)
    points = [CLOSED_ONE_LANE, CLOSED_TWO_LANES, OPEN_CAPPED, timed]
    workload = scenario(None, isl=64, osl=8, seed=20261204)
    client, simulated = _client(emu, workload, points), _simulated(workload, points, tmp_path)
    _compare(client, simulated, CLOSED_ONE_LANE, CLOSED_ONE_LANE.total_requests, ordered=True)
    _compare(client, simulated, CLOSED_TWO_LANES, CLOSED_TWO_LANES.total_requests, ordered=False)
    _compare(client, simulated, OPEN_CAPPED, OPEN_CAPPED.total_requests, ordered=True)
    assert before_cut < timed.total_requests      # the duration, not the count, ended this point
    _compare(client, simulated, timed, before_cut, ordered=True)


@pytest.mark.slow
def test_session_plan_stops_at_the_request_cap_part_way_through_a_session(emu, tmp_path):
    points = [CLOSED_ONE_LANE, CLOSED_TWO_LANES]
    workload = resolve_workload("chat-multiturn", seed=20261204, think_scale=0.0)
    first = point_sessions(workload, CLOSED_ONE_LANE)[0]
    assert len(first.requests) > CLOSED_ONE_LANE.total_requests   # the cap ends the first conversation
    client, simulated = _client(emu, workload, points), _simulated(workload, points, tmp_path)
    _compare(client, simulated, CLOSED_ONE_LANE, CLOSED_ONE_LANE.total_requests, ordered=True)
    assert {s for _, s, *_ in _sent(client, CLOSED_ONE_LANE.index)} == {first.session_id}
    _compare(client, simulated, CLOSED_TWO_LANES, CLOSED_TWO_LANES.total_requests, ordered=False)
