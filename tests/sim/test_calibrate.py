"""scoville calibrate: the fit recovers parameters it can know, predicts points it never saw, and every bad input
is one line.

The "measured" runs are written by the simulator itself under a known profile (the truth), so the test knows
what the fit should find. Lengths are drawn (range ratio 0.8) so lanes do not move in lock-step, as in a real
benchmark; the model is a small Llama written into the test folder, on the catalog's CPU entry.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from scoville.catalog.hardware import hardware_file
from scoville.cli import main as cli_main
from scoville.load import LoadPoint, repeat_plan
from scoville.results.catalog import read_point_rows
from scoville.results.store import write_point_metrics
from scoville.sim import measured
from scoville.sim.calibrate import (
    PARAMS,
    base_config,
    calibrate,
    kernel_prior_sd,
    nelder_mead,
    nnls_small,
    predicted_slope,
)
from scoville.sim.config import SimConfig
from scoville.sim.driver import simulate_run
from scoville.sim.engine import step_cost
from scoville.sim.measured import CalibrationError, frontend_s, read_run
from scoville.sim.profile import SCHEMA_VERSION, Profile, ProfileError, load_profile
from scoville.workload.synthetic import SyntheticWorkload

HW = "xeon-icx-2vcpu"
SERVING = dict(max_num_seqs=64, max_num_batched_tokens=1024, kv_capacity_tokens=200_000)
TRUTH = dict(kernel_factor=2.5, step_overhead_us=8000.0, seq_overhead_us=900.0, request_overhead_ms=30.0)
# the fit's parameters at TRUTH: prompt tokens' kernels run at the same factor (the profile's prefill ratio of 1)
FITTED_TRUTH = {**TRUTH, "prefill_kernel_factor": TRUTH["kernel_factor"]}
TINY = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256, "intermediate_size": 704,
        "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
        "vocab_size": 8000, "max_position_embeddings": 4096, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
# The real-vLLM check's layer shapes (hidden 512, 8 heads / 4 KV heads of 64, FFN 1408), all of which the CPU
# entry's kernel tables hold; TINY's 4-head attention they do not (it is priced by the datasheet transfer).
MEASURED_SHAPES = dict(TINY, hidden_size=512, intermediate_size=1408, num_attention_heads=8, num_key_value_heads=4)


def profile(model: str = "tiny", **values: float) -> Profile:
    return Profile(schema_version=SCHEMA_VERSION, hardware=HW, model=model, framework="vllm", sigma=0.02,
                   **{**TRUTH, **values})


def points(levels: list[int]) -> list[LoadPoint]:
    return [LoadPoint(index=i, concurrency=c, num_requests=4 * c, warmup_requests=c) for i, c in enumerate(levels)]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Two 'measured' runs simulated under the TRUTH profile: 512/64 at 1,2,4,8 and 1024/32 at 1,4."""
    root = tmp_path_factory.mktemp("calibrate")
    model_dir = root / "tiny"
    model_dir.mkdir()
    (model_dir / "config.json").write_text(json.dumps(TINY))
    measured_dir = root / "tiny-measured"
    measured_dir.mkdir()
    (measured_dir / "config.json").write_text(json.dumps(MEASURED_SHAPES))
    truth = profile().write(root / "truth.yaml")
    model = str(model_dir / "config.json")
    cfg = SimConfig(hardware=HW, model=model, profile=str(truth), **SERVING)
    run_a = simulate_run(cfg, SyntheticWorkload(isl=512, osl=64, seed=3, name="512/64"), points([1, 2, 4, 8]),
                         root / "runs", seed=1)
    run_b = simulate_run(cfg, SyntheticWorkload(isl=1024, osl=32, seed=4, name="1024/32"), points([1, 4]),
                         root / "runs", seed=1)
    base = SimConfig(hardware=HW, model=model, **SERVING)
    return {"root": root, "model": model, "a": run_a, "b": run_b, "base": base,
            "measured_model": str(measured_dir / "config.json")}


def test_the_profile_drives_the_cost_model_through_the_engine(world: dict):
    cost = step_cost(SimConfig(hardware=HW, model=world["model"], profile=str(world["root"] / "truth.yaml"),
                               **SERVING), SimConfig(hardware=HW, model=world["model"]).parallel)
    assert cost.kernel_factor == TRUTH["kernel_factor"] and cost.framework.kernel_scale == 1.0
    assert cost.framework.step_overhead_us == TRUTH["step_overhead_us"]
    assert cost.framework.request_overhead_ms == TRUTH["request_overhead_ms"]


@pytest.mark.slow   # a full fit: hundreds of simulations
def test_fit_recovers_known_parameters_and_predicts_held_out_points(world: dict):
    a, b = world["a"].name, world["b"].name
    prof, rep = calibrate([world["a"], world["b"]], HW, model=world["model"], config=world["base"],
                          fit_points=[f"{a}:c=1", f"{a}:c=8", f"{b}:c=4"])
    # each parameter within 15 % of the truth, or within two of the spreads the fit reports where the points see it
    # less (per-sequence host time against the decode kernels' per-sequence attention: ±27 % here)
    for k in PARAMS:
        miss = abs(math.log(rep.fitted[k] / FITTED_TRUTH[k]))
        assert miss <= max(math.log(1.15), 2 * rep.fit.spread[k]), (k, rep.fitted[k], FITTED_TRUTH[k],
                                                                      rep.fit.spread[k])
    assert rep.max_abs_error("before", "held-out") > 0.5          # the priors are far off on this CPU ...
    assert rep.max_abs_error("after", "held-out") < 0.05          # ... the calibrated profile is not
    assert rep.max_abs_error("after", "fit") < 0.03
    roles = {(p.run_id, p.label): p.role for p in rep.points}
    assert roles[(a, "c=2")] == "held-out" and roles[(b, "c=4")] == "fit"
    assert sorted((f.run_id, f.label) for f in prof.fitted_on) == sorted([(a, "c=1"), (a, "c=8"), (b, "c=4")])
    assert prof.hardware == HW and prof.model == "tiny" and prof.framework == "vllm"
    assert 0.02 <= prof.sigma < 0.05 and prof.fit is not None and prof.fit.loss_after < prof.fit.loss_before


@pytest.mark.slow   # a full fit
def test_two_load_points_of_one_sweep_predict_the_rest_of_it(world: dict):
    _, rep = calibrate([world["a"]], HW, model=world["model"], config=world["base"], fit_points=["c=1", "c=8"])
    assert [p.label for p in rep.points if p.role == "held-out"] == ["c=2", "c=4"]
    assert rep.max_abs_error("after", "held-out") < 0.10
    assert rep.within(0.10, "held-out") and rep.max_abs_error("before", "held-out") > 0.5


def test_the_repeats_of_a_load_are_one_point_at_their_mean(world: dict, tmp_path: Path):
    cfg = SimConfig(hardware=HW, model=world["model"], profile=str(world["root"] / "truth.yaml"), **SERVING)
    run = simulate_run(cfg, SyntheticWorkload(isl=512, osl=64, seed=3, name="512/64"), repeat_plan(points([1, 4]), 3),
                       tmp_path / "runs", seed=1)
    rows = read_point_rows(run)
    data = read_run(run)
    assert [t.label for t in data.targets] == ["c=1", "c=4"]
    for t in data.targets:
        mine = [r for r in rows if r["load"] == t.label]
        assert len(mine) == 3
        assert t.measured.tpot_s == pytest.approx(np.mean([r["tpot_s_mean"] for r in mine]))
        assert t.measured.ttft_s == pytest.approx(np.mean([r["ttft_s_mean"] for r in mine]))
        ttft = np.array([r["ttft_s_mean"] for r in mine])       # how sure that mean is, from its passes' spread
        assert t.repeat_rse["ttft"] == pytest.approx(ttft.std(ddof=1) / np.sqrt(3) / ttft.mean())
        assert set(t.repeat_rse) == {"ttft", "tpot", "throughput"}


def test_invalid_passes_are_left_out_and_named(world: dict, tmp_path: Path):
    """A pass whose client lagged its server (``scoville.validity``) measured the client, not the server: its load
    is the mean of the other passes, and the pass is named."""
    cfg = SimConfig(hardware=HW, model=world["model"], profile=str(world["root"] / "truth.yaml"), **SERVING)
    run = simulate_run(cfg, SyntheticWorkload(isl=512, osl=64, seed=3, name="512/64"), repeat_plan(points([1, 4]), 2),
                       tmp_path / "runs", seed=1)
    rows = read_point_rows(run)
    kept, lagged = [r for r in rows if r["load"] == "c=1"]
    lagged.update(valid=False, ttft_s_mean=6 * lagged["ttft_s_mean"],
                  invalid_reasons=[{"code": "client_lag", "detail": "the client's TPOT is 0.33 of the server's"}])
    write_point_metrics(run, rows)
    data = read_run(run)
    (c1,) = [t for t in data.targets if t.label == "c=1"]
    assert c1.measured.ttft_s == pytest.approx(kept["ttft_s_mean"])
    assert data.left_out == [f"{data.run_id}:{lagged['label']} (client_lag)"]
    _, rep = calibrate([run], HW, model=world["model"], config=world["base"], max_evals=20)
    assert any("left out 1 invalid pass(es)" in n and lagged["label"] in n for n in rep.notes()), rep.notes()
    assert rep.fit.left_out == data.left_out                 # the profile records them too


def test_a_loads_front_end_is_the_mean_over_its_passes_with_their_spread(world: dict, tmp_path: Path):
    cfg = SimConfig(hardware=HW, model=world["model"], profile=str(world["root"] / "truth.yaml"), **SERVING)
    plan = repeat_plan([LoadPoint(index=0, concurrency=1, num_requests=8, warmup_requests=1)], 3)
    run = simulate_run(cfg, SyntheticWorkload(isl=512, osl=8, seed=5, name="512/8"), plan, tmp_path / "runs", seed=1)
    rows = read_point_rows(run)
    fronts = [0.0035, 0.0037, 0.0039]
    for row, front in zip(rows, fronts, strict=True):
        row.update(client_all_ttft_s_mean=row["ttft_s_mean"], server_queue_s_mean=0.0,
                   server_prefill_s_mean=row["ttft_s_mean"] - front)
    write_point_metrics(run, rows)
    (target,) = read_run(run).targets
    assert target.measured.frontend_s == pytest.approx(0.0037)
    assert target.frontend_rse == pytest.approx(np.std(fronts, ddof=1) / np.sqrt(3) / 0.0037)


def test_front_end_time_is_client_ttft_less_the_servers_queue_and_prefill():
    row = {"client_all_ttft_s_mean": 0.0550, "server_queue_s_mean": 0.0001, "server_prefill_s_mean": 0.0513}
    assert frontend_s(row) == pytest.approx(0.0036)
    assert frontend_s({**row, "server_prefill_s_mean": None}) is None      # a server without the histogram
    assert frontend_s({**row, "server_prefill_s_mean": 0.06}) is None      # a negative gap is no measurement


@pytest.mark.slow   # a full fit
def test_the_servers_own_prefill_time_separates_front_end_from_kernels(world: dict, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch):
    """Tables of another slice of the CPU (an entry whose kernel_tables_sigma says the kernels may be far off; the
    truth runs them 2.5x slower) and one concurrency-1 point of fixed prompt lengths (no TTFT slope): its means
    cannot tell kernel time from a per-request cost, and a fit on them alone keeps the tables' kernels and puts
    the rest in the request. A server that publishes its queue and prefill times says how much of TTFT is front
    end (30 ms here), and the fit puts the rest on the kernels."""
    model = world["measured_model"]
    slow = profile(model="tiny-measured").write(tmp_path / "slow.yaml")       # TRUTH: kernels at 2.5x the tables
    cfg = SimConfig(hardware=HW, model=model, profile=str(slow), **SERVING)
    plan = [LoadPoint(index=0, concurrency=1, num_requests=16, warmup_requests=1)]
    run = simulate_run(cfg, SyntheticWorkload(isl=512, osl=64, range_ratio=1.0, seed=3, name="512/64"), plan,
                       tmp_path / "runs", seed=1)
    rows = read_point_rows(run)
    ttft = rows[0]["ttft_s_mean"]
    rows[0].update(client_all_ttft_s_mean=ttft, server_queue_s_mean=0.0,
                   server_prefill_s_mean=ttft - TRUTH["request_overhead_ms"] * 1e-3)
    write_point_metrics(run, rows)
    (c1,) = read_run(run).targets
    assert c1.measured.ttft_slope_s is None and c1.measured.frontend_s == pytest.approx(0.030)
    other_slice = tmp_path / "xeon-icx-2vcpu.yaml"
    other_slice.write_text(hardware_file(HW).read_text() + "\nkernel_tables_sigma: 0.75\n")

    def fit() -> dict[str, float]:
        _, rep = calibrate([run], str(other_slice), model=model,
                           config=SimConfig(hardware=HW, model=model, **SERVING), max_evals=150)
        assert rep.fit.kernel_prior_sd > 0.5
        return rep.fitted

    with_front = fit()
    assert with_front["request_overhead_ms"] == pytest.approx(TRUTH["request_overhead_ms"], rel=0.05), with_front
    assert with_front["kernel_factor"] == pytest.approx(TRUTH["kernel_factor"], rel=0.1), with_front
    monkeypatch.setattr(measured, "frontend_s", lambda row: None)             # a server without the histograms
    means_only = fit()
    assert means_only["request_overhead_ms"] > 5 * TRUTH["request_overhead_ms"], means_only
    assert means_only["kernel_factor"] < 1.5, means_only


def test_ttft_slope_over_prompt_lengths_is_read_per_load_and_matches_the_cost_model(world: dict, tmp_path: Path):
    """At concurrency 1 a request's TTFT is its front end, one step's host cost and its prefill step, so the slope
    of TTFT over the prompt lengths of a load's requests (both passes, each its own intercept) is what the
    prefill step adds per token, which predicted_slope reads off the cost model."""
    cfg = SimConfig(hardware=HW, model=world["model"], profile=str(world["root"] / "truth.yaml"), **SERVING)
    plan = repeat_plan([LoadPoint(index=0, concurrency=1, num_requests=16, warmup_requests=1)], 2)
    run = simulate_run(cfg, SyntheticWorkload(isl=512, osl=8, seed=5, name="512/8"), plan, tmp_path / "runs", seed=1)
    (target,) = read_run(run).targets
    assert target.measured.ttft_slope_s is not None and target.prompt_tokens is not None
    assert 0 < target.slope_rse < 0.1 and 410 < target.prompt_tokens[0] < 512
    assert target.measured.ttft_slope_s == pytest.approx(predicted_slope(cfg, target.prompt_tokens), rel=0.05)


def test_cli_reports_the_ttft_slope_it_fitted(world: dict, tmp_path: Path, capsys: pytest.CaptureFixture):
    cfg = SimConfig(hardware=HW, model=world["model"], profile=str(world["root"] / "truth.yaml"), **SERVING)
    plan = [LoadPoint(index=0, concurrency=1, num_requests=16, warmup_requests=1)]
    run = simulate_run(cfg, SyntheticWorkload(isl=512, osl=8, seed=5, name="512/8"), plan, tmp_path / "runs", seed=1)
    serving = tmp_path / "serving.yaml"
    serving.write_text(yaml.safe_dump(SERVING))
    cli_main(["calibrate", str(run), "--hardware", HW, "--model", world["model"], "--config", str(serving),
              "-o", str(tmp_path / "p.yaml"), "--max-evals", "30"])
    text = " ".join(capsys.readouterr().out.split())
    assert "TTFT per prompt token at c=1 of 512/8 (fit): measured" in text and "→ calibrated" in text


def test_kernel_factor_prior_is_as_wide_as_the_kernel_data_are_unsure(world: dict):
    """Kernels timed on the machine (the CPU entry's tables, for shapes they hold) leave kernel_factor little room;
    an attention shape the tables lack, or a datasheet entry priced through the transfer model, a lot."""
    targets = read_run(world["a"]).targets
    measured = kernel_prior_sd(base_config(HW, world["measured_model"], "vllm", world["base"]), targets)
    unmeasured_attention = kernel_prior_sd(base_config(HW, world["model"], "vllm", world["base"]), targets)
    datasheet = kernel_prior_sd(base_config("mi325x", world["measured_model"], "vllm", None), targets)
    assert 0.02 <= measured < 0.15 < 0.25 < min(unmeasured_attention, datasheet) < 1.0, (
        measured, unmeasured_attention, datasheet)


@pytest.mark.slow   # a full fit
def test_a_kernel_factor_far_from_the_tables_is_named(world: dict, tmp_path: Path):
    """Tables timed on another machine (truth 2.5x them), one workload: the points' means alone would put the
    missing kernel time into the per-request cost, but TTFT's slope over the prompt lengths at concurrency 1 pins
    it on the kernels, pulls kernel_factor far out of its prior, and the report names the likely cause."""
    model = world["measured_model"]
    slow = profile(model="tiny-measured").write(tmp_path / "slow.yaml")       # TRUTH: kernels at 2.5x the tables
    cfg = SimConfig(hardware=HW, model=model, profile=str(slow), **SERVING)
    plan = [LoadPoint(index=0, concurrency=1, num_requests=16, warmup_requests=1),
            LoadPoint(index=1, concurrency=8, num_requests=32, warmup_requests=8)]
    run = simulate_run(cfg, SyntheticWorkload(isl=512, osl=64, seed=3, name="512/64"), plan, tmp_path / "runs", seed=1)
    _, rep = calibrate([run], HW, model=model, config=SimConfig(hardware=HW, model=model, **SERVING), max_evals=150)
    pull = math.log(rep.fitted["kernel_factor"]) / rep.fit.kernel_prior_sd
    assert rep.fit.kernel_prior_sd < 0.15 and pull > 2.0, (rep.fitted, rep.fit.kernel_prior_sd)
    assert any("pull hard against the kernel data" in n for n in rep.notes()), rep.notes()


@pytest.mark.slow   # a full fit
def test_profile_round_trip_and_its_framework_costs(tmp_path: Path, world: dict):
    prof, rep = calibrate([world["b"]], HW, model=world["model"], config=world["base"], max_evals=60)
    path = prof.write(tmp_path / "sub" / "p.yaml")
    back = load_profile(path)
    assert back == prof
    costs = back.framework_costs()
    assert (costs.step_overhead_us, costs.seq_overhead_us, costs.request_overhead_ms, costs.sigma) == (
        prof.step_overhead_us, prof.seq_overhead_us, prof.request_overhead_ms, prof.sigma)
    assert costs.kernel_scale == 1.0 and costs.name == "vllm" and world["b"].name in costs.source
    # the fitted prompt kernels' factor rides as its ratio to the decode one, the form the cost model takes
    assert costs.prefill_kernel_ratio == prof.prefill_kernel_ratio == pytest.approx(
        rep.fitted["prefill_kernel_factor"] / rep.fitted["kernel_factor"])
    assert back.deployment["max_num_batched_tokens"] == SERVING["max_num_batched_tokens"]
    assert back.deployment["async_scheduling"] is False   # the scheduling the fit assumed: vLLM on a CPU entry
    assert all(p.role == "fit" for p in back.points)          # no --fit-points: every point is fitted
    back.check_applies(HW, world["model"], "vllm")
    with pytest.raises(ProfileError, match="calibrated for hardware 'xeon-icx-2vcpu', not 'h200'"):
        back.check_applies("h200", world["model"], "vllm")


@pytest.mark.parametrize("text, match", [
    (None, "does not exist; write one with `scoville calibrate"),
    ("kernel_factor: [1, 2\n", "is not valid YAML"),
    ("- a\n- b\n", "not a calibration profile"),
    ("schema_version: 99\nkernel_factor: 1\n", "schema_version 99, this scoville .* reads 1; recalibrate"),
    ("schema_version: 1\nhardware: x\n", r"malformed profile \(Object missing required field `model`\)"),
    (("schema_version: 1\nhardware: x\nmodel: m\nframework: vllm\nkernel_factor: -1\nstep_overhead_us: 1\n"
      "seq_overhead_us: 1\nrequest_overhead_ms: 1\nsigma: 0.1\n"), "kernel_factor must be a finite number > 0"),
    (("schema_version: 1\nhardware: x\nmodel: m\nframework: vllm\nkernel_factor: 1\nstep_overhead_us: 1\n"
      "seq_overhead_us: 1\nrequest_overhead_ms: 1\nsigma: 0.1\ncolour: red\n"), "unknown field `colour`"),
])
def test_malformed_profiles_are_one_line_errors(tmp_path: Path, text: str | None, match: str):
    path = tmp_path / "p.yaml"
    if text is not None:
        path.write_text(text)
    with pytest.raises(ProfileError, match=match) as e:
        load_profile(path)
    assert "\n" not in str(e.value)


def test_bad_calibration_input_is_one_line_naming_the_fix(world: dict, tmp_path: Path):
    with pytest.raises(CalibrationError, match="at least one run"):
        calibrate([], HW)
    with pytest.raises(Exception, match="unknown hardware 'h900'"):
        calibrate([world["a"]], "h900", model=world["model"])
    with pytest.raises(CalibrationError, match="not in the catalog; pass --model"):
        calibrate([world["a"]], HW)                        # the runs' model "tiny" is only a config.json
    with pytest.raises(CalibrationError, match="no point 'c=64' in the runs; use LABEL or RUN:LABEL"):
        calibrate([world["a"]], HW, model=world["model"], fit_points=["c=64"])
    other = simulate_run(SimConfig(hardware="h200", model="llama-3.1-8b"), SyntheticWorkload(isl=64, osl=8),
                         points([1]), tmp_path / "runs")
    with pytest.raises(CalibrationError, match="different models .* calibrate one model at a time"):
        calibrate([world["a"], other], HW, model=world["model"])
    with pytest.raises(CalibrationError, match="was measured on h200 .*, not xeon-icx-2vcpu; pass --hardware h200"):
        calibrate([other], HW)
    empty = tmp_path / "runs" / "empty"
    empty.mkdir(parents=True)
    manifest = json.loads((other / "manifest.json").read_text())
    (empty / "manifest.json").write_text(json.dumps(dict(manifest, run_id="empty")))
    with pytest.raises(CalibrationError, match="run empty has no measured point .* or leave it out"):
        calibrate([empty], HW, model="llama-3.1-8b")


def test_cli_prints_the_table_and_where_the_profile_went(world: dict, tmp_path: Path, capsys: pytest.CaptureFixture):
    serving = tmp_path / "serving.yaml"
    serving.write_text(yaml.safe_dump(SERVING))
    out = tmp_path / "cpu.yaml"
    cli_main(["calibrate", str(world["b"]), "--hardware", HW, "--model", world["model"], "--config", str(serving),
              "--fit-points", "c=1", "-o", str(out), "--max-evals", "40"])
    text = " ".join(capsys.readouterr().out.split())          # Rich wraps at the captured terminal's width
    assert "held-out" in text and "fit" in text and "kernel_factor" in text
    assert f"profile written to {out}" in text
    assert load_profile(out).deployment["max_num_seqs"] == SERVING["max_num_seqs"]


def test_cli_bad_input_is_one_red_line(world: dict, capsys: pytest.CaptureFixture, tmp_path: Path):
    with pytest.raises(SystemExit) as e:
        cli_main(["calibrate", str(world["a"]), "--hardware", "h900", "-o", str(tmp_path / "x.yaml")])
    assert e.value.code == 2
    err = " ".join(capsys.readouterr().err.split())           # one message, however Rich wraps it
    assert err.startswith("error: unknown hardware 'h900'; choose one of") and err.count("error:") == 1
    assert not (tmp_path / "x.yaml").exists()


def test_nelder_mead_respects_its_box_and_finds_a_minimum():
    lo, hi = np.array([-1.0, -1.0]), np.array([1.0, 0.5])
    x, _, n = nelder_mead(lambda v: float((v[0] - 0.3) ** 2 + (v[1] - 2.0) ** 2), np.zeros(2), 0.5, lo, hi)
    assert np.allclose(x, [0.3, 0.5], atol=1e-2) and n < 400         # the unconstrained minimum is outside


def test_nnls_small_keeps_coefficients_non_negative():
    a = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    z = nnls_small(a, np.array([2.0, -1.0, 1.0]))
    assert z[1] == 0.0 and math.isclose(z[0], 1.5)


def test_a_profile_sets_the_bands_and_refuses_other_hardware(world: dict):
    """A calibrated profile's residual spread is the prediction's uncertainty; a profile of another system is
    refused in one line."""
    from scoville.errors import UserError

    truth = str(world["root"] / "truth.yaml")
    cost = step_cost(SimConfig(hardware=HW, model=world["model"], profile=truth, **SERVING),
                     SimConfig(hardware=HW, model=world["model"]).parallel)
    assert cost.sigma(8, 8, 8000.0, 8000.0) == pytest.approx(0.02)
    with pytest.raises(UserError, match="calibrated for hardware"):
        step_cost(SimConfig(hardware="h200", model=world["model"], profile=truth),
                  SimConfig(hardware="h200", model=world["model"]).parallel)
