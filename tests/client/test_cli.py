"""`scoville sweep` / `scoville run` as a user runs them: real subprocesses, kill -9, Ctrl-C, --resume."""

from __future__ import annotations

import json
import os
import signal
from functools import partial
from pathlib import Path

import pytest
from client_support import Behaviour, run_cli, start_cli, wait_until

from scoville.results.store import (
    finished_points,
    read_journal,
    read_manifest,
    read_requests,
)

pytestmark = pytest.mark.slow   # whole-CLI subprocess runs (the fast lane skips them)


scoville = partial(run_cli, timeout=60)
start = start_cli
wait_for = partial(wait_until, timeout=30.0)


def only_run(runs: Path) -> Path:
    dirs = [d for d in runs.iterdir() if (d / "manifest.json").exists()] if runs.exists() else []
    return dirs[0] if len(dirs) == 1 else None


def test_run_json_output_and_summary(server, tmp_path):
    server.set(Behaviour(interval_s=0.001))
    p = scoville("run", "--url", server.base_url, "--isl", "16", "--osl", "4", "--concurrency", "2",
                 "--num-requests", "4", "--hardware", "h200", "--runs", str(tmp_path), "--json",
                 "--api-key", "sk-live-123456")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert server.headers[-1]["Authorization"] == "Bearer sk-live-123456"
    for f in Path(out["run_dir"]).rglob("*"):
        assert not f.is_file() or b"sk-live-123456" not in f.read_bytes(), f
    assert "--api-key" in read_manifest(Path(out["run_dir"])).command
    assert out["status"] == "complete" and out["power"]["source"] == "rated"
    assert [r["label"] for r in out["points"]] == ["c=2"] and out["points"][0]["num_ok"] == 4
    p = scoville("run", "--url", server.base_url, "--isl", "16", "--osl", "4", "--rate", "50",
                 "--num-requests", "3", "--runs", str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert "rate=50/s" in p.stdout and "no power basis: pass --hardware or --rated-watts" in p.stdout


@pytest.mark.parametrize("args, message", [
    (["run", "--concurrency", "1,2"], "measures one point"),
    (["sweep", "--concurrency", "x"], "cannot read 'x'"),
    (["sweep", "--concurrency", "1", "--rate", "2"], "not both"),
    (["sweep", "--scenario", "9k9k"], "unknown scenario '9k9k'"),
    (["sweep", "--power", "all-in"], "needs a --hardware"),
    (["sweep", "--api", "grpc"], "--api: Input should be 'completions' or 'chat'"),
])
def test_bad_options_end_in_one_line(server, tmp_path, args, message):
    p = scoville(*args, "--url", server.base_url, "--runs", str(tmp_path))
    assert p.returncode == 2 and message in p.stderr, p.stderr
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert not tmp_path.exists() or list(tmp_path.iterdir()) == []


def test_read_timeout_bounds_a_silent_stream_and_is_recorded(server, tmp_path):
    server.set(Behaviour(interval_s=0.001, stall_after=2))
    p = scoville("run", "--url", server.base_url, "--isl", "16", "--osl", "6", "--num-requests", "1",
                 "--warmup-requests", "0", "--read-timeout", "0.5", "--runs", str(tmp_path), "--json")
    assert p.returncode == 1 and "1 point(s) measured nothing (c=1)" in " ".join(p.stderr.split()), p.stderr
    run = Path(json.loads(p.stdout)["run_dir"])
    [rec] = read_requests(run).to_pylist()
    assert not rec["ok"] and "no data for 0.5s" in rec["error"] and "--read-timeout" in rec["error"]
    assert rec["t_done"] - rec["t_sent"] < 5
    assert read_manifest(run).target.read_timeout_s == 0.5


@pytest.mark.parametrize("args, message", [
    (["--url", "localhost:8000"], "--url 'localhost:8000' needs a scheme: http://HOST:PORT"),
    (["--url", "http://127.0.0.1:9/v1/completions"],
     "--url is the server, not an endpoint: drop '/v1/completions' (--url http://127.0.0.1:9)"),
    (["--url", "http://127.0.0.1:9/v1/chat/completions/"],
     "drop '/v1/chat/completions' (--url http://127.0.0.1:9 --api chat)"),
    (["--url", "http://127.0.0.1:9", "--timeout", "-1"], "--timeout: Input should be greater than 0"),
    (["--url", "http://127.0.0.1:9", "--read-timeout", "0"], "--read-timeout: Input should be greater than 0"),
])
def test_bad_target_options_end_in_one_line_before_any_request(tmp_path, args, message):
    p = scoville("run", *args, "--isl", "16", "--osl", "4", "--num-requests", "1", "--runs", str(tmp_path))
    assert p.returncode == 2 and message in p.stderr, p.stderr
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert not tmp_path.exists() or list(tmp_path.iterdir()) == []


def test_resume_refuses_flags_it_would_ignore(tmp_path):
    # A resumed run replays its manifest: a new --concurrency or --executor used to be dropped silently.
    p = scoville("sweep", "--resume", "anything", "--concurrency", "8", "--executor", "ray", "--runs", str(tmp_path))
    assert p.returncode == 2 and "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert "drop --concurrency, --executor" in p.stderr
    assert "only --url, --api-key, --runs, --json and --no-report" in p.stderr


def test_unreachable_url_fails_fast(tmp_path):
    p = scoville("sweep", "--url", "http://127.0.0.1:9", "--runs", str(tmp_path), timeout=30)
    assert p.returncode == 2 and "cannot reach http://127.0.0.1:9: is the server running?" in p.stderr
    assert "Traceback" not in p.stderr


def test_kill_9_loses_nothing_finished_and_resume_completes(server, tmp_path):
    server.set(Behaviour(interval_s=0.01))  # 8 tokens: ~80 ms per request
    runs = tmp_path / "runs"
    proc = start("sweep", "--url", server.base_url, "--isl", "16", "--osl", "8", "--range-ratio", "1",
                 "--concurrency", "1,2,3", "--num-requests", "6", "--warmup-requests", "1", "--runs", str(runs))
    try:
        wait_for(lambda: (run := only_run(runs)) is not None and 0 in finished_points(run)
                 and any(r.point == 1 for r in read_journal(run)))
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    run = only_run(runs)
    journal_before = read_journal(run)
    point0 = [r for r in read_requests(run).to_pylist() if r["point"] == 0]
    assert read_manifest(run).status == "running" and len(point0) == 7
    assert 2 not in finished_points(run)

    p = scoville("sweep", "--resume", run.name, "--runs", str(runs), "--json")
    assert p.returncode == 0, p.stderr
    m = json.loads((run / "manifest.json").read_text())  # the file as written
    assert m["status"] == "complete" and len(m["resumed_at"]) == 1
    assert finished_points(run) == {0, 1, 2}
    assert [r for r in read_requests(run).to_pylist() if r["point"] == 0] == point0
    assert read_journal(run)[: len(journal_before)] == journal_before  # the journal only grew
    rows = json.loads(p.stdout)["points"]
    assert [r["num_requests"] for r in rows] == [6, 6, 6] and all(r["num_ok"] == 6 for r in rows)
    # Times stay monotonic across the resume: the redone points start after everything before the kill.
    t_kill = max(r.t_done for r in journal_before)
    assert min(r["t_sent"] for r in read_requests(run).to_pylist() if r["point"] == 2) > t_kill


@pytest.mark.parametrize("workers", ["1", "2"])
def test_ctrl_c_marks_interrupted_keeps_records_and_says_how_to_resume(server, tmp_path, workers):
    # 50 ms a token: the 204 requests would take ~40 s, so Ctrl-C lands mid-point even on a loaded box (at 10 ms
    # the whole point once finished before the signal did, in a CI run beside another job)
    server.set(Behaviour(interval_s=0.05))
    runs = tmp_path / "runs"
    proc = start("sweep", "--url", server.base_url, "--isl", "16", "--osl", "8", "--concurrency", "2",
                 "--num-requests", "200", "--workers", workers, "--runs", str(runs))
    wait_for(lambda: (run := only_run(runs)) is not None and len(read_journal(run)) >= 4)
    seen = len(read_journal(only_run(runs)))
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    run = only_run(runs)
    assert proc.returncode == 130, err
    assert f"resume with: scoville sweep --resume {run}" in " ".join(err.split())
    assert "Traceback" not in err
    m = json.loads((run / "manifest.json").read_text())  # the file as written
    assert m["status"] == "interrupted" and "files" in m
    kept = read_journal(run)
    assert seen <= len(kept) < 200 and all(r.ok for r in kept)
    assert os.path.exists(run / "requests.jsonl") and 0 not in finished_points(run)


def test_a_sweep_without_a_terminal_prints_a_line_as_each_point_starts_and_ends(server, tmp_path):
    # piped or in CI there is no live status line; a long sweep must still show it is moving
    p = scoville("sweep", "--url", server.base_url, "--isl", "16", "--osl", "4", "--concurrency", "1,2",
                 "--num-requests", "2", "--warmup-requests", "0", "--runs", str(tmp_path), columns=80)
    assert p.returncode == 0, p.stderr
    # the summary fits an 80-column terminal; only the run's and the report's paths are never wrapped
    table = [line for line in p.stdout.splitlines() if not line.startswith(("run: ", "report: "))]
    assert table and max(len(line) for line in table) <= 80
    lines = p.stderr.splitlines()
    assert [line for line in lines if line.startswith("point ")] == ["point c=1 (1/2): 2 requests",
                                                                     "point c=2 (2/2): 2 requests"]
    p = scoville("run", "--url", server.base_url, "--isl", "16", "--osl", "4", "--concurrency", "2",
                 "--num-requests", "3", "--runs", str(tmp_path))
    assert "point c=2 (1/1): 3 requests after 4 warm-up" in p.stderr.splitlines()
    assert sum(line.lstrip().startswith("✓") for line in lines) == 2
    out = p.stdout.splitlines()
    run_line = [line for line in out if line.startswith("run: ")]
    report_line = [line for line in out if line.startswith("report: ")]
    # each path on its own line, whole (never wrapped), and the seed beside the run
    assert len(run_line) == 1 and "(seed " in run_line[0] and str(tmp_path) in run_line[0]
    assert len(report_line) == 1 and report_line[0].endswith("report.html")


def test_no_report_leaves_the_run_without_a_report_and_says_none(server, tmp_path):
    p = scoville("run", "--url", server.base_url, "--isl", "16", "--osl", "4", "--num-requests", "1",
                 "--warmup-requests", "0", "--runs", str(tmp_path), "--no-report")
    assert p.returncode == 0, p.stderr
    assert not (only_run(tmp_path) / "report.html").exists() and "report: " not in p.stdout


def test_eos_is_ignored_by_default_and_honoured_with_no_ignore_eos(server, tmp_path):
    for flags, ignored in (([], True), (["--ignore-eos"], True), (["--no-ignore-eos"], False)):
        p = scoville("run", "--url", server.base_url, "--isl", "16", "--osl", "4", "--num-requests", "1",
                     "--warmup-requests", "0", "--runs", str(tmp_path), *flags)
        assert p.returncode == 0, p.stderr
        assert server.bodies[-1].get("ignore_eos", False) is ignored, (flags, server.bodies[-1])
