"""Config search: the frontier is really the non-dominated set, its configurations reproduce it,
fan-out does not change results, and a searched run records each point's winning configuration."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from scoville.executor import LocalExecutor
from scoville.load import concurrency_sweep
from scoville.results.store import read_manifest, read_point_metrics
from scoville.sim.config import SimConfig
from scoville.sim.driver import simulate_run
from scoville.sim.search import (X_KEY, Y_KEY, SearchSpace, evaluate_candidate, frontier_plan, instance_shapes,
                                 pareto, search, search_points)
from scoville.workload.synthetic import scenario

BASE = SimConfig(hardware="h200", model="llama-3.1-8b")
SPACE = SearchSpace(max_instance_accelerators=2, max_num_seqs=(16, 256), max_num_batched_tokens=(2048,),
                    ratios=((1, 1),), refine_top=1, min_search_requests=8)
POINTS = concurrency_sweep([1, 8, 48], num_requests=24, warmup_requests=4)
WORKLOAD = scenario("1k1k")


@pytest.fixture(scope="module")
def result():
    return search(BASE, WORKLOAD, POINTS, space=SPACE, executor=LocalExecutor(1))


def dominates(a: dict, b: dict) -> bool:
    return a[X_KEY] >= b[X_KEY] and a[Y_KEY] >= b[Y_KEY] and (a[X_KEY] > b[X_KEY] or a[Y_KEY] > b[Y_KEY])


def test_shapes_fit_the_model_and_respect_the_limit():
    shapes = instance_shapes(BASE, SPACE)
    assert [s.tp for s in shapes] == [1, 2]
    assert instance_shapes(SimConfig(hardware="h100", model="llama-3.1-70b"), SearchSpace())[0].tp >= 2


def test_frontier_is_exactly_the_non_dominated_set(result):
    assert result.evaluated >= 4
    front = result.frontier
    assert front
    for f in front:
        assert not any(dominates(r, f) for r in result.rows)
    for r in result.rows:
        if not any(r is f for f in front):
            assert any(dominates(f, r) or (f[X_KEY], f[Y_KEY]) == (r[X_KEY], r[Y_KEY]) for f in front)
    # the candidate set includes disaggregated deployments and batch-limit variants
    labels = {r["config"].label() for r in result.rows}
    assert any(label.startswith("P ") for label in labels)
    assert any("seqs16" in label for label in labels)


def test_winning_configuration_reproduces_its_frontier_point(result):
    f = result.frontier[-1]
    pts = [p for p in search_points(POINTS, SPACE) if p.concurrency == f["concurrency"]]
    again = evaluate_candidate(f["config"], WORKLOAD, pts)[0]
    assert again[Y_KEY] == pytest.approx(f[Y_KEY]) and again[X_KEY] == pytest.approx(f[X_KEY])


def test_process_pool_gives_the_same_frontier_as_inline(result):
    with LocalExecutor(2) as ex:
        pooled = search(BASE, WORKLOAD, POINTS, space=SPACE, executor=ex)
    assert [(r["config"], r["concurrency"], r[Y_KEY]) for r in pooled.frontier] == \
           [(r["config"], r["concurrency"], r[Y_KEY]) for r in result.frontier]


def test_searched_run_records_each_points_winning_configuration(result, tmp_path: Path):
    points, configs = frontier_plan(result, POINTS)
    run = simulate_run(BASE, WORKLOAD, points, tmp_path, point_configs=configs, search=result.summary())
    m = read_manifest(run)
    plan = m["load_plan"]["points"]
    assert [SimConfig.model_validate(p["config"]) for p in plan] == configs
    assert [p["accelerators"] for p in plan] == [c.accelerators for c in configs]
    assert m["target"]["search"]["candidates"] == result.evaluated
    rows = read_point_metrics(run)
    assert [json.loads(r["config"]) for r in rows] == [c.model_dump() for c in configs]
    assert [r["accelerators"] for r in rows] == [c.accelerators for c in configs]


def test_pareto_keeps_the_upper_envelope():
    rows = [{X_KEY: 10, Y_KEY: 1}, {X_KEY: 5, Y_KEY: 5}, {X_KEY: 4, Y_KEY: 4}, {X_KEY: 1, Y_KEY: 9},
            {X_KEY: 1, Y_KEY: 8}, {X_KEY: None, Y_KEY: 100}]
    assert [(r[X_KEY], r[Y_KEY]) for r in pareto(rows)] == [(10, 1), (5, 5), (1, 9)]


def test_simulate_command_pinned_config_and_errors(tmp_path: Path):
    from scoville.cli import simulate_cmd

    app = typer.Typer()
    simulate_cmd.register(app)

    @app.command("noop")
    def _noop() -> None:  # a second command keeps Typer in multi-command mode
        pass

    cfg = tmp_path / "pin.yaml"
    cfg.write_text("hardware: h200\nmodel: llama-3.1-8b\nmax_num_seqs: 64\n")
    runner = CliRunner()
    res = runner.invoke(app, ["simulate", "--config", str(cfg), "--scenario", "1k1k", "--concurrency", "1,4",
                              "--num-requests", "8", "--runs", str(tmp_path / "runs"), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout[res.stdout.index("{"):])
    assert Path(out["run_dir"]).exists() and [p["label"] for p in out["points"]] == ["c=1", "c=4"]
    table = runner.invoke(app, ["simulate", "--config", str(cfg), "--scenario", "1k1k", "--concurrency", "2",
                                "--num-requests", "4", "--runs", str(tmp_path / "runs")])
    assert table.exit_code == 0, table.output
    assert "c=2" in table.stdout and "(simulated)" in table.stdout
    assert Path(table.stdout.strip().splitlines()[-1]).exists()
    bad = runner.invoke(app, ["simulate", "--hardware", "h200", "--runs", str(tmp_path / "runs")])
    assert bad.exit_code != 0 and "--model" in str(bad.exception)
