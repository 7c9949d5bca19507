"""The Python API: each call does what its command does, returns typed objects, and fails in one line."""

import json
import urllib.request
from pathlib import Path

import pytest

import scoville
from scoville.errors import UserError


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    return root, scoville.simulate("h200", "llama-3.1-8b", scenario="1k1k", concurrency="1-8",
                                   disaggregation=False, runs=root)


def test_simulate_writes_the_run_the_command_would(simulated, capsys):
    root, run = simulated
    assert isinstance(run, scoville.Run) and run.source == "simulated"
    assert run.manifest.system.hardware == "h200" and run.manifest.workload_name == "1k1k"
    # the same spec through the CLI gives the same frontier
    from scoville.cli import main

    main(["simulate", "--hardware", "h200", "--model", "llama-3.1-8b", "--scenario", "1k1k", "--concurrency", "1-8",
          "--no-disagg", "--runs", str(root), "--json"])
    cli = json.loads(capsys.readouterr().out)["points"]
    assert [p["interactivity"] for p in cli] == [p.interactivity for p in run.points]


def test_open_run_runs_compare_and_report_read_what_the_cli_reads(simulated, tmp_path):
    root, run = simulated
    again = scoville.open_run(run.path)
    assert again.id == run.id and again.points == run.points
    assert again.requests().num_rows == 0                      # an analytic prediction has no request records
    listed = scoville.runs(root).df()
    assert run.id in set(listed["run_id"])
    assert set(scoville.runs(root, "points").df()["run_id"]) >= {run.id}
    result = scoville.compare(run, [run], per="accelerator")
    header, rows = result.table()
    assert len(header) == 4 and rows                            # baseline, contender, ratio
    assert result.to_dict()["systems"][0]["peak"] == pytest.approx(max(
        p.total_throughput_per_accelerator or 0.0 for p in run.points))
    out = scoville.report(run, out=tmp_path / "r.html")
    assert out.read_text().startswith("<!DOCTYPE html>")
    assert run.report() == run.path / "report.html" and run.report().stat().st_size > 100_000


def test_bad_options_are_one_line_errors_naming_the_flag(tmp_path):
    with pytest.raises(UserError, match=r"^--fidelity: Input should be 'analytic' or 'des'$"):
        scoville.simulate("h200", "llama-3.1-8b", fidelity="exact", runs=tmp_path)
    with pytest.raises(UserError, match=r"^--concurrency-typo: Extra inputs are not permitted$"):
        scoville.simulate("h200", "llama-3.1-8b", concurrency_typo="1", runs=tmp_path)
    with pytest.raises(UserError, match="no run directory|not a run|manifest"):
        scoville.open_run(tmp_path / "nothing")
    with pytest.raises(UserError, match="unknown catalog table"):
        scoville.runs(tmp_path, "sessions")


@pytest.mark.slow
def test_serve_yields_a_live_emulator_url_and_stops_it():
    with scoville.serve("h200", "llama-3.1-8b") as url:
        assert url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(f"{url}/v1/models", timeout=10) as r:
            assert json.load(r)["data"][0]["id"]
    with pytest.raises(OSError):
        urllib.request.urlopen(f"{url}/v1/models", timeout=2)


@pytest.mark.slow
def test_serve_hands_its_framework_to_the_emulator_it_starts():
    with pytest.raises(UserError, match="framework"), scoville.serve("h200", "llama-3.1-8b", framework="nope"):
        pass


def test_every_export_is_listed_and_loads():
    assert set(scoville.__all__) == {"__version__", *scoville._EXPORTS}
    for name in scoville._EXPORTS:
        assert getattr(scoville, name) is not None


def test_the_cli_options_and_the_specs_are_the_same_names():
    """Every option of `sweep` and `simulate` is a field of its spec (flat), and every field an option: the
    command line and the API cannot drift apart."""
    import typer

    from scoville.cli import measure_cmd, simulate_cmd
    from scoville.load import LoadSpec
    from scoville.measurement import SweepSpec
    from scoville.simulation import SimulateSpec
    from scoville.workload.options import WorkloadSpec

    app = typer.Typer()
    measure_cmd.register(app)
    simulate_cmd.register(app)
    commands = typer.main.get_command(app).commands
    renamed = {"cost_per_hour_opt": "cost_per_hour", "scenario_name": "scenario", "stop_at_eos": "ignore_eos"}
    cli_only = {"json_out", "resume", "_ignore_eos"}

    def options(command: str) -> set[str]:
        return {renamed.get(p.name, p.name) for p in commands[command].params} - cli_only

    def flat(spec) -> set[str]:
        return (set(spec.model_fields) - {"workload", "load"}) | set(WorkloadSpec.model_fields) | set(
            LoadSpec.model_fields)

    assert options("sweep") == flat(SweepSpec) - {"single"}          # `run` sets single
    assert options("simulate") == flat(SimulateSpec) - {"repeats"}   # the search replays no repeats


def test_simulate_writes_its_report_when_asked(tmp_path, capsys):
    from scoville.cli import main

    main(["simulate", "--hardware", "h200", "--model", "llama-3.1-8b", "--scenario", "1k1k", "--concurrency", "1-4",
          "--no-disagg", "--runs", str(tmp_path), "--report"])
    captured = capsys.readouterr()
    run_dir = Path(captured.out.strip().splitlines()[-1])
    assert (run_dir / "report.html").stat().st_size > 100_000
    assert f"report: {run_dir / 'report.html'}" in captured.err.replace("\n", "")
