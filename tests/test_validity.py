"""The validity stamp of a load point: each reason on hand-built manifests and records (scoville.validity)."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
import typer
from rich.console import Console
from typer.testing import CliRunner

from analysis.runs_factory import BASELINE_POINTS, CONTENDER_POINTS, make_run
from scoville.analysis.compare import compare
from scoville.analysis.runs import load_systems
from scoville.cli import runs_cmd
from scoville.client.hostload import HostSample, client_cpu_share, steal_share
from scoville.metrics import recompute
from scoville.reporting.html import write_report
from scoville.results.manifest import Manifest, decode_manifest
from scoville.results.schema import POWER_SCHEMA, RequestRecord, records_to_table
from scoville.results.store import read_point_metrics
from scoville.validity import SIMULATED_BASIS, is_loopback, point_validity


def records(got: list[int], asked: int = 10, warmup_short: bool = False) -> pa.Table:
    """ok measured requests that returned ``got`` tokens of ``asked``, and a short warm-up request."""
    recs = [RequestRecord(point=0, request_id=f"r{i}", t_sent=float(i), t_first_token=i + 0.1, t_done=i + 1.0,
                          output_tokens=n, output_tokens_requested=asked) for i, n in enumerate(got)]
    recs.append(RequestRecord(point=0, request_id="w", t_sent=0.0, t_first_token=0.1, t_done=0.2, warmup=True,
                              output_tokens=1 if warmup_short else asked, output_tokens_requested=asked))
    return records_to_table(recs)


def manifest(outcome: dict | None = None, *, source: str = "measured", power: dict | None = None,
             ignore_eos: bool = True, extensions: bool = True, drop: tuple[str, ...] = (),
             base_url: str | None = None) -> Manifest:
    base = {"point": 0, "attempt": 0, "t_start": 0.0, "requests": 10, "ok": 10, "failed": 0,
            "client_cpu_share": 0.2, "steal_share": 0.0,
            "unexpected_cache_hits": False, "cached_tokens": 0, "input_tokens": 1000}
    outcome = {k: v for k, v in {**base, **(outcome or {})}.items() if k not in drop}
    return decode_manifest({"source": source, "target": {"ignore_eos": ignore_eos, "extensions": extensions,
                                                         "base_url": base_url},
                            "system": {"accelerators": 2, "rated_watts_per_accelerator": 700.0},
                            "power": power or {"source": "rated", "boundary": "chip",
                                               "watts_per_accelerator": 700.0},
                            "point_results": {"0": outcome}})


ROW = {"point": 0, "label": "c=1", "num_requests": 100, "num_errors": 0, "accelerators": 2,
       "window_start_s": 10.0, "window_end_s": 20.0}


def codes(v: dict) -> list[str]:
    return [r["code"] for r in v["invalid_reasons"]]


def test_a_clean_measured_point_is_valid_and_says_what_was_checked():
    v = point_validity(manifest(), ROW, records([10, 10, 10]), None)
    assert v["valid"] is True and v["invalid_reasons"] == []
    assert v["validity_basis"] == "measured: checked errors, client CPU, steal, prefix cache, output length"


def test_error_share_above_one_percent_is_invalid():
    assert point_validity(manifest(), {**ROW, "num_errors": 1}, records([10]), None)["valid"]  # 1% is the limit
    v = point_validity(manifest(), {**ROW, "num_errors": 2}, records([10]), None)
    assert codes(v) == ["errors"] and "2 of 100 measured requests failed (2.0%" in v["invalid_reasons"][0]["detail"]


def test_a_saturated_client_is_invalid():
    assert point_validity(manifest({"client_cpu_share": 0.9}), ROW, records([10]), None)["valid"]
    v = point_validity(manifest({"client_cpu_share": 0.95}), ROW, records([10]), None)
    assert codes(v) == ["client_cpu"] and "95% of a core" in v["invalid_reasons"][0]["detail"]


def test_high_steal_is_invalid():
    assert point_validity(manifest({"steal_share": 0.05}), ROW, records([10]), None)["valid"]
    assert codes(point_validity(manifest({"steal_share": 0.08}), ROW, records([10]), None)) == ["steal"]


def test_a_client_that_lags_its_server_is_invalid():
    """The server's own histograms say when the client read its tokens late (another process had the CPU):
    a client TPOT well below the server's anywhere, a large TTFT gap only over loopback."""
    loop, remote = manifest(base_url="http://127.0.0.1:8351"), manifest(base_url="http://gpu-node:8000")
    agree = {**ROW, "server_ttft_s_mean": 0.053, "server_tpot_s_mean": 0.0035, "client_server_tpot_ratio": 0.96,
             "client_minus_server_ttft_s": 0.004, "ttft_gap_large": False}
    v = point_validity(loop, agree, records([10]), None)
    assert v["valid"] is True and "client vs server" in v["validity_basis"]
    bunched = {**agree, "client_server_tpot_ratio": 0.33}
    for m in (loop, remote):
        v = point_validity(m, bunched, records([10]), None)
        assert codes(v) == ["client_lag"] and "TPOT is 0.33 of the server's own" in v["invalid_reasons"][0]["detail"]
    late = {**agree, "client_minus_server_ttft_s": 0.285, "ttft_gap_large": True}
    v = point_validity(loop, late, records([10]), None)
    assert codes(v) == ["client_lag"] and "285 ms above the server's own" in v["invalid_reasons"][0]["detail"]
    assert point_validity(remote, late, records([10]), None)["valid"] is True    # the network may explain it
    free_lengths = manifest(base_url="http://gpu-node:8000", ignore_eos=False)     # a token-weighted TPOT may differ
    assert point_validity(free_lengths, bunched, records([10]), None)["valid"] is True
    assert "client vs server" not in point_validity(loop, ROW, records([10]), None)["validity_basis"]


@pytest.mark.parametrize(("url", "loopback"), [("http://127.0.0.1:8000", True), ("http://localhost:1/v1", True),
                                               ("http://[::1]:8000", True), ("http://127.0.0.2", True),
                                               ("http://10.0.0.1:8000", False), ("https://api.example.com", False),
                                               (None, False)])
def test_loopback_urls(url: str | None, loopback: bool):
    assert is_loopback(url) is loopback


def test_prefix_cache_hits_on_an_uncached_workload_are_invalid():
    v = point_validity(manifest({"unexpected_cache_hits": True, "cached_tokens": 250}), ROW, records([10]), None)
    assert codes(v) == ["prefix_cache"] and "(25% of input)" in v["invalid_reasons"][0]["detail"]


def test_short_outputs_are_invalid_only_when_exact_lengths_were_asked():
    # 1 of 100 short is within the limit; 2 of 3 is not; a short warm-up request does not count
    assert point_validity(manifest(), ROW, records([9] + [10] * 99, warmup_short=True), None)["valid"]
    v = point_validity(manifest(), ROW, records([10, 9, 3]), None)
    assert codes(v) == ["short_output"]
    assert v["invalid_reasons"][0]["detail"].startswith("2 of 3 requests returned fewer tokens than requested (67%")
    assert "did not honour ignore_eos" in v["invalid_reasons"][0]["detail"]
    refused = point_validity(manifest(extensions=False), ROW, records([10, 9, 3]), None)
    assert "refused vLLM's ignore_eos/min_tokens" in refused["invalid_reasons"][0]["detail"]
    short = records([10, 9, 3])
    chunks = short.set_column(short.schema.get_field_index("token_count_source"), "token_count_source",
                              pa.array(["chunks"] * 4))   # counted chunks, not tokens: a chunk may carry several
    assert point_validity(manifest(), ROW, chunks, None)["valid"]
    let_stop = point_validity(manifest(ignore_eos=False), ROW, records([10, 9, 3]), None)  # --no-ignore-eos
    assert let_stop["valid"] and "output length" not in let_stop["validity_basis"]


def power_samples(times: list[float]) -> pa.Table:
    return pa.table({"t": times, "device": ["gpu0"] * len(times), "watts": [500.0] * len(times)},
                    schema=POWER_SCHEMA)


NVML = {"source": "nvml", "boundary": "board"}


def test_sampled_power_without_a_sample_in_the_window_is_invalid():
    v = point_validity(manifest(power=NVML), {**ROW, "power_w": 900.0}, records([10]), power_samples([1.0, 30.0]))
    assert codes(v) == ["power_missing"] and "(10.0-20.0 s)" in v["invalid_reasons"][0]["detail"]
    assert codes(point_validity(manifest(power=NVML), ROW, records([10]), None)) == ["power_missing"]
    assert v["validity_basis"].endswith(", power")


def test_implausible_mean_power_is_invalid():
    inside = power_samples([10.0, 15.0, 20.0])
    ok = point_validity(manifest(power=NVML), {**ROW, "power_w": 2100.0}, records([10]), inside)
    assert ok["valid"]  # exactly 1.5 x 700 W x 2 accelerators
    high = point_validity(manifest(power=NVML), {**ROW, "power_w": 2101.0}, records([10]), inside)
    assert codes(high) == ["power_implausible"] and "1.5 x the rated 700 W x 2" in high["invalid_reasons"][0]["detail"]
    low = point_validity(manifest(power=NVML), {**ROW, "power_w": 9.0}, records([10]), inside)  # floor 5 W x 2
    assert codes(low) == ["power_implausible"] and "below 5 W per accelerator" in low["invalid_reasons"][0]["detail"]
    node = point_validity(manifest(power={"source": "csv", "boundary": "node"}), {**ROW, "power_w": 3000.0},
                          records([10]), inside)
    assert node["valid"]  # a node draws more than its accelerators' rating: 2.5 x there


def test_every_reason_is_listed_together():
    v = point_validity(manifest({"client_cpu_share": 1.0, "unexpected_cache_hits": True}),
                       {**ROW, "num_errors": 50}, records([1, 1]), None)
    assert codes(v) == ["errors", "client_cpu", "prefix_cache", "short_output"] and v["valid"] is False


def test_simulated_points_are_valid_by_construction():
    v = point_validity(manifest({"client_cpu_share": 1.0}, source="simulated"), {**ROW, "num_errors": 50},
                       records([1]), None)
    assert v == {"valid": True, "invalid_reasons": [], "validity_basis": SIMULATED_BASIS}


def test_host_load_not_recorded_is_not_judged():
    old = manifest(drop=("client_cpu_share", "steal_share"))  # a run from before host load was recorded
    remote = manifest({"client_cpu_share": None, "steal_share": None})  # Ray's clients run on other hosts
    for m in (old, remote):
        assert point_validity(m, ROW, records([10]), None)["validity_basis"] == \
            "measured: checked errors, prefix cache, output length"


def test_host_load_shares_from_two_samples():
    a = HostSample(t=10.0, cpu_s={1: 5.0, 2: 1.0}, steal=100, total=10_000)
    b = HostSample(t=12.0, cpu_s={1: 5.5, 2: 2.9}, steal=300, total=14_000)
    assert client_cpu_share(a, b) == pytest.approx(0.95)  # the busiest process: 1.9 s of CPU in 2 s
    assert steal_share(a, b) == pytest.approx(0.05)
    assert steal_share(a, HostSample(t=12.0, cpu_s={}, steal=None, total=None)) is None
    assert client_cpu_share(a, HostSample(t=12.0, cpu_s={}, steal=None, total=None)) is None


def test_recompute_stores_the_stamp_and_compare_warns_about_invalid_sources(tmp_path):
    base = make_run(tmp_path, "base", BASELINE_POINTS)
    contender = make_run(tmp_path, "cont", CONTENDER_POINTS)
    m = json.loads((base / "manifest.json").read_text())
    m["point_results"] = {"0": {"point": 0, "attempt": 0, "t_start": 0.0, "requests": 4, "ok": 4, "failed": 0,
                                "unexpected_cache_hits": True,
                                "cached_tokens": 10, "input_tokens": 100}}
    (base / "manifest.json").write_text(json.dumps(m))
    recompute(base)
    rows = read_point_metrics(base)
    assert [r["valid"] for r in rows] == [False] + [True] * (len(rows) - 1)
    assert rows[0]["invalid_reasons"][0]["code"] == "prefix_cache"
    result = compare(load_systems([[base], [contender]]), per="kW")
    # point 0 holds the baseline's highest interactivity, so a compared value comes from it
    assert [w for w in result.warnings() if "invalid" in w] == [
        ("H200 ×8 fp8 · base: compared values come from invalid points c1 (prefix_cache) "
         "(`scoville show` lists the reasons)")]
    assert not any("invalid" in w for w in compare(load_systems([[contender]]), per="kW").warnings())


def test_show_marks_invalid_points_and_lists_why_in_80_columns(tmp_path, monkeypatch):
    run = make_run(tmp_path, "20260101T000000Z-aaaaaa", BASELINE_POINTS[:2])
    m = json.loads((run / "manifest.json").read_text())
    m["point_results"] = {"1": {"point": 1, "attempt": 0, "t_start": 0.0, "requests": 4, "ok": 4, "failed": 0,
                                "client_cpu_share": 0.99,
                                "steal_share": 0.0}}
    (run / "manifest.json").write_text(json.dumps(m))
    recompute(run)
    monkeypatch.setattr(runs_cmd, "console", Console(width=80))
    app = typer.Typer()
    runs_cmd.register(app)
    r = CliRunner().invoke(app, ["show", run.name, "--runs", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert max(len(line) for line in r.output.splitlines()) <= 80
    assert "(! = invalid point, reasons below)" in r.output and "c2!" in r.output and "c1!" not in r.output
    assert "! point c2: client_cpu: a client process used 99% of a core" in " ".join(r.output.split())


def test_the_report_marks_invalid_points_and_lists_why(tmp_path):
    run = make_run(tmp_path, "20260101T000000Z-aaaaaa", BASELINE_POINTS[:2])
    m = json.loads((run / "manifest.json").read_text())
    m["point_results"] = {"0": {"point": 0, "attempt": 0, "t_start": 0.0, "requests": 4, "ok": 4, "failed": 0,
                                "steal_share": 0.2}}
    (run / "manifest.json").write_text(json.dumps(m))
    recompute(run)
    page = write_report([run], tmp_path / "r.html").read_text()
    assert "<td>c1 (invalid)</td>" in page and "<td>c2</td>" in page
    assert "<li>point c1: <code>steal</code> the hypervisor stole 20.0% of the host&#x27;s CPU time" in page
    assert "Validity: c1: measured: checked errors, steal, prefix cache; c2: measured: checked errors." in page
