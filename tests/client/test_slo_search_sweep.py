"""An SLO search driven through a real measured sweep (fake server; the emulator under the CLI is slow)."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import pytest
from client_support import Behaviour, run_cli

from scoville.client.config import ClientConfig
from scoville.client.errors import ClientError
from scoville.client.sweep import Sweep, resume_sweep, run_sweep
from scoville.power.sources import plan_power, system_info
from scoville.results.store import read_manifest, read_point_metrics
from scoville.search_plan import build_search
from scoville.slo import SloError
from scoville.workload.synthetic import SyntheticWorkload

WL = SyntheticWorkload(isl=24, osl=6, range_ratio=1.0, seed=2, name="tiny")


def search_sweep(server, slo: str, search_max: int) -> Sweep:
    slo_limits, plan = build_search(slo_text=slo, search=True, search_rate=None, search_max=search_max,
                                    predict=None, profile=None, workload=WL, num_requests=4, warmup_requests=1,
                                    accelerators=2)
    power = plan_power("rated", hardware="h200", accelerators=2)
    return Sweep(cfg=ClientConfig(base_url=server.base_url, model="test-model"), workload=WL, points=[],
                 power=power, system=system_info("h200", 2, power, 1.5), workers=1, plan=plan,
                 slo=slo_limits.per_request())


def test_a_search_met_everywhere_climbs_to_its_ceiling_and_records_every_point(server, tmp_path):
    server.set(Behaviour(ttft_s=0.02, interval_s=0.001))
    result = run_sweep(search_sweep(server, "ttft_p90=5s,tpot_p90=1s", 4), tmp_path)
    m = json.loads((result.run_dir / "manifest.json").read_text())  # the file as written
    assert result.status == "complete" and m["load_plan"]["mode"] == "concurrency"
    assert [p["label"] for p in m["load_plan"]["points"]] == ["c=1", "c=2", "c=4"]
    assert [p["index"] for p in m["load_plan"]["points"]] == [0, 1, 2]
    block = m["slo_search"]
    assert block["done"] and block["answer"] == 4 and block["at_ceiling"] and block["points_measured"] == 3
    assert "met up to the search ceiling c=4" in block["line"] and block["slo"] == {"ttft_p90": 5.0, "tpot_p90": 1.0}
    rows = read_point_metrics(result.run_dir)
    assert [r["concurrency"] for r in rows] == [1, 2, 4]
    assert all(r["slo_attainment"] == 1.0 and r["goodput"] == pytest.approx(r["request_throughput"]) for r in rows)
    assert m["slo"] == {"ttft_s": 5.0, "tpot_s": 1.0}          # per-request goodput thresholds
    assert [x["goodput"] for x in block["measured"]] == [r["goodput"] for r in rows]
    assert block["accelerator_minutes"] > 0
    with pytest.raises(ClientError, match="cannot be resumed"):
        resume_sweep(result.run_dir)


def test_a_search_that_fails_at_the_first_load_measures_one_point(server, tmp_path):
    server.set(Behaviour(ttft_s=0.05, interval_s=0.001))
    result = run_sweep(search_sweep(server, "ttft_p90=10ms", 64), tmp_path)
    block = read_manifest(result.run_dir).slo_search
    assert block["answer"] == 0 and block["points_measured"] == 1
    assert "not met even at c=1: ttft_p90" in block["line"]


@pytest.mark.parametrize("kwargs, message", [
    (dict(slo_text=None), "--search needs --slo"),
    (dict(slo_text="ttft_s=2"), "per-request goodput limit"),
    (dict(slo_text="ttft_p90=2s", concurrency="1,2"), "drop --concurrency"),
    (dict(slo_text="ttft_p90=2s", single=True), "scoville sweep --search"),
    (dict(slo_text="ttft_p90=2s", search_max=0.5), "below the first load"),
    (dict(slo_text="ttft_p90=2s", search_max=float("inf")), "--search-max must be a load between 0 and"),
    (dict(slo_text="ttft_p90=2s", search_max=float("nan")), "--search-max must be a load between 0 and"),
    (dict(slo_text="ttft_p90=2s", profile=Path("p.json")), "give --predict"),
    (dict(slo_text="ttft_p90=2s", predict="h200"), "HARDWARE/MODEL"),
    (dict(slo_text="ttft_p90=2s", search=False, predict="h200/llama-3.1-8b"), "add --search"),
])
def test_search_options_that_cannot_combine_are_refused_in_one_line(kwargs, message):
    args = dict(search=True, search_rate=None, search_max=None, predict=None, profile=None, workload=WL)
    with pytest.raises((ClientError, SloError, ValueError), match=message):
        build_search(**{**args, **kwargs})


def test_the_prediction_seeds_the_first_load_at_the_estimators_knee():
    wl = SyntheticWorkload(isl=1024, osl=128, range_ratio=1.0, seed=1, name="k")
    _, plan = build_search(slo_text="tpot_p90=12ms", search=True, search_rate=None, search_max=None,
                           predict="h200/llama-3.1-8b", profile=None, workload=wl)
    _, blind = build_search(slo_text="tpot_p90=12ms", search=True, search_rate=None, search_max=None,
                            predict=None, profile=None, workload=wl)
    first = plan.next_point(0).concurrency
    assert blind.next_point(0).concurrency == 1
    # the estimator's TPOT of this deployment crosses 12 ms between 16 and 64 users (tests/sim/test_steady.py)
    assert 16 < first < 64 and plan.seed.level == first
    assert plan.seed.detail["predicted"]["tpot_p90"] <= 0.012
    assert plan.point_seconds(first) > 0


@pytest.mark.slow
def test_cli_search_against_the_emulator_prints_one_answer_line_and_stores_it(tmp_path):
    scoville = partial(run_cli, timeout=300)
    p = scoville("sweep", "--slo", "tpot_p90=12ms", "--search", "--predict", "h200/llama-3.1-8b",
                 "--search-max", "64", "--num-requests", "12", "--warmup-requests", "4", "--runs", str(tmp_path),
                 "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    block = out["slo_search"]
    assert block == read_manifest(Path(out["run_dir"])).slo_search and block["done"]
    # the answer passed and the level above it failed, each by its decided verdicts
    decided = {d["level"]: d["passed"] for d in block["decided"]}
    assert block["answer"] == 0 or decided[block["answer"]] is True
    assert block["at_ceiling"] or decided[block["answer"] + 1] is False
    assert len(out["points"]) == block["points_measured"] and block["seeded_from"]["source"] == "h200/llama-3.1-8b"
    assert all("goodput" in r for r in out["points"])
    assert block["line"].startswith("SLO tpot_p90<=12ms") and "\n" not in block["line"]
