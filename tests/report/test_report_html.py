"""The HTML report file: self-contained, complete, and with the charts and figures a reader needs."""

import base64
import gzip
import json
import re

import pytest

from scoville.reporting.html import plotly_js, write_report


def figures(html_text: str) -> dict:
    m = re.search(r"const FIGS = (\{.*?\});\n", html_text, re.S)
    assert m, "report carries no figure data"
    return json.loads(m.group(1).replace("<\\/", "</"))


@pytest.fixture(scope="module")
def report(report_runs, tmp_path_factory):
    _, runs = report_runs
    out = write_report(runs, tmp_path_factory.mktemp("out") / "report.html")
    return out, out.read_text()


def test_report_is_self_contained(report):
    _, text = report
    # the bundle is inlined from the plotly package, gzipped and base64-encoded
    packed = re.search(r'<script id="plotly-gz" type="application/gzip;base64">([A-Za-z0-9+/=]+)</script>', text)
    assert packed is not None
    bundle = gzip.decompress(base64.b64decode(packed.group(1))).decode()
    assert bundle == plotly_js() and "plotly.js v" in bundle
    assert len(text) < len(bundle) / 2   # the whole page is under half the bundle's own size
    # outside the bundle, the page references nothing remote
    page = text.replace(packed.group(0), "")
    assert "<script src" not in page and "<link" not in page
    assert not re.search(r"""(src|href|url)\s*[=(]\s*["']?(https?:)?//""", page)


def test_comparison_table_carries_the_yardsticks_and_power_basis(report):
    _, text = report
    assert "103.9×" in text and "1.90×" in text
    assert "12,258" in text and "118" in text
    assert "[nvml, board boundary]" in text and "[rated, chip boundary]" in text
    assert "Throughput per accelerator" in text and "Throughput per dollar" in text


def test_frontier_charts_have_a_points_and_a_frontier_trace_per_system(report):
    _, text = report
    figs = figures(text)
    labels = ["H200 ×8", "GB300 NVL72 (sim)", "B200 ×8"]
    for x in ("interactivity", "e2e", "ttft"):
        acc = figs[f"frontier-accelerator-{x}"]
        assert [t["name"] for t in acc["data"]] == [n for label in labels for n in (f"{label} points", label)]
        kw = figs[f"frontier-kw-{x}"]
        assert len(kw["data"]) == 6 and "[nvml, board boundary]" in kw["data"][5]["name"]
    inter = figs["frontier-kw-interactivity"]
    assert inter["layout"]["yaxis"]["type"] == "log"  # 100 .. 85,400 tok/s/kW spans decades
    assert "tok/s/user" in inter["layout"]["xaxis"]["title"]["text"]
    assert "tok/s/kW" in inter["layout"]["yaxis"]["title"]["text"]
    # frontier line ends where the frontier ends: never drawn past the last point
    base_line = figs["frontier-kw-interactivity"]["data"][1]
    assert max(base_line["x"]) == pytest.approx(169)


def test_each_run_has_cdfs_power_only_where_measured_and_its_full_manifest(report):
    _, text = report
    figs = figures(text)
    for run in ("20261202T100000Z-base00", "20261202T100001Z-cont00", "20261202T100002Z-meas00"):
        for kind in ("ttft", "tpot", "itl"):
            assert figs[f"cdf-{kind}-{run}"]["data"], f"no {kind} CDF for {run}"
        assert run in text
    assert [t["name"] for t in figs["cdf-tpot-20261202T100002Z-meas00"]["data"]] == [f"c{2 ** i}" for i in range(7)]
    assert "power-20261202T100002Z-meas00" in figs
    assert len(figs["power-20261202T100002Z-meas00"]["data"]) == 8  # one line per device
    assert "power-20261202T100000Z-base00" not in figs
    for fact in ("GB300 NVL72", "llama-70b", "fp8", "&quot;tp&quot;: 72", "1k1k", "nvml, board", "rated, chip"):
        assert fact in text
    assert "Full manifest" in text


def test_report_rejects_an_empty_run_list(tmp_path):
    from scoville.errors import UserError

    with pytest.raises(UserError):
        write_report([], tmp_path / "r.html")


def test_runs_without_power_or_with_a_broken_sample_still_report(tmp_path):
    import pyarrow as pa
    from runs_factory import make_run

    from scoville.results.store import RunWriter, read_manifest

    nopower = make_run(tmp_path, "nopower", [(50.0, 1000.0), (20.0, 3000.0)], store_metrics=False)
    m = json.loads((nopower / "manifest.json").read_text())
    m["power"] = {"source": "none"}
    (nopower / "manifest.json").write_text(json.dumps(m))
    measured = make_run(tmp_path, "measured", [(50.0, 1000.0), (20.0, 3000.0)], measured_power=True,
                        store_metrics=False)
    w = RunWriter(measured, read_manifest(measured), journal=False)
    w.write_power(pa.table({"t": [0.5], "device": ["gpu0"], "watts": [float("nan")]}))  # a sensor glitch
    text = write_report([nopower, measured], tmp_path / "r.html").read_text()
    figs = figures(text)
    assert "Throughput per kW is not compared" in text and "no power figure" in text
    assert "no power figure, not shown: " in figs["frontier-kw-interactivity"]["layout"]["annotations"][-1]["text"]
    assert "power-measured" in figs


def test_a_points_configuration_is_summarised_for_its_hover():
    from scoville.reporting.charts import config_summary

    cfg = json.dumps({"block_size": 16, "parallel": {"tp": 8, "dp": 1}, "replicas": 2, "disaggregation": None,
                      "precision": "fp8", "router": "least_loaded"})
    assert config_summary(cfg) == "parallel tp8 dp1 · replicas 2 · precision fp8"
    pd = {"disaggregation": {"prefill": {"parallel": {"tp": 4}, "replicas": 2}, "decode": {"parallel": {"tp": 8}}}}
    assert config_summary(pd) == "disaggregation prefill(parallel(tp4) replicas2) decode(parallel(tp8))"
    assert config_summary("{not json") == "{not json"
    assert len(config_summary({"options": "x" * 500})) == 160


def test_runs_recorded_with_an_slo_show_goodput_per_point(tmp_path):
    from runs_factory import make_run

    from scoville.metrics import recompute

    run = make_run(tmp_path, "slo", [(50.0, 1000.0), (10.0, 3000.0)], store_metrics=False)
    m = json.loads((run / "manifest.json").read_text())
    m["slo"] = {"tpot_s": 0.05}  # point 0 (TPOT 0.02 s) meets it, point 1 (0.1 s) does not
    (run / "manifest.json").write_text(json.dumps(m))
    recompute(run)
    text = write_report([run], tmp_path / "r.html").read_text()
    assert "goodput req/s" in text and "SLO met" in text
    assert "<td>100%</td>" in text and "<td>0%</td>" in text


def test_advantage_curve_ends_at_the_104x_figure_and_never_leaves_the_overlap(report):
    _, text = report
    ratio = figures(text)["ratio-kw-interactivity"]
    names = [t["name"] for t in ratio["data"]]
    assert names == ["parity (1×)", "GB300 NVL72 (sim) / H200 ×8", "B200 ×8 / H200 ×8"]
    gb300 = ratio["data"][1]
    assert gb300["x"][-1] == pytest.approx(169) and gb300["y"][-1] == pytest.approx(12_258 / 118, rel=1e-6)
    assert gb300["x"][0] == pytest.approx(20)  # the contender's frontier starts at 20 tok/s/user
    assert ratio["layout"]["yaxis"]["type"] == "log"


def test_itl_cdf_uses_the_runs_compat_mode(tmp_path):
    """A clean-mode run's ITL CDF shows per-token gaps, as its ITL percentiles do; inferencex shows chunk gaps."""
    from scoville.metrics import recompute
    from scoville.results.manifest import base_manifest
    from scoville.results.schema import RequestRecord
    from scoville.results.store import RunWriter, read_point_metrics

    def run(compat: str):
        manifest = base_manifest(source="measured", target={}, system={"accelerators": 1}, model={}, serving={},
                                 workload={}, load_plan={"points": [{"index": 0, "concurrency": 1}]},
                                 power={"source": "none"}, compat=compat)
        manifest.run_id = f"itl-{compat}"
        w = RunWriter.create(tmp_path, manifest, journal=False)
        # chunks of 1 token at 1.0 and of 3 tokens at 2.0: chunk gaps [1.0]; per-token gaps [1.0, 0, 0]
        w.write_point(0, [RequestRecord(point=0, request_id=f"r{i}", t_sent=0.0, t_first_token=1.0, t_done=2.0,
                                        token_times=[1.0, 2.0], token_counts=[1, 3], input_tokens=10,
                                        output_tokens=4) for i in range(3)])
        w.finish()
        recompute(w.run_dir)
        return w.run_dir

    for compat, title, xs in (("clean", "ITL (per token)", [0.0, 1.0]), ("inferencex", "ITL (chunk gaps)", [1.0])):
        d = run(compat)
        fig = figures(write_report([d], tmp_path / f"{compat}.html").read_text())[f"cdf-itl-itl-{compat}"]
        assert title in fig["layout"]["title"]["text"]
        assert sorted(set(fig["data"][0]["x"])) == xs
        stored = read_point_metrics(d)
        assert stored[0]["itl_s_median"] == (0.0 if compat == "clean" else 1.0)


def test_an_unwritable_report_path_is_a_user_error(report_runs, tmp_path):
    from scoville.errors import UserError

    _, runs = report_runs
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    with pytest.raises(UserError, match="cannot write the report"):
        write_report(runs[:1], blocker / "report.html")


def test_predicted_points_carry_their_bands_beside_measured_ones(report_runs, tmp_path):
    """A simulated (analytic) run next to a measured one: its points get error bars, the measured do not."""
    from scoville.sim.analytic import write_analytic_run
    from scoville.sim.config import SimConfig
    from scoville.sim.search import SearchSpace, search
    from scoville.workload.synthetic import scenario

    _, runs = report_runs
    base = SimConfig(hardware="h200", model="llama-3.1-8b", kv_dtype="fp8")
    res = search(base, 922, 922, space=SearchSpace(max_accelerators=1, disaggregation=False, max_concurrency=64),
                 points=5)
    predicted = write_analytic_run(base, scenario("1k1k"), res.frontier, tmp_path / "runs")
    out = write_report([runs[0], predicted], tmp_path / "report.html")
    figs = figures(out.read_text())
    traces = [t for fig in figs.values() for t in fig["data"] if t.get("mode") == "markers"]
    banded = [t for t in traces if "error_y" in t]
    assert banded and all(len(t["error_y"]["array"]) == len(t["y"]) for t in banded)
    assert all(lo >= 0 and hi >= 0
               for t in banded for lo, hi in zip(t["error_y"]["arrayminus"], t["error_y"]["array"], strict=True))
    assert any("error_y" not in t for t in traces)          # the measured run's points stay plain


def test_a_single_run_report_leads_with_its_frontier_and_says_what_it_shows(report_runs, tmp_path):
    _, runs = report_runs
    text = write_report([runs[0]], tmp_path / "one.html").read_text()
    assert "<h2>Comparison</h2>" not in text                   # nothing to compare with one system
    assert text.index("<h2>Pareto frontiers</h2>") < text.index("<h2>What this run shows</h2>")
    assert "peak total throughput: 45,000 tok/s/kW [rated, chip boundary]" in text
    assert "fastest per user: 169 tok/s/user" in text
    two = write_report(runs[:2], tmp_path / "two.html").read_text()
    assert "<h2>Comparison</h2>" in two and "What this run shows" not in two


def test_a_one_point_chart_gets_a_range_a_reader_can_place_the_point_in():
    # plotly zooms onto a lone point and ticks it "33.1195k"; the figure pins a range around it instead
    from scoville.reporting.charts import Chart, Series
    from scoville.reporting.plotly_fig import figure

    one = Chart(id="c", title="t", x_label="x", y_label="y", y_log=True,
                series=[Series("s", [61.8], [33_118.6], "points", "#000")])
    layout = figure(one)["layout"]
    assert layout["xaxis"]["range"] == [0, 2 * 61.8]
    lo, hi = layout["yaxis"]["range"]
    assert 10 ** lo < 33_118.6 < 10 ** hi
    many = Chart(id="m", title="t", x_label="x", y_label="y", series=[Series("s", [10, 60], [1, 5], "points", "#000")])
    assert "range" not in figure(many)["layout"]["xaxis"]     # a real spread keeps plotly's own range


def test_a_multi_turn_run_reports_its_sessions_and_prefix_cache(tmp_path):
    from scoville.load import concurrency_sweep
    from scoville.sim.config import SimConfig
    from scoville.sim.driver import simulate_run
    from scoville.workload.scenarios import resolve_workload

    cfg = SimConfig(hardware="h200", model="llama-3.1-8b", enable_prefix_caching=True)
    chat = resolve_workload("chat-multiturn", think_scale=0.0)
    run = simulate_run(cfg, chat, concurrency_sweep([2], num_requests=12), tmp_path / "runs")
    text = write_report([run], tmp_path / "chat.html").read_text()
    assert "<h3>Sessions and prefix cache</h3>" in text and "cache hit rate" in text
    section = text[text.index("Sessions and prefix cache"):text.index("Full manifest")]
    assert re.search(r"<td>[1-9]\d?%</td>", section)       # later turns find their conversation in the cache
    single = write_report([write_single(tmp_path)], tmp_path / "single.html").read_text()
    assert "Sessions and prefix cache" not in single


def write_single(tmp_path):
    from scoville.load import concurrency_sweep
    from scoville.sim.config import SimConfig
    from scoville.sim.driver import simulate_run
    from scoville.workload.synthetic import scenario

    return simulate_run(SimConfig(hardware="h200", model="llama-3.1-8b"), scenario(None, isl=64, osl=8),
                        concurrency_sweep([1], num_requests=4), tmp_path / "single")


def test_cdf_legends_name_every_point_once_even_when_loads_repeat():
    """A searched simulation replays several deployments at one concurrency: "c=1 c=1" told the reader nothing."""
    import numpy as np

    from scoville.reporting.charts import cdf_charts
    from scoville.results.manifest import PlannedPoint

    plan = [PlannedPoint(index=0, label="c=1", config={"parallel": {"tp": 8}}),
            PlannedPoint(index=1, label="c=1", config={"parallel": {"tp": 4}}),
            PlannedPoint(index=2, label="c=4"),
            PlannedPoint(index=3, label="c=8"), PlannedPoint(index=4, label="c=8")]
    samples = {i: {k: np.array([0.1, 0.2]) for k in ("ttft", "tpot", "itl")} for i in range(5)}
    names = [s.name for s in cdf_charts("r", plan, samples)[0].series]
    assert len(set(names)) == 5
    assert names[:3] == ["c=1 · parallel tp8", "c=1 · parallel tp4", "c=4"]
    assert names[3:] == ["c=8 #3", "c=8 #4"]


def test_a_searched_simulation_shows_each_points_deployment_not_the_searchs_start(tmp_path, capsys):
    """Its Setup used to read "gb300 × 16, tp1 dp1 ep1" while the frontier's winners were other deployments."""
    from pathlib import Path

    from scoville.cli import main

    runs = tmp_path / "runs"
    main(["simulate", "--hardware", "h200", "--model", "llama-3.1-8b", "--scenario", "1k1k", "--no-disagg",
          "--max-accelerators", "8", "--runs", str(runs), "--json"])
    run_dir = Path(json.loads(capsys.readouterr().out)["run_dir"])
    plan = json.loads((run_dir / "manifest.json").read_text())["load_plan"]["points"]
    sizes = sorted({p["accelerators"] for p in plan})
    text = write_report([run_dir], tmp_path / "r.html").read_text()
    setup = text[text.index("<h3>Setup</h3>"):text.index("<h3>Deployment of each point")]
    assert "(per point)" in setup and "each point&#x27;s own deployment" in setup
    if len(sizes) > 1:
        assert f"× {sizes[0]}–{sizes[-1]} accelerators" in setup
    table = text[text.index("<h3>Deployment of each point"):text.index("<h3>Latency percentiles")]
    assert table.count("<tr>") == len(plan) + 1 and "parallel" in table
