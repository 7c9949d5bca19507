"""`scoville sql` / `ls` / `recompute`: data printed as given (never read as Rich markup); the catalog is read-only;
recompute never destroys what it cannot rebuild."""

import hashlib
import json
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from scoville.cli import runs_cmd
from scoville.errors import UserError
from scoville.results.manifest import Manifest, decode_manifest

sys.path.insert(0, str(Path(__file__).resolve().parent / "analysis"))
from runs_factory import make_run  # noqa: E402


def test_sql_cells_and_headers_with_brackets_print_as_given(tmp_path):
    app = typer.Typer()
    runs_cmd.register(app)
    r = CliRunner().invoke(app, ["sql", "SELECT 'a[b]c' AS \"col[i]\"", "--runs", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert "a[b]c" in r.output and "col[i]" in r.output


# ---- the catalog is read-only for the user's SQL ----------------------------------------------


@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    root = tmp_path_factory.mktemp("catalog")
    run = make_run(root / "runs", "20260101T000000Z-aaaaaa", [(50.0, 1000.0), (100.0, 500.0)], requests_per_point=2,
                   measured_power=True, accelerators=1)
    return root, run


def _sql(root: Path, statement: str):
    app = typer.Typer()
    runs_cmd.register(app)
    return CliRunner().invoke(app, ["sql", statement, "--runs", str(root / "runs"), "--json"])


def _digests(run: Path) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(run.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("statement, words", [
    ("COPY (SELECT 1 AS a) TO '{root}/out.csv'", "COPY is refused"),
    ("COPY (SELECT 42 AS a) TO '{run}/points.parquet' (USE_TMP_FILE false)", "COPY is refused"),
    ("EXPLAIN ANALYZE COPY (SELECT 42 AS a) TO '{run}/points.parquet' (USE_TMP_FILE false)", "EXPLAIN is refused"),
    ("SELECT 1; COPY (SELECT 1 AS a) TO '{root}/out.csv'", "COPY is refused"),
    ("ATTACH '{root}/new.duckdb' AS db", "ATTACH is refused"),
    ("EXPORT DATABASE '{root}/export'", "EXPORT is refused"),
    ("CREATE TABLE t AS SELECT 1", "CREATE is refused"),
    ("SET enable_external_access = true", "SET is refused"),
    ("INSTALL httpfs", "LOAD is refused"),
    ("SELECT * FROM read_csv('/etc/passwd')", "Permission Error"),
    ("SELECT * FROM read_text('{run}/manifest.json')", "Permission Error"),
    ("SELECT * FROM read_json('{run}/requests.jsonl')", "Permission Error"),
    ("SELECT * FROM glob('{root}/*')", "Permission Error"),
    ("SELECT * FROM query('COPY (SELECT 1 AS a) TO ''{root}/out.csv''')", "SQL error"),
])
def test_sql_cannot_write_attach_or_read_other_files(catalog, statement, words):
    root, run = catalog
    before = _digests(run)
    res = _sql(root, statement.format(root=root, run=run))
    assert isinstance(res.exception, UserError), res.output
    assert words in str(res.exception) and "\n" not in str(res.exception)
    assert _digests(run) == before
    assert sorted(p.name for p in root.iterdir()) == ["runs"]  # nothing written, attached or exported


@pytest.mark.parametrize("statement, check", [
    ("SELECT count(*) AS n FROM requests", lambda rows: rows == [{"n": 4}]),
    ("SELECT run_id, count(*) AS n FROM points GROUP BY run_id", lambda rows: rows[0]["n"] == 2),
    ("FROM power SELECT count(*) > 0 AS some", lambda rows: rows == [{"some": True}]),
    ("DESCRIBE requests", lambda rows: "t_sent" in [r["column_name"] for r in rows]),
    ("SELECT * FROM read_parquet('{run}/points.parquet')", lambda rows: len(rows) == 2),
    ("WITH r AS (SELECT * FROM runs) SELECT hardware FROM r", lambda rows: rows == [{"hardware": "H200"}]),
])
def test_sql_queries_still_read_every_view(catalog, statement, check):
    root, run = catalog
    res = _sql(root, statement.format(run=run))
    assert res.exception is None, res.output
    assert check(json.loads(res.stdout))


def test_a_run_left_running_by_a_dead_writer_is_shown_as_stopped(tmp_path):
    """A manifest still saying "running" with no process holding the run's lock: the writer died."""
    from scoville.results.catalog import run_status
    from scoville.results.store import RunLock

    run = tmp_path / "r1"
    run.mkdir()
    manifest = Manifest(status="running")
    assert run_status(run, manifest) == "stopped (writer gone)"
    lock = RunLock(run)
    try:
        assert run_status(run, manifest) == "running"
    finally:
        lock.release()
    assert run_status(run, Manifest(status="complete")) == "complete"


def test_recompute_refuses_an_analytic_prediction_and_keeps_its_points(tmp_path, capsys):
    # an analytic run has no request records: rebuilding "from records" used to write nothing and delete its points
    from scoville.cli import main

    runs = tmp_path / "runs"
    main(["simulate", "--hardware", "h200", "--model", "llama-3.1-8b", "--scenario", "1k1k", "--concurrency", "1-8",
          "--no-disagg", "--runs", str(runs), "--json"])
    run_dir = Path(json.loads(capsys.readouterr().out)["run_dir"])
    before = (run_dir / "points.parquet").read_bytes()
    with pytest.raises(SystemExit) as e:
        main(["recompute", run_dir.name, "--runs", str(runs)])
    assert e.value.code == 2 and "analytic prediction" in capsys.readouterr().err
    assert (run_dir / "points.parquet").read_bytes() == before


def test_a_searched_run_is_listed_with_the_range_of_its_deployment_sizes():
    from scoville.results.catalog import system_label

    searched = decode_manifest({"system": {"hardware": "gb300", "accelerators": 66}, "load_plan": {"points": [
        {"index": 0, "accelerators": 4}, {"index": 1, "accelerators": 66}, {"index": 2, "accelerators": 16}]}})
    measured = decode_manifest({"system": {"hardware": "h200", "accelerators": 8},
                                "load_plan": {"points": [{"index": 0, "concurrency": 1}]}})
    assert system_label(searched) == "gb300 x4-66"
    assert system_label(measured) == "h200 x8"


def test_show_chart_draws_the_runs_frontier_in_the_terminal(tmp_path, capsys):
    from scoville.analysis.frontier import frontier
    from scoville.cli import main
    from scoville.reporting.terminal import FRONTIER
    from scoville.results.catalog import read_point_rows

    runs = tmp_path / "runs"
    main(["simulate", "--hardware", "h200", "--model", "llama-3.1-8b", "--scenario", "1k1k", "--concurrency", "1-8",
          "--no-disagg", "--runs", str(runs), "--json"])
    run_dir = Path(json.loads(capsys.readouterr().out)["run_dir"])
    main(["show", run_dir.name, "--runs", str(runs), "--chart"])
    out = capsys.readouterr().out
    assert "total tok/s per accelerator vs tok/s/user" in out and "total tok/s per kW vs tok/s/user" in out
    rows = [r for r in read_point_rows(run_dir) if r.get("interactivity")]
    # one filled marker per frontier point (markers may share a cell), the legend's one besides
    on_front = len(frontier(rows, "interactivity", "total_throughput_per_accelerator").points)
    per_acc = out.split("total tok/s per accelerator vs tok/s/user", 1)[1].split("per kW", 1)[0]
    assert 1 <= per_acc.count(FRONTIER) - 1 <= on_front


def test_ls_fits_80_columns_and_never_breaks_a_word(tmp_path, monkeypatch):
    import io

    from rich.console import Console

    runs = tmp_path / "runs"
    make_run(runs, "20260101T000000Z-aaaaaa", [(50.0, 1000.0), (100.0, 500.0)], requests_per_point=2,
             hardware="gb300", accelerators=4, source="simulated")
    out = io.StringIO()
    monkeypatch.setattr(runs_cmd, "console", Console(file=out, width=80, color_system=None))
    app = typer.Typer()
    runs_cmd.register(app)
    r = CliRunner().invoke(app, ["ls", "--runs", str(runs)])
    assert r.exit_code == 0, r.output
    lines = out.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 80
    words = out.getvalue().split()
    for whole in ("20260101T000000Z-aaaaaa", "simulated", "complete", "source", "workload", "points"):
        assert whole in words
