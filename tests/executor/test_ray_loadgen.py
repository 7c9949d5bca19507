
"""Distributed load generation through two Ray client workers against a loopback server.

Whole sweeps go the way ``scoville sweep --executor ray`` does: ``client.sweep.run_sweep`` with
``Sweep(executor="ray")``, whose points the ``RayLoadCoordinator`` drives; losing a worker, and a client that
fails on the workers, are exercised on the coordinator itself, where they can be staged.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from scoville.client.config import ClientConfig
from scoville.client.errors import ClientError
from scoville.client.ray_pool import LOST, RayLoadCoordinator
from scoville.client.sweep import Sweep, SweepInterrupted, run_sweep
from scoville.errors import UserError
from scoville.load import LoadPoint, concurrency_sweep, rate_sweep
from scoville.metrics import run_metrics
from scoville.power.sources import PowerPlan
from scoville.results.manifest import base_manifest
from scoville.results.schema import RequestRecord
from scoville.results.store import (
    RunWriter,
    read_journal,
    read_manifest,
    read_point_metrics,
    read_requests,
)
from scoville.workload.synthetic import SyntheticWorkload

pytestmark = pytest.mark.ray
PROBE_REQUESTS = 1   # run_sweep's probe sends one 2-token test request before the plan


def ray_sweep(server, workload: Any, points: list[LoadPoint], *, seed: int = 0) -> Sweep:
    """The sweep ``scoville sweep --executor ray --workers 2`` builds against the loopback server."""
    return Sweep(cfg=ClientConfig(base_url=server.base_url, model="test-model"), workload=workload, points=points,
                 power=PowerPlan("none", "chip"), system={"hardware": "loopback", "accelerators": 1}, seed=seed,
                 executor="ray", ray_workers=2)


def manifest_for(cfg, workload, points) -> dict:
    return base_manifest(
        source="measured", target=cfg.to_manifest(), system={"hardware": "loopback", "accelerators": 1},
        model={"name": "test-model"}, serving={}, workload=workload.to_dict(),
        load_plan={"points": [dict(p.to_dict(), label=p.describe()) for p in points]}, power={"source": "none"})


def plan_ids(workload, point) -> list[str]:
    return [s.requests[0].request_id for s in workload.sessions(point.total_requests, stream=point.index)]


def assert_stored_metrics_match_records(run_dir) -> None:
    """points.parquet equals a recompute from the raw records; a mismatch names each point's differing fields
    with both values. The file's schema has a column for every metric, so a figure the recompute leaves out is
    stored as null: absent and None are the same figure (seen beside two CPU burners: a point's median-TPOT
    interval reached 0, so 1/TPOT's interval had no upper end and both sides left interactivity_lo/hi out, the
    file as null), but the recompute may hold no field the schema lacks."""
    stored, rebuilt = read_point_metrics(run_dir), run_metrics(run_dir)
    assert [r["point"] for r in stored] == [r["point"] for r in rebuilt]
    for s, r in zip(stored, rebuilt, strict=True):
        assert r.keys() <= s.keys(), f"point {s['point']}: fields points.parquet cannot hold: {r.keys() - s.keys()}"
    diffs = {s["point"]: {k: (s[k], r.get(k)) for k in s if s[k] != r.get(k)}
             for s, r in zip(stored, rebuilt, strict=True)}
    assert not any(diffs.values()), f"stored vs recomputed, by point: {diffs}"


def test_sweep_through_two_workers_records_exactly_the_plan(ray_cluster, server, tmp_path):
    workload = SyntheticWorkload(isl=32, osl=12, range_ratio=1.0, seed=3)
    points = concurrency_sweep([1, 4], requests_per_concurrency=4, warmup_per_concurrency=1)
    result = run_sweep(ray_sweep(server, workload, points), tmp_path)
    run_dir = result.run_dir

    records = read_requests(run_dir).to_pylist()
    assert result.status == read_manifest(run_dir).status == "complete"
    assert len(records) == sum(p.total_requests for p in points) == server.completed - PROBE_REQUESTS
    for p in points:
        mine = [r for r in records if r["point"] == p.index]
        assert sorted(r["request_id"] for r in mine) == sorted(plan_ids(workload, p))
        assert sum(r["warmup"] for r in mine) == p.warmup_requests
        assert all(r["ok"] and r["output_tokens"] == 12 for r in mine)
    # Concurrency 4 was split 2 + 2 across both workers; the server never saw more than 4 at once.
    assert {r["worker"].split("@")[0] for r in records if r["point"] == 1} == {"ray-0", "ray-1"}
    assert {r["worker"] for r in records if r["point"] == 0} == {records[0]["worker"]}  # C=1: one worker
    assert server.max_in_flight <= 4
    # One clock: every record lies on the coordinator's run clock, in order within each request.
    assert all(0 < r["t_sent"] <= r["t_first_token"] <= r["t_done"] for r in records)
    executor = read_manifest(run_dir).executor
    assert executor["kind"] == "ray" and {s["point"] for s in executor["clock_sync"]} == {0, 1}
    assert len(executor["client_workers"]) == 2 and not executor["lost_workers"]
    assert all(abs(s["offset_s"]) <= s["rtt_s"] / 2 + 1e-6 for s in executor["clock_sync"])  # same host
    # The stored metrics are exactly what recomputing from the records gives, and what the sweep returned.
    assert_stored_metrics_match_records(run_dir)
    assert [r["num_requests"] for r in result.rows] == [p.num_requests for p in points]


def test_rate_split_keeps_the_plans_arrivals_and_warmup(ray_cluster, server, tmp_path):
    workload = SyntheticWorkload(isl=16, osl=4, seed=5)
    points = rate_sweep([40.0], num_requests=24, warmup_requests=6, max_concurrency=4)
    records = read_requests(run_sweep(ray_sweep(server, workload, points, seed=9), tmp_path).run_dir).to_pylist()
    ids = plan_ids(workload, points[0])
    assert sorted(r["request_id"] for r in records) == sorted(ids)
    # Warm-up = the plan's first 6 arrivals, whichever worker sent them.
    assert {r["request_id"] for r in records if r["warmup"]} == set(ids[:6])
    assert len({r["worker"] for r in records}) == 2
    assert server.max_in_flight <= 4


def test_a_worker_killed_mid_point_loses_only_its_in_flight_requests(ray_cluster, server, tmp_path):
    server.interval_s = 0.02  # 20 tokens: 0.4 s per request, so the kill lands mid-stream
    cfg = ClientConfig(base_url=server.base_url, model="test-model")
    workload = SyntheticWorkload(isl=16, osl=20, range_ratio=1.0, seed=7)
    point = concurrency_sweep([4], num_requests=16, warmup_requests=4)[0]
    writer = RunWriter.create(tmp_path, manifest_for(cfg, workload, [point]))
    coordinator = RayLoadCoordinator(cfg, workload, workers=2, num_cpus=0.5, call_timeout_s=5.0)
    coordinator.start_workers()
    victim = coordinator.actors[1]
    seen = []

    def journal_and_kill_after_the_first_record(rec) -> None:
        # after the victim's own first record: the coordinator has then heard from it which sessions it started,
        # so its other lane's request is known to be in flight (the first record of either worker was not enough
        # on a loaded machine: the victim could die before any report of what it had started)
        writer.record(rec)
        if rec.worker == coordinator.names[1]:
            seen.append(rec)
            if len(seen) == 1:
                ray_cluster.kill(victim, no_restart=True)

    try:
        records = coordinator.run_point(point, t0=writer.t0, t_start=writer.now(),
                                        on_record=journal_and_kill_after_the_first_record)
        writer.write_point(point.index, records)
    finally:
        coordinator.close()
        writer.finish()

    lost = [r for r in records if not r.ok]
    assert lost and all(r.error.startswith(LOST) for r in lost)
    assert all(r.worker == coordinator.names[1] for r in lost)
    assert len(lost) <= 2  # the victim ran 2 of the 4 lanes: at most 2 requests were in flight on it
    # The point still sent its whole plan: every request accounted for once, the rest re-homed to the survivor.
    assert sorted(r.request_id for r in records) == sorted(plan_ids(workload, point))
    assert sum(r.warmup for r in records) == point.warmup_requests
    assert sorted(r.request_id for r in read_journal(writer.run_dir)) == sorted(r.request_id for r in records)
    assert coordinator.names[1] in coordinator.describe()["lost_workers"]
    row = run_metrics(writer.run_dir)[0]
    assert row["num_errors"] == sum(1 for r in lost if not r.warmup)


def test_a_worker_lost_between_clock_sync_and_start_hands_its_share_to_a_survivor(ray_cluster, server, tmp_path):
    cfg = ClientConfig(base_url=server.base_url, model="test-model")
    workload = SyntheticWorkload(isl=16, osl=4, range_ratio=1.0, seed=11)
    point = concurrency_sweep([4], num_requests=8, warmup_requests=2)[0]
    writer = RunWriter.create(tmp_path, manifest_for(cfg, workload, [point]))
    coordinator = RayLoadCoordinator(cfg, workload, workers=2, num_cpus=0.5, call_timeout_s=5.0)
    coordinator.start_workers()
    sync = coordinator._sync

    def sync_then_kill_worker_1(i):
        out = sync(i)
        if i == 1:
            ray_cluster.kill(coordinator.actors[1], no_restart=True)
        return out

    coordinator._sync = sync_then_kill_worker_1
    try:
        records = coordinator.run_point(point, t0=writer.t0, t_start=writer.now(), on_record=writer.record)
        lost_workers = coordinator.describe()["lost_workers"]
    finally:
        coordinator.close()
        writer.finish()
    # Nothing was in flight on the dead worker: the survivor sent the whole plan.
    assert sorted(r.request_id for r in records) == sorted(plan_ids(workload, point))
    assert all(r.ok for r in records) and sum(r.warmup for r in records) == point.warmup_requests
    assert {r.worker for r in records} == {coordinator.names[0]}
    assert lost_workers == [coordinator.names[1]]


def test_workers_the_cluster_cannot_place_are_a_one_line_error(ray_cluster, server):
    cfg = ClientConfig(base_url=server.base_url, model="test-model")
    coordinator = RayLoadCoordinator(cfg, SyntheticWorkload(isl=8, osl=2), workers=2, num_cpus=0.5,
                                     resources={"scoville_client": 1}, start_timeout_s=2.0)
    with pytest.raises(UserError, match=r"could not start 2 client workers within 2 s.*scoville_client.*ray status"):
        coordinator.start_workers()


def test_multi_turn_sessions_stay_whole_on_one_worker_and_in_order(ray_cluster, server, tmp_path):
    from scoville.workload.sessions import SessionWorkload, fixed

    workload = SessionWorkload(name="tiny-chat", turns=fixed(3), first_message=fixed(16), message=fixed(8),
                               output=fixed(4), think=fixed(0.01), seed=2)
    points = concurrency_sweep([4], num_requests=12, warmup_requests=2)
    records = read_requests(run_sweep(ray_sweep(server, workload, points), tmp_path).run_dir).to_pylist()
    assert len(records) == 14 == len({r["request_id"] for r in records})
    assert sum(r["warmup"] for r in records) == 2 and all(r["ok"] for r in records)
    by_session: dict[str, list[dict]] = {}
    for r in records:
        by_session.setdefault(r["session_id"], []).append(r)
    assert len({r["worker"] for r in records}) == 2
    for turns in by_session.values():
        assert len({r["worker"] for r in turns}) == 1  # a conversation never hops workers
        turns.sort(key=lambda r: r["turn"])
        assert [r["turn"] for r in turns] == list(range(len(turns)))
        assert all(b["t_sent"] > a["t_done"] for a, b in itertools.pairwise(turns))  # next turn after the reply
    assert server.max_in_flight <= 4


class InterruptOnTheThird:
    """A sweep observer that presses Ctrl-C when the third record comes in (the journal has it already)."""

    def __init__(self) -> None:
        self.seen: list[RequestRecord] = []

    def start_point(self, point: LoadPoint, position: int, total: int) -> None:
        pass

    def record(self, rec: RequestRecord) -> None:
        self.seen.append(rec)
        if len(self.seen) == 3:
            raise KeyboardInterrupt

    def end_point(self, point: LoadPoint, row: dict[str, Any] | None) -> None:
        pass

    def warn(self, message: str) -> None:
        pass


def test_ctrl_c_marks_the_run_interrupted_and_keeps_what_finished(ray_cluster, server, tmp_path):
    server.interval_s = 0.01
    workload = SyntheticWorkload(isl=8, osl=10, range_ratio=1.0, seed=1)
    points = concurrency_sweep([2, 4], num_requests=40, warmup_requests=0)
    observer = InterruptOnTheThird()
    with pytest.raises(SweepInterrupted) as stopped:
        run_sweep(ray_sweep(server, workload, points), tmp_path, observer=observer)
    run_dir = stopped.value.result.run_dir
    assert stopped.value.result.status == read_manifest(run_dir).status == "interrupted"
    journal = read_journal(run_dir)
    assert 3 <= len(journal) < 40  # stopped early, nothing finished was dropped from the journal
    assert {r.request_id for r in observer.seen} <= {r.request_id for r in journal}
    assert not read_manifest(run_dir).executor["lost_workers"]  # stopped, not lost


def test_a_client_that_fails_on_the_workers_surfaces_as_one_clear_error(ray_cluster, server, tmp_path):
    # Only the workers read this path (it does not exist), as with a tokenizer missing on client nodes. Staged on
    # the coordinator: a sweep's own probe would read it here first and stop before any worker started.
    cfg = ClientConfig(base_url=server.base_url, model="test-model", api="chat", tokenizer=str(tmp_path / "nope"))
    workload = SyntheticWorkload(isl=8, osl=2, seed=1)
    point = concurrency_sweep([2], num_requests=4, warmup_requests=0)[0]
    writer = RunWriter.create(tmp_path / "runs", manifest_for(cfg, workload, [point]))
    coordinator = RayLoadCoordinator(cfg, workload, workers=2, num_cpus=0.5, call_timeout_s=5.0)
    try:
        with pytest.raises(ClientError, match=r"client worker failed: ray-\d@\S+: ClientError: .*tokenizer"):
            coordinator.run_point(point, t0=writer.t0, t_start=writer.now(), on_record=writer.record)
    finally:
        coordinator.close()
        writer.finish("interrupted")
    assert read_journal(writer.run_dir) == []
    assert server.completed == 0
