"""Distributed load generation through two Ray client workers against a loopback server."""

from __future__ import annotations

import pytest

from scoville.client.config import ClientConfig
from scoville.errors import UserError
from scoville.executor.loadgen import LOST, RayLoadCoordinator, sweep_on_ray
from scoville.load import concurrency_sweep, rate_sweep
from scoville.metrics import run_metrics
from scoville.results.manifest import base_manifest
from scoville.results.store import RunWriter, read_journal, read_manifest, read_point_metrics, read_requests
from scoville.workload.synthetic import SyntheticWorkload

pytestmark = pytest.mark.ray


def manifest_for(cfg, workload, points) -> dict:
    return base_manifest(
        source="measured", target=cfg.to_manifest(), system={"hardware": "loopback", "accelerators": 1},
        model={"name": "test-model"}, serving={}, workload=workload.to_dict(),
        load_plan={"points": [dict(p.to_dict(), label=p.label()) for p in points]}, power={"source": "none"})


def plan_ids(workload, point) -> list[str]:
    return [s.requests[0].request_id for s in workload.sessions(point.total_requests, stream=point.index)]


def test_sweep_through_two_workers_records_exactly_the_plan(ray_cluster, server, tmp_path):
    cfg = ClientConfig(base_url=server.base_url, model="test-model")
    workload = SyntheticWorkload(isl=32, osl=12, range_ratio=1.0, seed=3)
    points = concurrency_sweep([1, 4], requests_per_concurrency=4, warmup_per_concurrency=1)
    run_dir = sweep_on_ray(cfg, workload, points, tmp_path, manifest_for(cfg, workload, points),
                           workers=2, num_cpus=0.5)

    records = read_requests(run_dir).to_pylist()
    assert read_manifest(run_dir)["status"] == "complete"
    assert len(records) == sum(p.total_requests for p in points) == server.completed
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
    executor = read_manifest(run_dir)["executor"]
    assert len(executor["client_workers"]) == 2 and not executor["lost_workers"]
    assert all(abs(s["offset_s"]) <= s["rtt_s"] / 2 + 1e-6 for s in executor["clock_sync"])  # same host
    # The stored metrics are exactly what recomputing from the records gives.
    assert read_point_metrics(run_dir) == run_metrics(run_dir)


def test_rate_split_keeps_the_plans_arrivals_and_warmup(ray_cluster, server, tmp_path):
    cfg = ClientConfig(base_url=server.base_url, model="test-model")
    workload = SyntheticWorkload(isl=16, osl=4, seed=5)
    points = rate_sweep([40.0], num_requests=24, warmup_requests=6, max_concurrency=4)
    run_dir = sweep_on_ray(cfg, workload, points, tmp_path, manifest_for(cfg, workload, points),
                           workers=2, num_cpus=0.5, seed=9)
    records = read_requests(run_dir).to_pylist()
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
        writer.record(rec)
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
    cfg = ClientConfig(base_url=server.base_url, model="test-model")
    points = concurrency_sweep([4], num_requests=12, warmup_requests=2)
    run_dir = sweep_on_ray(cfg, workload, points, tmp_path, manifest_for(cfg, workload, points),
                           workers=2, num_cpus=0.5)
    records = read_requests(run_dir).to_pylist()
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
        assert all(b["t_sent"] > a["t_done"] for a, b in zip(turns, turns[1:]))  # next turn after the reply
    assert server.max_in_flight <= 4


def test_ctrl_c_marks_the_run_interrupted_and_keeps_what_finished(ray_cluster, server, tmp_path):
    server.interval_s = 0.01
    cfg = ClientConfig(base_url=server.base_url, model="test-model")
    workload = SyntheticWorkload(isl=8, osl=10, range_ratio=1.0, seed=1)
    points = concurrency_sweep([2, 4], num_requests=40, warmup_requests=0)
    seen = []

    def interrupt_on_the_third(rec) -> None:
        seen.append(rec)
        if len(seen) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        sweep_on_ray(cfg, workload, points, tmp_path, manifest_for(cfg, workload, points), workers=2,
                     num_cpus=0.5, on_record=interrupt_on_the_third)
    (run_dir,) = tmp_path.iterdir()
    assert read_manifest(run_dir)["status"] == "interrupted"
    journal = read_journal(run_dir)
    assert 3 <= len(journal) < 40  # stopped early, nothing finished was dropped from the journal
    assert {r.request_id for r in seen} <= {r.request_id for r in journal}


def test_the_clients_own_sweep_runs_on_ray_client_workers(ray_cluster, server, tmp_path):
    """``Sweep(executor="ray")``: the client's run_sweep (probe, manifest, journal, Parquet,
    recompute) runs unchanged; only the object that drives each point is the Ray coordinator."""
    from scoville.client import sweep as client_sweep
    from scoville.power.sources import PowerPlan

    cfg = ClientConfig(base_url=server.base_url, model="test-model")
    workload = SyntheticWorkload(isl=16, osl=6, range_ratio=1.0, seed=8)
    points = concurrency_sweep([2, 4], requests_per_concurrency=3, warmup_per_concurrency=1)
    sweep = client_sweep.Sweep(cfg=cfg, workload=workload, points=points, power=PowerPlan("none", "chip"),
                               system={"hardware": "loopback", "accelerators": 1}, executor="ray", ray_workers=2)
    result = client_sweep.run_sweep(sweep, tmp_path)
    records = read_requests(result.run_dir).to_pylist()
    assert result.status == "complete"
    assert len(records) == sum(p.total_requests for p in points)
    assert {r["worker"].split("@")[0] for r in records} == {"ray-0", "ray-1"}
    assert [r["num_requests"] for r in result.rows] == [p.num_requests for p in points]
    executor = read_manifest(result.run_dir)["executor"]
    assert executor["kind"] == "ray" and {s["point"] for s in executor["clock_sync"]} == {0, 1}


def test_a_client_that_fails_on_the_workers_surfaces_as_one_clear_error(ray_cluster, server, tmp_path):
    # Only the workers see this path (it does not exist there), as with a tokenizer missing on client nodes.
    cfg = ClientConfig(base_url=server.base_url, model="test-model", api="chat", tokenizer=str(tmp_path / "nope"))
    workload = SyntheticWorkload(isl=8, osl=2, seed=1)
    points = concurrency_sweep([2], num_requests=4, warmup_requests=0)
    with pytest.raises(UserError, match=r"client worker failed: ray-\d@\S+: ClientError: .*tokenizer"):
        sweep_on_ray(cfg, workload, points, tmp_path / "runs", manifest_for(cfg, workload, points), workers=2,
                     num_cpus=0.5)
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert read_manifest(run_dir)["status"] == "interrupted"
    assert server.completed == 0
