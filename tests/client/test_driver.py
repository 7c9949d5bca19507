"""Closed- and open-loop drivers, in one process and over worker processes, against a loopback server."""

from __future__ import annotations

import asyncio
import gc
import time

import msgspec
import pytest
from client_support import Behaviour

from scoville.client.config import ClientConfig
from scoville.client.driver import run_lanes
from scoville.client.workers import WorkerPool, run_point_here
from scoville.load import LoadPoint, arrival_offsets
from scoville.load_policy import LocalSlots, PointLoad, Turn
from scoville.workload.spec import RequestSpec, Session
from scoville.workload.synthetic import SyntheticWorkload


class TwoTurns(msgspec.Struct, frozen=True):
    """A minimal multi-turn workload: every session has two turns, the second after ``think_s``."""

    think_s: float = 0.05
    kind: str = "two-turns"

    def sessions(self, count: int, stream: int = 0) -> list[Session]:
        return [Session(session_id=f"s{i}", requests=(
            RequestSpec(request_id=f"s{i}-t0", session_id=f"s{i}", turn=0, input_tokens=8, output_tokens=4),
            RequestSpec(request_id=f"s{i}-t1", session_id=f"s{i}", turn=1, input_tokens=16, output_tokens=4,
                        think_s=self.think_s),
        )) for i in range(count)]


WL = SyntheticWorkload(isl=32, osl=8, range_ratio=1.0, seed=1)


def run_here(server, point: LoadPoint, workload=WL, seed: int = 0):
    cfg = ClientConfig(base_url=server.base_url, model="test-model")
    recs = []
    t0 = time.perf_counter()
    run_point_here(cfg, workload, point, t0=t0, t_start=0.0, on_record=recs.append, seed=seed)
    return recs


def test_closed_loop_sends_count_flags_first_sent_as_warmup_and_holds_concurrency(server):
    server.set(Behaviour(interval_s=0.004))
    recs = run_here(server, LoadPoint(index=0, concurrency=3, num_requests=9, warmup_requests=3))
    assert len(recs) == 12 and all(r.ok for r in recs)
    assert len({r.request_id for r in recs}) == 12
    by_send = sorted(recs, key=lambda r: r.t_sent)
    assert [r.warmup for r in by_send] == [True] * 3 + [False] * 9
    assert server.max_in_flight == 3


def test_sessions_run_their_turns_in_order_after_think_time(server):
    server.set(Behaviour(interval_s=0.002))
    recs = run_here(server, LoadPoint(index=0, concurrency=2, num_requests=8), workload=TwoTurns())
    assert len(recs) == 8
    by_id = {r.request_id: r for r in recs}
    for i in range(4):
        first, second = by_id[f"s{i}-t0"], by_id[f"s{i}-t1"]
        assert second.turn == 1 and second.session_id == f"s{i}"
        assert second.t_sent >= first.t_done + 0.05


def test_request_count_stops_a_multi_turn_session_midway(server):
    recs = run_here(server, LoadPoint(index=0, concurrency=1, num_requests=3), workload=TwoTurns(think_s=0.0))
    assert [r.request_id for r in sorted(recs, key=lambda r: r.t_sent)] == ["s0-t0", "s0-t1", "s1-t0"]


def test_open_loop_sends_no_earlier_than_the_arrival_schedule(server):
    point = LoadPoint(index=2, rate=40.0, num_requests=10)
    recs = run_here(server, point, seed=5)
    offsets = arrival_offsets(point, 10, 5)
    sent = {int(r.request_id.split("-r")[1]): r.t_sent for r in recs}
    assert len(sent) == 10
    assert all(sent[i] >= offsets[i] for i in range(10))
    assert sorted(sent, key=sent.get) == list(range(10))


def test_open_loop_max_concurrency_caps_requests_in_flight(server):
    server.set(Behaviour(interval_s=0.005))
    recs = run_here(server, LoadPoint(index=0, rate=2000.0, concurrency=2, num_requests=10))
    assert len(recs) == 10 and server.max_in_flight <= 2


def test_duration_stops_sending(server):
    server.set(Behaviour(interval_s=0.01))
    recs = run_here(server, LoadPoint(index=0, concurrency=2, num_requests=10_000, duration_s=0.3))
    assert 2 <= len(recs) < 100
    # Each lane checks the deadline before it sends; a busy box may stamp the send after it, but a lane can pass
    # the check late at most once (its next check comes after that request ends), so at most one late send a lane.
    assert sum(r.t_sent >= 0.3 for r in recs) <= 2


@pytest.mark.slow   # worker processes, each importing scoville
def test_worker_processes_share_counts_warmup_and_one_clock(server):
    server.set(Behaviour(interval_s=0.003))
    cfg = ClientConfig(base_url=server.base_url, model="test-model")
    pool = WorkerPool(2, cfg, WL)
    try:
        recs: list = []
        t0 = time.perf_counter()
        point = LoadPoint(index=0, concurrency=4, num_requests=16, warmup_requests=4)
        pool.run_point(point, t0=t0, t_start=0.0, on_record=recs.append)
        t_end = time.perf_counter() - t0
        second: list = []
        pool.run_point(LoadPoint(index=1, concurrency=4, num_requests=4), t0=t0, t_start=t_end,
                       on_record=second.append)
    finally:
        pool.close()
    assert len(recs) == 20 and len({r.request_id for r in recs}) == 20
    assert sum(r.warmup for r in recs) == 4
    assert {r.worker for r in recs} == {"w0", "w1"}
    assert server.max_in_flight <= 4
    # Times from both workers are on the parent's clock: inside [0, t_end].
    assert all(0 <= r.t_sent <= r.t_done <= t_end for r in recs)
    assert len(second) == 4 and all(r.point == 1 and r.t_sent >= t_end for r in second)


def test_a_failing_lane_ends_the_point_and_every_lane_s_error_is_retrieved():
    """Two lanes both fail (each one's record hits the same full disk): the first failure is raised once the other
    lane has finished too, the point is ended for it, and no task's error is left for asyncio to print at shutdown
    (``run_lanes``; a plain gather left the second one unretrieved)."""
    load = PointLoad(LoadPoint(index=0, concurrency=2, num_requests=4), WL.sessions(4), LocalSlots(4, 4), t_start=0.0)
    order: list[str] = []

    async def follow(turn: Turn) -> None:
        await asyncio.sleep(0.01 * turn.session)          # lane 0 fails first, lane 1 after it
        order.append(f"lane {turn.session} ends, point over: {load.over(0.0)}")
        raise OSError(f"disk full (lane {turn.session})")

    unretrieved: list[dict[str, object]] = []

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _loop, ctx: unretrieved.append(ctx))
        await run_lanes(load, load.lane_starts(2), follow)

    with pytest.raises(OSError, match="lane 0"):
        asyncio.run(main())
    gc.collect()                                           # an unretrieved task error is reported when collected
    assert order == ["lane 0 ends, point over: False", "lane 1 ends, point over: True"]
    assert unretrieved == []
