"""``simulate --deployments inferencex``: the frontier of the deployments InferenceX ran, each at its own users."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from scoville.errors import UserError
from scoville.sim.config import SimConfig, SimConfigError
from scoville.sim.recipes import load_recipes, recipe_configs, recipe_weights, recipes_for
from scoville.simulation import SimulateSpec, simulate


def test_the_recipes_on_file_are_read_whole() -> None:
    recipes = load_recipes()
    assert len(recipes) > 100
    assert {r.framework for r in recipes} == {"vllm", "sglang", "trtllm"}
    assert all(r.concurrency and r.gpus >= 1 for r in recipes)
    assert all((r.unified is None) == (r.prefill is not None and r.decode is not None) for r in recipes)


def test_recipe_weights_name_fp4_as_the_recipes_do() -> None:
    assert [recipe_weights(w) for w in ("nvfp4", "mxfp4", "fp8", "int4")] == ["fp4", "fp4", "fp8", "int4"]


def test_a_missing_recipe_names_what_is_on_file() -> None:
    with pytest.raises(SimConfigError, match=r"use --framework sglang or trtllm$"):
        recipes_for("deepseek-r1", "b200", "fp8", "vllm", 8192, 1024)
    with pytest.raises(SimConfigError, match=r"deepseek-r1's recipes cover .*mi325x \(fp8\).* at 1024/1024 and "
                                             r"8192/1024 \(or drop --deployments inferencex to search\)$"):
        recipes_for("deepseek-r1", "jalapeno", "fp8", "vllm", 8192, 1024)
    with pytest.raises(SimConfigError, match="none of it is on file"):
        recipes_for("llama-3.1-8b", "b200", "fp8", "vllm", 8192, 1024)


def test_the_frontier_is_the_recipes_deployments_at_their_own_users(tmp_path: Path) -> None:
    # MI325X is priced by the transfer: no kernel tables needed
    spec = SimulateSpec.of_flat(hardware="mi325x", model="deepseek-r1", framework="sglang", scenario="8k1k",
                                deployments="inferencex", runs=tmp_path)
    result = simulate(spec)
    assert result.search is not None and result.search["frontier"]
    recipes = recipes_for("deepseek-r1", "mi325x", "fp8", "sglang", 8192, 1024)
    ran = {(cfg.label(), c) for r in recipes for cfg in recipe_configs(r, None) for c in r.concurrency}
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    for p in manifest["load_plan"]["points"]:
        assert (SimConfig.model_validate(p["config"]).label(), p["concurrency"]) in ran
    assert manifest["serving"]["framework"] == "scoville.sim (sglang)"


def _app() -> typer.Typer:
    """The ``simulate`` command alone (a second command keeps Typer from folding it into the app)."""
    from scoville.cli import simulate_cmd

    app = typer.Typer()
    simulate_cmd.register(app)
    app.command("noop")(lambda: None)
    return app


@pytest.mark.parametrize(("flags", "named"), [
    (["--mtp", "off"], "--mtp"), (["--concurrency", "1-64"], "--concurrency"),
    (["--no-unified"], "no disaggregated InferenceX recipe"), (["--no-disagg", "--no-unified"], "both off"),
    (["--scenario", "chat-multiturn"], "single-turn recipes"), (["--framework", "vllm"], "--framework sglang"),
    (["--config", "pinned.yaml"], "drop --config"),
])
def test_options_a_recipe_fixes_are_refused_in_one_line(tmp_path: Path, flags: list[str], named: str) -> None:
    (tmp_path / "pinned.yaml").write_text("hardware: mi325x\nmodel: deepseek-r1\n")
    runs = tmp_path / "runs"
    args = ["simulate", "--hardware", "mi325x", "--model", "deepseek-r1", "--framework", "sglang",
            "--deployments", "inferencex", "--runs", str(runs),
            *[str(tmp_path / f) if f.endswith(".yaml") else f for f in flags]]
    res = CliRunner().invoke(_app(), args)
    # a UserError, which the scoville CLI prints as its one red line (cli.main)
    assert res.exit_code != 0 and isinstance(res.exception, UserError)
    assert named in str(res.exception) and "\n" not in str(res.exception)
    assert not runs.exists() or not list(runs.iterdir())  # refused before anything was written


def test_the_cli_says_it_priced_the_recipes_rather_than_searched(tmp_path: Path) -> None:
    res = CliRunner().invoke(_app(), ["simulate", "--hardware", "mi325x", "--model", "deepseek-r1", "--framework",
                                   "sglang", "--deployments", "inferencex", "--runs", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert "InferenceX recipe deployments" in res.output and "candidates" not in res.output
