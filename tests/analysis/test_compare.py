"""The seed publication's yardsticks, reproduced from synthetic run directories."""

import json

import pytest
from runs_factory import BASELINE_POINTS, CONTENDER_POINTS, make_run

from scoville.analysis import compare, goodput, load_system, load_systems, parse_interactivities, parse_slo
from scoville.analysis.cost import usd_per_mtok
from scoville.errors import UserError


@pytest.fixture(scope="module")
def seed_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    base = make_run(root, "20261202T100000Z-base00", BASELINE_POINTS, hardware="H200", accelerators=8, watts=700)
    cont = make_run(root, "20261202T100001Z-cont00", CONTENDER_POINTS, hardware="GB300 NVL72",
                    accelerators=72, watts=1400, source="simulated", cost=None)
    return root, base, cont


def test_iso_interactivity_auto_gives_the_104x_figure(seed_runs):
    _, base, cont = seed_runs
    c = compare(load_systems([[base], [cont]]), ["auto"], per="kW")
    b, k = c.systems
    assert b.at[0].interactivity == pytest.approx(169) and b.at[0].auto
    assert b.at[0].value == pytest.approx(118)
    assert k.at[0].value == pytest.approx(12_258)
    assert k.at[0].ratio == pytest.approx(12_258 / 118)
    header, rows = c.table()
    auto_row = next(r for r in rows if "(the baseline's highest)" in r[0])
    assert auto_row[1:] == ["118", "12,258", "103.9×"]
    assert "rated, chip boundary" in auto_row[0]  # a per-kW figure carries its power basis


def test_peak_ratios_and_latency_yardsticks(seed_runs):
    _, base, cont = seed_runs
    c = compare(load_systems([[base], [cont]]), [100.0, 300.0], per="kW")
    b, k = c.systems
    assert b.peak == pytest.approx(45_000) and k.peak == pytest.approx(85_400)
    assert k.ratios["peak"] == pytest.approx(1.898, abs=1e-3)
    assert "1.90×" in c.to_markdown()
    assert b.highest_interactivity == pytest.approx(169) and k.highest_interactivity == pytest.approx(420)
    assert k.lowest_e2e_s < b.lowest_e2e_s
    # 300 tok/s/user: the baseline cannot get there, so there is no ratio, and it says why
    assert b.at[1].value is None and b.at[1].why_undefined == "beyond reach"
    assert k.at[1].value == pytest.approx(2_000)
    assert k.at[1].ratio is None and k.at[1].ratio_why_undefined == "baseline beyond reach"
    md = c.to_markdown()
    row = "| total tok/s/kW [rated, chip boundary] at 300 tok/s/user | beyond reach | 2,000 | baseline beyond reach |"
    assert row in md


def test_contender_frontier_ending_early_reads_beyond_reach(seed_runs):
    _, base, cont = seed_runs
    c = compare(load_systems([[cont], [base]]), [200.0], per="accelerator")
    assert c.systems[1].at[0].value is None
    assert c.systems[1].at[0].ratio_why_undefined == "beyond reach"
    assert c.unit == "tok/s/accelerator"


def test_per_is_read_in_any_case_as_the_cli_and_the_api_both_pass_it(seed_runs):
    _, base, cont = seed_runs
    systems = load_systems([[base], [cont]])
    assert compare(systems, per="KW").per == compare(systems, per="kw").per == "kW"
    assert compare(systems, per="Accelerator").unit == "tok/s/accelerator"
    with pytest.raises(UserError, match="--per 'watt': use one of kW, accelerator, dollar"):
        compare(systems, per="watt")


def test_json_output_is_complete_and_serialisable(seed_runs):
    _, base, cont = seed_runs
    data = json.loads(json.dumps(compare(load_systems([[base], [cont]]), ["auto", 100.0]).to_dict()))
    assert data["interpolation"] == "steffen" and data["baseline"] == "H200 ×8"
    sys0 = data["systems"][0]
    assert sys0["power_source"] == "rated" and sys0["power_boundary"] == "chip"
    assert [a["interactivity"] for a in sys0["at_interactivity"]] == pytest.approx([169, 100])
    assert data["systems"][1]["label"] == "GB300 NVL72 (sim)"
    assert len(sys0["frontier"]) == len(BASELINE_POINTS)


def test_per_dollar_needs_a_price_and_per_kw_needs_power(seed_runs, tmp_path):
    _, base, cont = seed_runs
    with pytest.raises(UserError, match="cost_per_accelerator_hour"):
        compare(load_systems([[base], [cont]]), per="dollar")
    c = compare(load_systems([[base]]), per="dollar")
    # 8 accelerators at $2/h: tokens per dollar = tok/s * 3600 / $16
    peak_tput = 45_000 * 0.7 * 8
    assert c.systems[0].peak == pytest.approx(peak_tput * 3600 / 16)
    assert c.systems[0].lowest_usd_per_mtok == pytest.approx(16 / (peak_tput * 3600 / 1e6))
    assert any(r[0] == "lowest $ per million total tokens" for r in c.table()[1])
    nopower = make_run(tmp_path, "nopower", [(10.0, 100.0)])
    m = json.loads((nopower / "manifest.json").read_text())
    m["power"] = {"source": "none"}
    (nopower / "manifest.json").write_text(json.dumps(m))
    (nopower / "points.parquet").unlink()  # recompute from raw records with the edited manifest
    with pytest.raises(UserError, match="no power figure"):
        compare(load_systems([[nopower]]), per="kW")
    assert compare(load_systems([[nopower]]), per="accelerator").systems[0].peak > 0


def test_pooled_runs_form_one_frontier(tmp_path):
    tp8 = make_run(tmp_path, "tp8", [(20.0, 5000.0), (60.0, 1000.0)])
    tp4 = make_run(tmp_path, "tp4", [(40.0, 4000.0), (90.0, 200.0)])
    s = load_system([tp8, tp4])
    c = compare([s], [40.0, 90.0])
    pts = [(round(p.x), round(p.y)) for p in c.systems[0].frontier.points]
    assert pts == [(20, 5000), (40, 4000), (60, 1000), (90, 200)]
    assert c.systems[0].at[1].value == pytest.approx(200)


def test_duplicate_labels_are_disambiguated(tmp_path):
    a = make_run(tmp_path, "20261202T1-aaaaaa", [(20.0, 5000.0)], precision="fp8")
    b = make_run(tmp_path, "20261202T1-bbbbbb", [(20.0, 5000.0)], precision="fp4")
    systems = load_systems([[a], [b]])
    labels = [s.label for s in systems]
    assert len(set(labels)) == 2 and "fp8" in labels[0] and "fp4" in labels[1]
    # a ratio between different precisions is flagged, not silently quoted
    assert compare(systems).warnings() == ["different precisions: fp8 vs fp4"]


def test_a_run_without_a_recorded_precision_is_named_as_the_checkpoint_not_none(tmp_path):
    a = make_run(tmp_path, "20261202T1-aaaaaa", [(20.0, 5000.0)], precision=None)
    b = make_run(tmp_path, "20261202T1-bbbbbb", [(20.0, 5000.0)], precision="fp8")
    assert compare(load_systems([[a], [b]])).warnings() == ["different precisions: checkpoint precision vs fp8"]


def test_like_for_like_systems_carry_no_warnings(seed_runs):
    _, base, cont = seed_runs
    assert compare(load_systems([[base], [cont]])).warnings() == []


def test_goodput_recomputes_slo_attainment_from_requests(tmp_path):
    run = make_run(tmp_path, "g", [(50.0, 1000.0), (10.0, 3000.0)])
    # point 0: TPOT 0.02 s; point 1: TPOT 0.1 s -> a 0.05 s TPOT SLO passes only point 0
    rows = goodput(run, parse_slo("tpot_s=0.05"))
    assert [r["slo_attainment"] for r in rows] == [1.0, 0.0]
    assert rows[0]["goodput"] == pytest.approx(rows[0]["request_throughput"])
    assert rows[1]["goodput"] == 0.0
    with pytest.raises(UserError, match="METRIC_s=SECONDS"):
        parse_slo("latency=3")
    for bad in ("ttft_s=0", "ttft_s=nan"):  # limits no request could ever meet
        with pytest.raises(UserError, match="positive duration|not a duration"):
            parse_slo(bad)
    # a statistic limit is also a per-request threshold; ITL alone has none
    assert parse_slo("tpot_p90=50ms") == pytest.approx({"tpot_s": 0.05})
    with pytest.raises(UserError, match="no per-request limit"):
        parse_slo("itl_p90=50ms")


def test_cost_per_million_tokens():
    # 8 GPUs at $2.5/h producing 10,000 tok/s: $20/h for 36 Mtok/h
    assert usd_per_mtok(10_000, 8, 2.5) == pytest.approx(20 / 36)


def test_interactivity_argument_parsing():
    assert parse_interactivities("100, 169") == [100.0, 169.0]
    assert parse_interactivities("auto,50") == ["auto", 50.0]
    for bad in ("", "fast", "-3"):
        with pytest.raises(UserError):
            parse_interactivities(bad)


def test_interactivity_below_a_sweep_gives_a_lower_bound_not_a_guess(tmp_path):
    # the contender's slowest point already serves 150 tok/s/user; at 100 it does at least its peak
    base = make_run(tmp_path, "base", [(50.0, 8000.0), (120.0, 1000.0)])
    fast = make_run(tmp_path, "fast", [(150.0, 20000.0), (300.0, 5000.0)])
    c = compare(load_systems([[base], [fast]]), [100.0, 40.0])
    at100 = c.systems[1].at[0]
    assert at100.value == pytest.approx(20000) and at100.bound == "at least"
    assert at100.ratio == pytest.approx(20000 / c.systems[0].at[0].value) and at100.ratio_bound == "at least"
    at40 = c.systems[1].at[1]
    assert at40.ratio is None and at40.ratio_why_undefined == "both below the measured range"
    row = next(r for r in c.table()[1] if "at 100 tok/s/user" in r[0])
    assert row[2].startswith("≥ 20,000") and row[3].startswith("≥ ")


def test_a_run_with_no_finished_request_says_so(tmp_path):
    from scoville.results.manifest import base_manifest
    from scoville.results.store import RunWriter

    m = base_manifest(source="measured", target={}, system={"hardware": "x", "accelerators": 1}, model={"name": "m"},
                      serving={}, workload={"name": "w"}, load_plan={"points": [{"index": 0, "concurrency": 1}]},
                      power={"source": "rated", "watts_per_accelerator": 700.0})
    empty = RunWriter.create(tmp_path, m).run_dir  # started, nothing recorded yet
    with pytest.raises(UserError, match="no load point with a successful request"):
        compare(load_systems([[empty]]))


def test_the_default_point_is_one_every_system_reaches_and_auto_keeps_its_meaning(tmp_path):
    # the contender's fastest point is a hair slower than the baseline's: 'auto' (the baseline's highest) is beyond
    # its reach, the default 'common' (the highest every system reaches) is not, and the table says which it is
    a = make_run(tmp_path, "20261202T1-aaaaaa", [(100.0, 5000.0), (50.0, 9000.0)])
    b = make_run(tmp_path, "20261202T1-bbbbbb", [(99.997, 6000.0), (50.0, 10000.0)])
    systems = load_systems([[a], [b]])
    auto = compare(systems, ["auto"]).systems[1].at[0]
    assert auto.interactivity == pytest.approx(100.0) and auto.value is None and auto.ratio is None
    default = compare(systems)
    base, cont = default.systems
    assert cont.at[0].interactivity == pytest.approx(99.997) and cont.at[0].rule == "common"
    assert base.at[0].value is not None and cont.at[0].ratio == pytest.approx(6000.0 / base.at[0].value)
    _, rows = default.table()
    assert any("(the highest all reach)" in row[0] for row in rows)
