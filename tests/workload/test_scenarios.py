"""The --scenario registry and the workload commands."""

import json
from importlib.resources import files
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from scoville.cli import workload_cmd
from scoville.workload.scenarios import Workload, describe_scenario, list_scenarios, resolve_workload
from scoville.workload.synthetic import SyntheticWorkload, WorkloadError
from scoville.workload.traces import TraceWorkload, load_trace

DATA = Path(str(files("scoville") / "data" / "traces"))


@pytest.mark.parametrize("name, kind", [
    ("8k1k", "synthetic"), ("1k1k", "synthetic"), ("chat-multiturn", "sessions"), ("agentic-coding", "sessions"),
    ("longctx-128k", "sessions"), ("mix-chat-agentic", "mix"), ("mix-all", "mix"),
    ("mix:chat-multiturn=1,agentic-coding=2", "mix"),
])
def test_every_named_scenario_resolves_to_a_workload(name, kind):
    w = resolve_workload(name, seed=3)
    assert isinstance(w, Workload) and w.kind == kind and w.name == name
    assert json.dumps(w.to_dict())  # the manifest can record it
    assert w.to_dict()["seed"] == 3
    sessions = w.sessions(2, stream=0)
    assert len(sessions) == 2 and all(s.requests for s in sessions)


def test_listing_covers_every_name_and_each_has_parameters():
    names = [n for n, _ in list_scenarios()]
    for n in names[:-1]:
        assert describe_scenario(n)
    assert {"8k1k", "chat-multiturn", "agentic-coding", "longctx-128k"} <= set(names)


def test_custom_lengths_and_traces_resolve():
    w = resolve_workload(None, isl=100, osl=20, range_ratio=1.0)
    assert isinstance(w, SyntheticWorkload) and w.sessions(1)[0].requests[0].input_tokens == 100
    t = resolve_workload(None, trace=DATA / "azure_sample.csv", time_scale=2.0)
    assert isinstance(t, TraceWorkload) and t.options.time_scale == 2.0
    assert resolve_workload("chat-multiturn", think_scale=0).sessions(1)[0].requests[-1].think_s == 0


@pytest.mark.parametrize("kwargs, match", [
    ({"name": "9k9k"}, "unknown scenario"),
    ({"name": "8k1k", "trace": DATA / "azure_sample.csv"}, "not both"),
    ({"name": None, "trace_format": "azure"}, "needs --trace"),
    ({"name": "agentic-coding", "isl": 10}, "single-turn lengths"),
    ({"name": "8k1k", "time_scale": 2}, "session scenarios and traces"),
    ({"name": "chat-multiturn", "time_scale": 2}, "do not apply"),
    ({"name": None}, "give --scenario"),
])
def test_bad_requests_are_user_errors(kwargs, match):
    name = kwargs.pop("name")
    with pytest.raises(WorkloadError, match=match):
        resolve_workload(name, **kwargs)


@pytest.fixture
def cli():
    app = typer.Typer()
    workload_cmd.register(app)
    return app


def test_scenarios_command_lists_and_describes(cli):
    r = CliRunner().invoke(cli, ["scenarios", "--json"])
    assert r.exit_code == 0
    assert {x["name"] for x in json.loads(r.output)} >= {"agentic-coding", "8k1k"}
    r = CliRunner().invoke(cli, ["scenarios", "agentic-coding", "--json"])
    assert json.loads(r.output)["parameters"]["shared prefix tokens"].startswith("16384")


def test_export_then_trace_info_round_trip(cli, tmp_path):
    out = tmp_path / "chat.jsonl"
    r = CliRunner().invoke(cli, ["export-trace", "chat-multiturn", str(out), "--sessions", "3", "--rate", "2"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(cli, ["trace-info", str(out), "--json"])
    info = json.loads(r.output)
    assert (info["format"], info["sessions"], info["requests"]) == ("scoville", 3, 30)
    assert info["span_s"] > 0
    assert load_trace(out).arrivals(3)[0] == 0.0


def test_paths_with_brackets_print_as_given(cli, tmp_path):
    out = tmp_path / "t[x].jsonl"  # Rich would read "[x]" as markup and drop it
    r = CliRunner().invoke(cli, ["export-trace", "chat-multiturn", str(out), "--sessions", "1"])
    assert r.exit_code == 0 and "t[x].jsonl" in r.output.replace("\n", "")
    r = CliRunner().invoke(cli, ["trace-info", str(out)])
    assert r.exit_code == 0 and "t[x].jsonl" in r.output.replace("\n", "")


def test_workload_commands_refuse_bad_input_in_one_line(cli, tmp_path):
    from scoville.workload.traces import TraceError

    r = CliRunner().invoke(cli, ["export-trace", "chat-multiturn", str(tmp_path / "missing" / "t.jsonl")])
    assert isinstance(r.exception, TraceError) and "existing, writable folder" in str(r.exception)
    r = CliRunner().invoke(cli, ["export-trace", "1k1k", str(tmp_path / "t.jsonl"), "--sessions", "0"])
    assert r.exit_code == 2 and "--sessions" in r.output
    r = CliRunner().invoke(cli, ["trace-info", str(DATA / "mooncake_sample.jsonl"), "--trace-block-size", "0"])
    assert isinstance(r.exception, WorkloadError) and "--trace-block-size must be from 1 to" in str(r.exception)


@pytest.mark.parametrize("name", ["chat-multiturn", "mix-all"])
def test_manifest_dict_rebuilds_the_same_workload(name):
    import msgspec

    from scoville.workload.sessions import session_workload_from_dict

    w = resolve_workload(name, seed=9)
    back = session_workload_from_dict(json.loads(json.dumps(w.to_dict())))
    assert msgspec.json.encode(list(back.sessions(3, stream=1))) == msgspec.json.encode(list(w.sessions(3, stream=1)))


def test_trace_rebuild_refuses_a_changed_file(tmp_path):
    from scoville.workload.sessions import session_workload_from_dict

    path = tmp_path / "t.csv"
    path.write_text((DATA / "azure_sample.csv").read_text())
    w = resolve_workload(None, trace=path, time_scale=0.5)
    d = json.loads(json.dumps(w.to_dict()))
    assert session_workload_from_dict(d).options.time_scale == 0.5
    path.write_text(path.read_text() + "2023-11-16 18:20:00.0,10,2\n")
    with pytest.raises(WorkloadError, match="changed since"):
        session_workload_from_dict(d)


def test_a_synthetic_workload_a_manifest_cannot_rebuild_is_one_line():
    from scoville.workload.scenarios import workload_from_dict

    with pytest.raises(WorkloadError, match="cannot be rebuilt .*start a new run"):
        workload_from_dict({"kind": "synthetic", "isl": 10, "not_a_field": 1})


def test_lazy_sessions_index_like_a_list():
    s = resolve_workload("chat-multiturn").sessions(4)
    assert len(s) == 4 and s[-1].session_id == s[3].session_id == "p0-s3"
    assert [x.session_id for x in s[1:3]] == ["p0-s1", "p0-s2"]
    with pytest.raises(IndexError):
        s[4]


def test_sessions_command_reports_a_run(cli, tmp_path):
    from scoville.load import LoadPoint
    from scoville.sim.config import SimConfig
    from scoville.sim.driver import simulate_run

    cfg = SimConfig.parse({"hardware": "h200", "model": "llama-3.1-8b", "enable_prefix_caching": True}, where="t")
    w = resolve_workload("chat-multiturn", think_scale=0)
    run_dir = simulate_run(cfg, w, [LoadPoint(index=0, concurrency=2, num_requests=20)], tmp_path)
    r = CliRunner().invoke(cli, ["sessions", run_dir.name, "--runs", str(tmp_path), "--json"])
    assert r.exit_code == 0, r.output
    (point,) = json.loads(r.output)
    assert point["num_sessions"] == 2 and len(point["turns"]) == 10
    assert point["turns"][5]["cache_hit_rate"] > point["turns"][0]["cache_hit_rate"]
    r = CliRunner().invoke(cli, ["sessions", run_dir.name, "--runs", str(tmp_path)])
    assert r.exit_code == 0 and "per turn" in r.output
