"""`scoville compare` and `scoville report` through the real Typer app."""

import json
import os

import pytest
import typer
from typer.testing import CliRunner

from scoville.cli import compare_cmd
from scoville.errors import UserError

pytestmark = pytest.mark.slow   # writes whole reports, seconds each (the fast lane skips them)


@pytest.fixture(scope="module")
def app():
    a = typer.Typer()
    compare_cmd.register(a)
    return a


def run(app, *args):
    return CliRunner().invoke(app, list(args), catch_exceptions=True)


def test_compare_json_auto_reproduces_104x(app, report_runs):
    root, _ = report_runs
    res = run(app, "compare", "base00", "cont00", "--runs", str(root), "--json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    cont = data["systems"][1]
    assert cont["at_interactivity"][0]["ratio"] == pytest.approx(12_258 / 118)
    assert cont["ratios"]["peak"] == pytest.approx(85_400 / 45_000)
    assert data["systems"][0]["power_source"] == "rated" and data["systems"][0]["power_boundary"] == "chip"


def test_compare_markdown_with_requested_interactivities(app, report_runs):
    root, _ = report_runs
    res = run(app, "compare", "base00", "cont00", "--runs", str(root), "--markdown", "--at-interactivity",
              "100,300", "--per", "accelerator", "--metric", "output")
    assert res.exit_code == 0, res.output
    assert "| output tok/s/accelerator at 300 tok/s/user | beyond reach |" in res.output
    assert res.output.startswith("|  | H200 ×8 | GB300 NVL72 (sim) |")


def test_compare_table_shows_power_basis_and_beyond_reach(app, report_runs):
    root, _ = report_runs
    res = CliRunner().invoke(app, ["compare", "base00", "cont00", "meas00", "--runs", str(root),
                                   "--at-interactivity", "auto,190"], env={"COLUMNS": "220"})
    assert res.exit_code == 0, res.output
    assert "103.9×" in res.output and "[nvml, board boundary]" in res.output and "beyond reach" in res.output


def test_pooled_runs_with_plus(app, report_runs):
    root, _ = report_runs
    res = run(app, "compare", "base00+meas00", "--runs", str(root), "--json", "--per", "accelerator")
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["systems"][0]["runs"] == ["20261202T100000Z-base00", "20261202T100002Z-meas00"]


@pytest.mark.parametrize("args, message", [
    (["compare", "nosuchrun"], "no run 'nosuchrun'"),
    (["compare", "base00", "--per", "watt"], "--per 'watt'"),
    (["compare", "base00", "--at-interactivity", "fast"], "'fast' is not a number"),
    (["compare", "base00", "--json", "--markdown"], "not both"),
    (["compare", "base00", "+"], "'+' names no run"),
])
def test_user_errors_are_one_line_messages(app, report_runs, args, message):
    root, _ = report_runs
    res = run(app, *args, "--runs", str(root))
    assert isinstance(res.exception, UserError), res.output
    assert message in str(res.exception) and "\n" not in str(res.exception)


def test_report_writes_html_and_images(app, report_runs, tmp_path):
    root, _ = report_runs
    out = tmp_path / "r" / "report.html"
    res = run(app, "report", "base00", "cont00", "--runs", str(root), "-o", str(out), "--png", str(tmp_path / "png"),
              "--svg", str(tmp_path / "svg"), "--title", "H200 vs GB300")
    assert res.exit_code == 0, res.output
    text = out.read_text()
    assert "<title>H200 vs GB300</title>" in text
    assert "power: rated, chip boundary" in text  # shared power basis shown on each per-kW chart
    pngs = sorted(p.name for p in (tmp_path / "png").iterdir())
    assert "frontier-kw-interactivity.png" in pngs and "cdf-ttft-20261202T100000Z-base00.png" in pngs
    assert (tmp_path / "png" / "frontier-kw-interactivity.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = (tmp_path / "svg" / "frontier-kw-interactivity.svg").read_text()
    assert "<svg" in svg and len(pngs) == len(list((tmp_path / "svg").iterdir()))


def test_report_to_a_folder_is_refused(app, report_runs, tmp_path):
    root, _ = report_runs
    res = run(app, "report", "base00", "--runs", str(root), "-o", str(tmp_path))
    assert isinstance(res.exception, UserError) and "is a folder" in str(res.exception)


def test_report_path_with_brackets_is_printed_as_given(app, report_runs, tmp_path):
    root, _ = report_runs
    out = tmp_path / "out[x]" / "r.html"  # Rich would read "[x]" as markup and drop it
    res = run(app, "report", "base00", "--runs", str(root), "-o", str(out))
    assert res.exit_code == 0, res.output
    assert out.exists() and "out[x]" in res.output.replace("\n", "")


def test_images_under_a_file_are_refused(app, report_runs, tmp_path):
    root, _ = report_runs
    blocker = tmp_path / "file"
    blocker.write_text("")
    res = run(app, "report", "base00", "--runs", str(root), "-o", str(tmp_path / "r.html"),
              "--png", str(blocker / "png"))
    assert isinstance(res.exception, UserError) and "cannot create" in str(res.exception)


# ---- -o never harms what is at the destination ------------------------------------------------

def _report_to(app, report_runs, out, *extra):
    root, _ = report_runs
    return run(app, "report", "base00", "--runs", str(root), "-o", str(out), *extra)


def _refused(res, words):
    assert isinstance(res.exception, UserError), res.output
    assert words in str(res.exception) and "\n" not in str(res.exception)


def test_report_refuses_special_files(app, report_runs, tmp_path):
    import socket
    import stat

    fifo = tmp_path / "fifo.html"
    os.mkfifo(fifo)
    _refused(_report_to(app, report_runs, fifo), "device or special file")
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    sock_path = tmp_path / "sock.html"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(sock_path))
        _refused(_report_to(app, report_runs, sock_path), "device or special file")
        assert stat.S_ISSOCK(sock_path.lstat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo.html", "sock.html"]  # no temporary file left


def test_report_refuses_symlinks_and_never_writes_through_one(app, report_runs, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    link = tmp_path / "link.html"
    link.symlink_to(victim)
    _refused(_report_to(app, report_runs, link), "symbolic link")
    dangling = tmp_path / "dangling.html"
    dangling.symlink_to(tmp_path / "nowhere")
    _refused(_report_to(app, report_runs, dangling), "symbolic link")
    # a link planted where a predictable temporary file would go is not followed either
    (tmp_path / "out.html.tmp").symlink_to(victim)
    (tmp_path / ".out.html.tmp").symlink_to(victim)
    res = _report_to(app, report_runs, tmp_path / "out.html")
    assert res.exit_code == 0, res.output
    assert victim.read_text() == "precious" and link.is_symlink() and dangling.is_symlink()
    assert (tmp_path / "out.html").read_text().startswith("<!DOCTYPE html>")
    png = tmp_path / "png"
    png.mkdir()
    (png / "frontier-kw-interactivity.png").symlink_to(victim)
    _refused(_report_to(app, report_runs, tmp_path / "again.html", "--png", str(png)), "symbolic link")
    assert victim.read_text() == "precious"


@pytest.mark.parametrize("name", ["manifest.json", "requests.jsonl", "points.parquet", "requests/point-0000.parquet",
                                  "notes.txt"])
def test_report_refuses_to_overwrite_run_data(app, report_runs, name):
    _, runs = report_runs
    target = runs[0] / name
    before = target.read_bytes() if target.exists() else None
    _refused(_report_to(app, report_runs, target), "holds its data")
    assert (target.read_bytes() if target.exists() else None) == before


def test_report_may_go_into_a_run_folder_as_html(app, report_runs, tmp_path):
    import shutil

    _, runs = report_runs
    run_dir = shutil.copytree(runs[0], tmp_path / "runs" / runs[0].name)
    out = run_dir / "report.html"  # what `scoville sweep` writes
    res = run(app, "report", str(run_dir), "-o", str(out))
    assert res.exit_code == 0, res.output
    assert out.read_text().startswith("<!DOCTYPE html>")
    assert not [p for p in run_dir.iterdir() if p.name.endswith(".tmp")]
