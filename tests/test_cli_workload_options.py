"""The shared workload flags reach resolve_workload from `scoville simulate` (the sweep CLI uses the same ones)."""

import json
from pathlib import Path

import pytest

from scoville.cli import main

TRACE = Path(__file__).resolve().parents[1] / "src" / "scoville" / "data" / "traces" / "mooncake_sample.jsonl"


def simulate(tmp_path, *args):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("hardware: h200\nmodel: llama-3.1-8b\n")
    main(["simulate", "--config", str(cfg), "--runs", str(tmp_path / "runs"), "--json", *args])


def test_trace_replay_open_loop_through_the_cli(tmp_path, capsys):
    simulate(tmp_path, "--trace", str(TRACE), "--rate", "2", "--num-requests", "12", "--time-scale", "0.5")
    out = json.loads(capsys.readouterr().out)
    (point,) = out["points"]
    assert point["num_ok"] == 12
    manifest = json.loads((Path(out["run_dir"]) / "manifest.json").read_text())
    assert manifest["workload"]["kind"] == "trace"


def test_session_flags_on_a_single_turn_scenario_are_refused_in_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        simulate(tmp_path, "--scenario", "1k1k", "--think-scale", "0", "--concurrency", "1")
    assert e.value.code == 2
    assert "--think-scale" in capsys.readouterr().err


def test_simulate_builds_the_load_plan_sweep_builds_from_the_same_flags(tmp_path, capsys):
    from scoville.load import load_plan

    flags = dict(rate="2", burstiness=0.5, max_concurrency=8, duration=60.0)
    simulate(tmp_path, "--isl", "64", "--osl", "8", "--rate", "2", "--burstiness", "0.5", "--max-concurrency", "8",
             "--duration", "60")
    out = json.loads(capsys.readouterr().out)
    manifest = json.loads((Path(out["run_dir"]) / "manifest.json").read_text())
    (planned,) = manifest["load_plan"]["points"]
    (want,) = load_plan(None, **flags)       # what `scoville sweep` sends for the same flags
    assert want.num_requests == 100          # the one default for a --rate point (simulate used 200)
    for key in ("rate", "burstiness", "concurrency", "num_requests", "warmup_requests", "duration_s"):
        assert planned[key] == getattr(want, key), key


@pytest.mark.slow   # --workers 2 spawns a process pool (tests/executor keeps one in the fast lane)
def test_simulate_workers_replay_points_in_parallel_with_the_sequential_result(tmp_path, capsys):
    simulate(tmp_path, "--isl", "64", "--osl", "8", "--concurrency", "1,2", "--num-requests", "6")
    sequential = json.loads(capsys.readouterr().out)["points"]
    simulate(tmp_path, "--isl", "64", "--osl", "8", "--concurrency", "1,2", "--num-requests", "6", "--workers", "2")
    out = json.loads(capsys.readouterr().out)
    parallel = out["points"]
    assert json.loads((Path(out["run_dir"]) / "manifest.json").read_text())["executor"] == {"kind": "local",
                                                                                            "workers": 2}
    for a, b in zip(sequential, parallel, strict=True):
        assert a["num_ok"] == b["num_ok"] == 6
        assert b["tpot_s_median"] == pytest.approx(a["tpot_s_median"], rel=1e-9)


def test_simulate_names_its_power_basis_and_how_to_get_a_report(tmp_path, capsys):
    main(["simulate", "--hardware", "h200", "--model", "llama-3.1-8b", "--scenario", "1k1k", "--concurrency", "1-4",
          "--no-disagg", "--runs", str(tmp_path / "runs")])
    err = " ".join(capsys.readouterr().err.split())
    assert "power: rated, chip boundary" in err and "report: scoville report " in err


def test_simulate_shows_each_points_ttft_band_wide_where_its_users_overflow_the_kv_cache(tmp_path, capsys):
    """Where the users' whole lengths overflow an on-demand KV cache the estimator's TTFT is uncertain
    (``steady.KV_OVERFLOW_TTFT_SIGMA``): each point's TTFT band is recorded and printed, wide there."""
    from scoville.cli.simulate_cmd import _band
    from scoville.results.store import read_manifest

    main(["simulate", "--hardware", "h100", "--model", "llama-3.1-8b", "--isl", "1024", "--osl", "8192",
          "--framework", "vllm", "--concurrency", "16,1024", "--no-disagg", "--runs", str(tmp_path / "runs"), "--json"])
    preds = read_manifest(Path(json.loads(capsys.readouterr().out)["run_dir"])).target.predictions or []
    ratios = [p["ttft_s_band"][1] / p["ttft_s_band"][0] for p in preds]
    assert min(ratios) < 8 < 11.9 < max(ratios)      # exp(2 x 1.28 x 0.97) = 12 where the users overflow
    lo, hi = preds[0]["ttft_s_band"]
    assert _band(preds[0], "ttft_s", scale=1e3) == f"{lo * 1e3:,.0f}-{hi * 1e3:,.0f}"


@pytest.mark.parametrize("framework, told", [("vllm", True), ("trtllm", False)])
def test_simulate_names_the_points_whose_users_overflow_a_preempting_cache_and_how_to_replay_them(
        tmp_path, capsys, framework, told):
    main(["simulate", "--hardware", "h100", "--model", "llama-3.1-8b", "--isl", "1024", "--osl", "8192",
          "--framework", framework, "--concurrency", "16,1024", "--no-disagg", "--runs", str(tmp_path / "runs")])
    err = " ".join(capsys.readouterr().err.split())
    assert (" on tp1 x1: the users overflow the KV cache" in err and "--fidelity des" in err) == told
