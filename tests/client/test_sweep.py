"""Whole sweeps into real run directories: manifest, journal, recompute, probe, power sources."""

from __future__ import annotations

import json
import time

import msgspec
import pyarrow.parquet as pq
import pytest
from client_support import Behaviour, raw_socket_server

from scoville.client.config import ClientConfig
from scoville.client.errors import ClientError
from scoville.client.sweep import Sweep, resume_sweep, run_sweep, sweep_from_manifest
from scoville.load import concurrency_sweep, rate_sweep
from scoville.metrics import recompute
from scoville.power.sources import PowerError, cost_per_hour, plan_power, system_info
from scoville.results.schema import RequestRecord
from scoville.results.store import (
    POINT_METRICS,
    read_journal,
    read_manifest,
    read_power,
    read_requests,
)
from scoville.workload.synthetic import SyntheticWorkload

WL = SyntheticWorkload(isl=24, osl=6, range_ratio=1.0, seed=2, name="tiny")


def make_sweep(server, points, *, power=None, api_key=None, workers=1) -> Sweep:
    plan = power or plan_power("rated", hardware="h200", accelerators=2)
    return Sweep(cfg=ClientConfig(base_url=server.base_url, model="test-model", api_key=api_key), workload=WL,
                 points=points, power=plan, system=system_info("h200", 2, plan, 1.5), workers=workers)


def test_sweep_writes_a_complete_run_and_recompute_reproduces_it(server, tmp_path):
    server.set(Behaviour(interval_s=0.001))
    result = run_sweep(make_sweep(server, concurrency_sweep([1, 2], num_requests=4, warmup_requests=1),
                                  api_key="sk-verysecret"), tmp_path)
    run = result.run_dir
    m = json.loads((run / "manifest.json").read_text())  # the file as written
    assert result.status == m["status"] == "complete" and m["source"] == "measured"
    assert [p["label"] for p in m["load_plan"]["points"]] == ["c=1", "c=2"]
    assert {k: m["power"][k] for k in ("source", "boundary", "watts_per_accelerator")} == \
        {"source": "rated", "boundary": "chip", "watts_per_accelerator": 700.0}
    assert m["system"]["accelerators"] == 2 and m["system"]["cost_per_accelerator_hour"] == 1.5
    assert m["target"]["extensions"] is True and m["target"]["model"] == "test-model"
    assert m["workload"]["name"] == "tiny" and "files" in m
    for f in run.rglob("*"):
        if f.is_file():
            assert b"verysecret" not in f.read_bytes(), f
    assert server.headers[-1]["Authorization"] == "Bearer sk-verysecret"
    requests = read_requests(run)
    assert requests.num_rows == 10 and len(read_journal(run)) == 10
    stored = pq.read_table(run / POINT_METRICS).to_pylist()
    assert [r["num_requests"] for r in stored] == [4, 4]
    assert stored == result.rows
    rebuilt = recompute(run)
    assert rebuilt == stored
    assert stored[0]["total_throughput_per_kw"] == pytest.approx(stored[0]["total_throughput"] / 1.4)


def test_unreachable_server_fails_fast_with_one_line_and_no_run(tmp_path):
    sweep = Sweep(cfg=ClientConfig(base_url="http://127.0.0.1:9", model="m"), workload=WL,
                  points=concurrency_sweep([1], num_requests=1), power=plan_power("rated", hardware="h200",
                                                                                   accelerators=1), system={})
    t = time.perf_counter()
    with pytest.raises(ClientError, match=r"cannot reach http://127.0.0.1:9: is the server running\?") as e:
        run_sweep(sweep, tmp_path)
    assert "\n" not in str(e.value) and time.perf_counter() - t < 10
    assert list(tmp_path.iterdir()) == []


def test_a_port_that_does_not_speak_http_fails_with_one_line_and_no_run(tmp_path):
    """--url pointing at another service (say SSH's port): a ClientError naming the URL, not aiohttp's traceback."""
    listener = raw_socket_server(lambda request: b"SSH-2.0-OpenSSH_9.6\r\n\r\n")
    port = listener.getsockname()[1]
    sweep = Sweep(cfg=ClientConfig(base_url=f"http://127.0.0.1:{port}", model="m"), workload=WL,
                  points=concurrency_sweep([1], num_requests=1), power=plan_power("rated", hardware="h200",
                                                                                   accelerators=1), system={})
    try:
        with pytest.raises(ClientError, match=rf"127.0.0.1:{port} did not answer as an HTTP server") as e:
            run_sweep(sweep, tmp_path)
    finally:
        listener.close()
    assert "\n" not in str(e.value)
    assert list(tmp_path.iterdir()) == []


def test_model_must_be_served(server, tmp_path):
    sweep = make_sweep(server, concurrency_sweep([1], num_requests=1))
    sweep.cfg.model = "other"
    with pytest.raises(ClientError, match="does not serve model 'other'; it serves: test-model"):
        run_sweep(sweep, tmp_path)


def test_model_defaults_to_the_served_one(server, tmp_path):
    sweep = make_sweep(server, concurrency_sweep([1], num_requests=1))
    sweep.cfg.model = ""
    run = run_sweep(sweep, tmp_path).run_dir
    assert read_manifest(run).model.name == "test-model" and server.bodies[-1]["model"] == "test-model"


def test_strict_openai_server_gets_requests_without_extensions(server, tmp_path):
    server.set(Behaviour(reject_extensions=True))
    result = run_sweep(make_sweep(server, concurrency_sweep([1], num_requests=2, warmup_requests=0)), tmp_path)
    assert read_manifest(result.run_dir).target.extensions is False
    assert result.rows[0]["num_ok"] == 2
    assert "ignore_eos" not in server.bodies[-1] and "min_tokens" not in server.bodies[-1]


def test_failing_requests_are_counted_not_fatal(server, tmp_path):
    server.behave = lambda i, body: Behaviour(status=429) if i % 2 else Behaviour()
    result = run_sweep(make_sweep(server, concurrency_sweep([1], num_requests=6, warmup_requests=0)), tmp_path)
    row = result.rows[0]
    assert row["num_requests"] == 6 and row["num_errors"] == 3 and row["num_ok"] == 3
    errors = [r for r in read_requests(result.run_dir).to_pylist() if not r["ok"]]
    assert {r["http_status"] for r in errors} == {429}


def test_rate_sweep_runs_open_loop(server, tmp_path):
    result = run_sweep(make_sweep(server, rate_sweep([100.0, 200.0], num_requests=5)), tmp_path)
    assert [r["label"] for r in result.rows] == ["rate=100/s", "rate=200/s"]
    assert all(r["num_ok"] == 5 for r in result.rows)


@pytest.mark.slow   # spawns two client worker processes (test_driver keeps the pool's own test fast)
def test_sweep_over_two_worker_processes(server, tmp_path):
    server.set(Behaviour(interval_s=0.001))
    result = run_sweep(make_sweep(server, concurrency_sweep([4], num_requests=12, warmup_requests=4), workers=2),
                       tmp_path)
    recs = read_requests(result.run_dir).to_pylist()
    assert len(recs) == 16 and {r["worker"] for r in recs} == {"w0", "w1"}
    assert sum(r["warmup"] for r in recs) == 4 and result.rows[0]["num_ok"] == 12


@pytest.mark.slow   # spawns two client worker processes
def test_open_loop_in_flight_cap_holds_with_more_workers_than_the_cap(server, tmp_path):
    """--rate with --max-concurrency 1 over 2 workers: still at most 1 request in flight, and every request sent."""
    server.set(Behaviour(ttft_s=0.03))
    result = run_sweep(make_sweep(server, rate_sweep([200.0], num_requests=8, max_concurrency=1), workers=2),
                       tmp_path)
    assert server.max_in_flight == 1 and result.rows[0]["num_ok"] == 8


def test_resume_skips_finished_points_and_redoes_the_rest(server, tmp_path):
    points = concurrency_sweep([1, 2, 3], num_requests=2, warmup_requests=0)
    sweep = make_sweep(server, points[:1])
    first = run_sweep(sweep, tmp_path).run_dir
    # Pretend the sweep had three points and died in the second (a journaled record, no Parquet).
    m = json.loads((first / "manifest.json").read_text())  # the file as written
    full = make_sweep(server, points)
    from scoville.client.sweep import load_plan

    m["load_plan"] = msgspec.to_builtins(load_plan(points, 0, 1))
    m["status"] = "running"
    (first / "manifest.json").write_text(json.dumps(m))
    with (first / "requests.jsonl").open("ab") as journal:
        journal.write(msgspec.json.encode(RequestRecord(point=1, request_id="torn", t_sent=9.0, ok=False)) + b"\n")
    before = read_requests(first).to_pylist()
    sent = len(server.bodies)
    result = resume_sweep(first)
    assert result.status == "complete" and [r["point"] for r in result.rows] == [0, 1, 2]
    assert len(server.bodies) - sent == 1 + 2 + 2  # the probe, then points 1 and 2 only
    after = read_requests(first).to_pylist()
    assert sorted(r["request_id"] for r in after if r["point"] == 1) == ["p1-r0", "p1-r1"]
    assert [r for r in after if r["point"] == 0] == [r for r in before if r["point"] == 0]
    assert read_manifest(first).resumed_at and full.points == sweep_from_manifest(read_manifest(first)).points


def test_resume_url_is_normalised_like_url(server, tmp_path):
    """``--resume RUN --url http://host:port/v1/`` must reach .../v1/completions, not .../v1/v1/completions."""
    result = run_sweep(make_sweep(server, concurrency_sweep([1], num_requests=1, warmup_requests=0)), tmp_path)
    sweep = sweep_from_manifest(read_manifest(result.run_dir), base_url=server.base_url + "/v1/")
    assert sweep.cfg.base_url == server.base_url
    assert sweep.cfg.endpoint == server.base_url + "/v1/completions"


def test_csv_meter_power_on_the_run_clock(server, tmp_path):
    meter = tmp_path / "meter.csv"
    now = time.time()
    meter.write_text("timestamp,watts,device\n" + "".join(
        f"{now - 5 + 0.5 * i},{400 + (i % 2) * 200},psu0\n" for i in range(200)))
    plan = plan_power("csv", hardware=None, accelerators=1, csv_path=str(meter))
    result = run_sweep(make_sweep(server, concurrency_sweep([1], num_requests=3), power=plan), tmp_path / "runs")
    power = read_power(result.run_dir)
    assert power.num_rows == 200 and set(power.column("device").to_pylist()) == {"psu0"}
    t = power.column("t").to_pylist()
    assert -6 < t[0] < -4  # epoch seconds mapped onto the run clock (run started ~now)
    row = result.rows[0]
    assert row["power_source"] == "csv" and row["power_boundary"] == "node"
    assert 400 <= row["power_w"] <= 600 and row["energy_j"] > 0


def test_missing_meter_file_still_finishes_the_run(server, tmp_path):
    """The meter CSV is read at the end; if it is not there the run is still completed, then PowerError says so."""
    plan = plan_power("csv", hardware=None, accelerators=1, csv_path=str(tmp_path / "never-written.csv"))
    with pytest.raises(PowerError, match="no such file.*measured requests are kept in"):
        run_sweep(make_sweep(server, concurrency_sweep([1], num_requests=2, warmup_requests=0), power=plan),
                  tmp_path / "runs")
    (run_dir,) = list((tmp_path / "runs").iterdir())
    assert read_manifest(run_dir).status == "complete"
    assert len(read_requests(run_dir)) == 2 and (run_dir / POINT_METRICS).exists()


def test_relative_csv_needs_columns(tmp_path):
    from scoville.power.csv_meter import read_power_csv

    bad = tmp_path / "bad.csv"
    bad.write_text("time,power\n1,2\n")
    with pytest.raises(PowerError, match="needs columns t .* or timestamp"):
        read_power_csv(bad, [])
    good = tmp_path / "good.csv"
    good.write_text("t,watts\n0,100\n1,300\n")
    table = read_power_csv(good, [])
    assert table.column("t").to_pylist() == [0.0, 1.0] and table.column("device").to_pylist() == ["meter"] * 2
    for row in ("2,nan", "2,-5", "inf,100"):
        odd = tmp_path / "odd.csv"
        odd.write_text(f"t,watts\n0,100\n{row}\n")
        with pytest.raises(PowerError, match=r"odd.csv:3: t must be finite"):
            read_power_csv(odd, [])
    binary = tmp_path / "meter.xlsx.csv"
    binary.write_bytes(b"PK\x03\x04\xff\xfe\x00t,watts\n")
    with pytest.raises(PowerError, match="not a UTF-8 text CSV"):
        read_power_csv(binary, [])


def test_power_plans_from_the_catalog_and_flags():
    assert plan_power("rated", hardware="h200", accelerators=8).watts_per_accelerator == 700
    allin = plan_power("all-in", hardware="h200", accelerators=8)
    assert (allin.watts_per_accelerator, allin.boundary) == (1730, "rack")
    assert plan_power("rated", hardware="my-box", accelerators=1, rated_watts=450).watts_per_accelerator == 450
    with pytest.raises(PowerError, match="--rated-watts"):
        plan_power("rated", hardware=None, accelerators=1)
    with pytest.raises(PowerError, match="--power-csv"):
        plan_power("csv", hardware=None, accelerators=1)
    with pytest.raises(PowerError, match="unknown --power"):
        plan_power("solar", hardware=None, accelerators=1)
    assert cost_per_hour("neocloud", "h200") == 1.74 and cost_per_hour("2.5", None) == 2.5
    with pytest.raises(PowerError, match="presets"):
        cost_per_hour("cheap", "h200")
    for bad in ("nan", "inf", "-1"):  # float() reads the first two; neither is a price
        with pytest.raises(PowerError, match="positive number"):
            cost_per_hour(bad, None)
    with pytest.raises(PowerError, match="--rated-watts"):
        plan_power("rated", hardware=None, accelerators=1, rated_watts=float("nan"))
