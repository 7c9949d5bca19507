"""`scoville sweep` as a process: signals, two writers, a full disk, few file descriptors, secrets, seeds,
timed trace replay, options refused before a run exists. Real subprocesses against loopback servers."""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import subprocess
import sys
import time
from functools import partial
from importlib.resources import files
from pathlib import Path

import pytest
from client_support import Behaviour, run_cli, start_cli, wait_until

from scoville.results.store import (
    read_journal,
    read_manifest,
    read_requests,
    writer_alive,
)

pytestmark = pytest.mark.slow   # whole-CLI subprocess runs (the fast lane skips them)

TRACES = Path(str(files("scoville") / "data" / "traces"))
scoville = partial(run_cli, timeout=120)
start = start_cli
wait_for = partial(wait_until, timeout=60.0)


def only_run(runs: Path) -> Path | None:
    dirs = [d for d in runs.iterdir() if (d / "manifest.json").exists()] if runs.exists() else []
    return dirs[0] if len(dirs) == 1 else None


def journaled(runs: Path, n: int) -> bool:
    run = only_run(runs)
    return run is not None and len(read_journal(run)) >= n


PROGRESS = re.compile(r"^(point \S+ \(\d+/\d+\): \d+ requests( after \d+ warm-up)?|\s*✓ .*)$")   # per-point lines


def one_line(stderr: str) -> str:
    """The one error line of ``stderr`` (the per-point progress lines a piped sweep prints are not errors)."""
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip() and not PROGRESS.match(ln)]
    assert "Traceback" not in stderr and len(lines) == 1, stderr
    return " ".join(lines[0].split())


def long_sweep(server, runs: Path, *extra: str) -> subprocess.Popen:
    server.set(Behaviour(interval_s=0.01))
    return start("sweep", "--url", server.base_url, "--isl", "16", "--osl", "8", "--concurrency", "2",
                 "--num-requests", "400", "--runs", str(runs), *extra)


# --- signals -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("gap", [0.0, 0.01, 0.1, 0.4])
def test_a_second_ctrl_c_still_ends_interrupted_with_the_resume_hint(server, tmp_path, gap):
    """Ctrl-C twice used to exit 0 with the run left "running" when the second landed while it was closed."""
    runs = tmp_path / "runs"
    proc = long_sweep(server, runs)
    wait_for(lambda: journaled(runs, 4))
    proc.send_signal(signal.SIGINT)
    time.sleep(gap)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    run = only_run(runs)
    # 130, or killed by the SIGINT itself when it comes after the run was closed (a shell shows 130 for both)
    assert proc.returncode in (130, -signal.SIGINT), err
    assert read_manifest(run).status == "interrupted" and not writer_alive(run)
    assert f"resume with: scoville sweep --resume {run}" in " ".join(err.split()) and "Traceback" not in err


def test_sigterm_ends_interrupted_with_the_resume_hint(server, tmp_path):
    runs = tmp_path / "runs"
    proc = long_sweep(server, runs, "--workers", "2")
    wait_for(lambda: journaled(runs, 4))
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    run = only_run(runs)
    assert proc.returncode == 130, err
    assert read_manifest(run).status == "interrupted"
    assert f"resume with: scoville sweep --resume {run}" in " ".join(err.split())
    kept = read_journal(run)
    assert kept and all(r.ok for r in kept)


# --- one writer per run ----------------------------------------------------------------------------------


def test_a_resume_of_a_run_still_being_measured_is_refused_in_one_line(server, tmp_path):
    runs = tmp_path / "runs"
    proc = long_sweep(server, runs)
    try:
        wait_for(lambda: journaled(runs, 2))
        run = only_run(runs)
        assert writer_alive(run)
        sent = len(server.bodies)
        p = scoville("sweep", "--resume", run.name, "--runs", str(runs))
        assert p.returncode == 2 and "being written by another scoville process" in one_line(p.stderr)
        assert f"pid {proc.pid}" in p.stderr
        assert read_manifest(run).resumed_at is None
        assert all(b.get("max_tokens") != 2 for b in server.bodies[sent:])  # no 2-token probe from the refused resume
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    assert read_manifest(run).status == "interrupted"


def test_a_run_whose_writer_was_killed_shows_it(server, tmp_path):
    runs = tmp_path / "runs"
    proc = long_sweep(server, runs)
    wait_for(lambda: journaled(runs, 2))
    proc.kill()
    proc.wait(10)
    run = only_run(runs)
    assert read_manifest(run).status == "running" and not writer_alive(run)


# --- the machine's limits -----------------------------------------------------------------------------------


def file_size_limit(limit: int):
    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG, as a full disk gives ENOSPC
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def test_a_full_disk_stops_the_sweep_in_one_line_and_keeps_every_record(server, tmp_path):
    runs = tmp_path / "runs"
    server.set(Behaviour())
    p = scoville("sweep", "--url", server.base_url, "--isl", "16", "--osl", "4", "--concurrency", "2",
                 "--num-requests", "2000", "--runs", str(runs), "--scrape-interval", "0",  # no /metrics here
                 preexec=file_size_limit(200_000))
    message = one_line(p.stderr)
    run = only_run(runs)
    assert p.returncode == 2 and "requests.jsonl: File too large" in message
    assert f"resume with: scoville sweep --resume {run}" in message
    kept = read_journal(run)
    assert 100 < len(kept) < 2000 and read_manifest(run).status == "interrupted"
    assert read_requests(run).num_rows == len(kept)


def open_files(limit: int):
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))


def test_too_few_file_descriptors_for_the_concurrency_is_one_line_before_any_run(server, tmp_path):
    p = scoville("sweep", "--url", server.base_url, "--isl", "16", "--osl", "4", "--concurrency", "300",
                 "--workers", "1", "--runs", str(tmp_path / "runs"), preexec=open_files(128))
    assert p.returncode == 2 and "300 concurrent streams need about 364 open files" in one_line(p.stderr)
    assert not (tmp_path / "runs").exists()


def test_running_out_of_sockets_mid_point_stops_in_one_line_with_records_kept(server, tmp_path):
    """An uncapped --rate point can outgrow `ulimit -n` while it runs: EMFILE used to end in a traceback."""
    server.set(Behaviour(ttft_s=3.0))
    runs = tmp_path / "runs"
    p = scoville("run", "--url", server.base_url, "--isl", "16", "--osl", "2", "--rate", "1000",
                 "--num-requests", "400", "--runs", str(runs), "--scrape-interval", "0",  # no /metrics here
                 preexec=open_files(128))
    message = one_line(p.stderr)
    assert p.returncode == 2 and "cannot open a socket: Too many open files" in message
    run = only_run(runs)
    assert read_manifest(run).status == "interrupted" and "resume with" in message


# --- secrets --------------------------------------------------------------------------------------------------


def test_url_credentials_reach_no_file_of_the_run(server, tmp_path):
    server.set(Behaviour())
    url = server.base_url.replace("http://", "http://alice:hunter2secret@")
    p = scoville("run", "--url", url, "--isl", "16", "--osl", "4", "--num-requests", "2", "--runs", str(tmp_path),
                 "--json")
    assert p.returncode == 0, p.stderr
    run = Path(json.loads(p.stdout)["run_dir"])
    assert server.headers[-1]["Authorization"].startswith("Basic ")
    for f in run.rglob("*"):
        assert not f.is_file() or b"hunter2secret" not in f.read_bytes(), f
    m = json.loads((run / "manifest.json").read_text())  # the file as written
    assert m["target"]["base_url"] == server.base_url and server.base_url in " ".join(m["command"])


# --- fresh prompts per run -------------------------------------------------------------------------------------


def test_each_run_sends_new_prompts_unless_the_seed_is_given(server, tmp_path):
    server.set(Behaviour())
    prompts, seeds = [], []
    for extra in ([], [], ["--seed", "7"], ["--seed", "7"]):
        before = len(server.bodies)
        p = scoville("run", "--url", server.base_url, "--isl", "16", "--osl", "2", "--num-requests", "1",
                     "--warmup-requests", "0", "--runs", str(tmp_path), "--json", *extra)
        assert p.returncode == 0, p.stderr
        prompts.append(server.bodies[before + 1]["prompt"])  # after the probe
        seeds.append(read_manifest(Path(json.loads(p.stdout)["run_dir"])).load_plan.seed)
    assert prompts[0] != prompts[1] and prompts[2] == prompts[3]
    assert seeds[2] == seeds[3] == 7 and seeds[0] != seeds[1]


# --- timed trace replay ------------------------------------------------------------------------------------------


def test_a_timed_trace_replays_every_request_at_its_scaled_times(server, tmp_path):
    """`run --trace` used to become a closed-loop c=1 run of 10 requests with --time-scale ignored."""
    server.set(Behaviour())
    p = scoville("run", "--url", server.base_url, "--trace", str(TRACES / "mooncake_sample.jsonl"),
                 "--time-scale", "0.05", "--runs", str(tmp_path), "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    run = Path(out["run_dir"])
    (point,) = read_manifest(run).load_plan.points
    assert point.rate is not None and point.num_requests == 40 and point.sessions == 40
    sent = sorted(r["t_sent"] for r in read_requests(run).to_pylist())
    assert len(sent) == 40 and out["points"][0]["num_ok"] == 40
    from scoville.workload.traces import load_trace

    t_start = read_manifest(run).point_results["0"].t_start
    due = load_trace(TRACES / "mooncake_sample.jsonl", time_scale=0.05).arrivals(40)
    assert all(t >= t_start + d for t, d in zip(sent, sorted(due), strict=True))  # no request before its scaled arrival
    assert sent[-1] - t_start < 20 * due[-1]  # and not at the unscaled times (20x later)


# --- refused before a run exists -----------------------------------------------------------------------------------


def test_ray_missing_is_one_line_and_no_run(server, tmp_path):
    no_ray = [sys.executable, "-c", "import sys; sys.modules['ray'] = None; from scoville.cli import main; main()"]
    p = scoville("sweep", "--url", server.base_url, "--executor", "ray", "--runs", str(tmp_path / "runs"),
                 cli=no_ray)
    assert p.returncode == 2 and "--executor ray needs Ray" in one_line(p.stderr)
    assert not (tmp_path / "runs").exists()


def test_an_unknown_executor_is_one_line_before_the_emulator_or_a_run(tmp_path):
    p = scoville("sweep", "--executor", "raay", "--runs", str(tmp_path / "runs"))
    assert p.returncode == 2 and "--executor: Input should be 'local' or 'ray'" in one_line(p.stderr)
    assert not (tmp_path / "runs").exists() and "emulator" not in p.stderr


# --- the built-in emulator dies with the sweep -----------------------------------------------------------------------


def children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_kill_9_of_a_sweep_takes_its_emulator_with_it(tmp_path):
    runs = tmp_path / "runs"
    proc = start("sweep", "--isl", "16", "--osl", "4", "--concurrency", "1", "--num-requests", "2000",
                 "--runs", str(runs))
    emulator = None
    try:
        wait_for(lambda: journaled(runs, 1), timeout=120)
        (emulator,) = [c for c in children(proc.pid) if b"scoville.emulator" in Path(f"/proc/{c}/cmdline").read_bytes()]
        proc.kill()
        proc.wait(10)
        wait_for(lambda: not alive(emulator), timeout=30)
    finally:
        proc.kill()
        if emulator is not None and alive(emulator):
            os.kill(emulator, signal.SIGKILL)
