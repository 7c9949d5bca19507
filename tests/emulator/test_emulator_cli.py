"""`scoville serve` and `python -m scoville.emulator`: start (also under -OO), answer, stop cleanly on Ctrl-C, log
quietly."""

from __future__ import annotations

import json
import signal
import socket
import struct
import subprocess
import sys
import time
import urllib.request

import pytest

pytestmark = pytest.mark.slow   # whole-CLI subprocess runs (the fast lane skips them)

_APP = ("import sys, typer; from scoville.cli.serve_cmd import register; app = typer.Typer(); "
        "register(app); app.command('noop')(lambda: None); app(sys.argv[1:])")


def test_serve_command_serves_until_interrupted():
    proc = subprocess.Popen([sys.executable, "-c", _APP, "serve", "--hardware", "H200", "--model", "llama-3.1-8b",
                             "--port", "0", "--served-model-name", "my-llama", "--max-queue", "4"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready = json.loads(proc.stdout.readline())
        assert ready["scoville_emulator"] == "ready"
        with urllib.request.urlopen(ready["url"] + "/v1/models", timeout=10) as r:
            assert json.loads(r.read())["data"][0]["id"] == "my-llama"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=15) == 0
        assert "serving my-llama on h200" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()


def test_sweep_without_url_measures_the_built_in_emulator(tmp_path):
    """The README's first command, small: no --url starts the emulator, measures it, and writes a run."""
    proc = subprocess.run(["scoville", "sweep", "--isl", "128", "--osl", "8", "--concurrency", "1,2",
                           "--num-requests", "4", "--warmup-requests", "0", "--runs", str(tmp_path), "--json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    runs = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert len(runs) == 1
    manifest = json.loads((runs[0] / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["system"]["hardware"] == "h200"
    assert manifest["target"]["base_url"].startswith("http://127.0.0.1:")
    from scoville.results.store import read_point_metrics

    rows = read_point_metrics(runs[0])
    assert [r["num_ok"] for r in rows] == [4, 4] and all(r["num_errors"] == 0 for r in rows)
    # a loaded host may send a request's 8 tokens in one chunk (TPOT 0); the timeline is still whole
    assert all(r["e2e_s_median"] >= r["ttft_s_median"] > 0 and r["tpot_s_median"] >= 0 for r in rows)
    # it says what it measured: the emulator, not a real h200
    from scoville.analysis.runs import load_system
    from scoville.results.catalog import query

    assert query(tmp_path, "SELECT origin, source FROM runs")[1] == [("emulated", "measured")]
    system = load_system(runs)
    assert system.source == "emulated" and system.label.endswith("(emulated)")


def test_bad_inline_config_json_is_one_line_not_a_traceback(capsys):
    """``python -m scoville.emulator --config '{...'`` with a typo: exit 2 and one error line."""
    import pytest

    from scoville.emulator.run import main

    with pytest.raises(SystemExit) as e:
        main(["--config", '{"hardware": h200}'])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --config: inline JSON is not valid") and "\n" not in err


def test_port_out_of_range_is_refused_not_wrapped(capsys):
    """--port 70000 once served on 4464 (70000 mod 65536); it must be an error instead."""
    import pytest

    from scoville.emulator.run import main

    with pytest.raises(SystemExit) as e:
        main(["--port", "70000"])
    assert e.value.code == 2
    assert capsys.readouterr().err.strip() == "error: --port 70000 is not a TCP port; use 1-65535, or 0 for a free one"


def test_negative_spin_horizon_is_refused_in_one_line(capsys):
    import pytest

    from scoville.emulator.run import main

    with pytest.raises(SystemExit) as exit_info:
        main(["--port", "0", "--spin-horizon-ms", "-1"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip() == "error: --spin-horizon-ms must be >= 0 (got -1); 0 never spins"


def test_resuming_an_emulator_run_records_the_new_emulators_url(emu, tmp_path):
    from scoville.client.config import ClientConfig
    from scoville.client.errors import ClientError
    from scoville.client.sweep import Sweep, load_plan, resume_sweep, run_sweep
    from scoville.load import concurrency_sweep
    from scoville.measurement import resume_run
    from scoville.power.sources import plan_power
    from scoville.results.store import read_manifest
    from scoville.workload.synthetic import scenario

    points = concurrency_sweep([1, 2], num_requests=1, warmup_requests=0)
    sweep = Sweep(cfg=ClientConfig(base_url=emu.base_url, model=emu.model), workload=scenario(None, isl=32, osl=2),
                  points=points[:1], power=plan_power("rated", hardware="h200", accelerators=1), system=emu.system,
                  model={"name": emu.model},
                  emulator={"hardware": "h200", "model": "llama-3.1-8b", "config": emu.config})
    run = run_sweep(sweep, tmp_path).run_dir
    manifest = read_manifest(run)
    manifest.load_plan, manifest.status = load_plan(points, 0, 1), "running"  # as if killed before point 1
    (run / "manifest.json").write_bytes(manifest.to_json())
    with pytest.raises(ClientError, match="measured the built-in emulator; give the URL"):
        resume_sweep(run)  # the client cannot start an emulator itself
    result = resume_run(run)  # no --url: a fresh emulator, on another port
    target = read_manifest(run).target
    assert result.status == "complete" and target.base_url != emu.base_url
    assert target.endpoint == f"{target.base_url}/v1/completions"


def _start_child(*python_flags: str) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen([sys.executable, *python_flags, "-m", "scoville.emulator", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if not line:
        proc.kill()
        pytest.fail(f"the emulator did not start: {proc.stderr.read()[-2000:]}")
    return proc, json.loads(line)["port"]


def _stop_child(proc: subprocess.Popen) -> str:
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    return err


def test_the_emulator_runs_under_python_OO():
    """-OO strips docstrings: nothing may read one at run time (the --high-priority help did)."""
    proc, port = _start_child("-OO")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10) as r:
            assert r.status == 200
    finally:
        assert _stop_child(proc) == ""


def test_clients_that_hang_up_at_once_leave_no_traceback():
    proc, port = _start_child()
    try:
        body = json.dumps({"model": "llama-3.1-8b", "prompt": [5] * 100, "max_tokens": 3000, "ignore_eos": True,
                           "stream": True}).encode()
        request = (b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                   b"Content-Length: %d\r\n\r\n%b" % (len(body), body))
        for how in ("close", "reset", "half-close") * 2:
            with socket.create_connection(("127.0.0.1", port)) as s:
                s.sendall(request)
                if how == "reset":
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                elif how == "half-close":
                    s.shutdown(socket.SHUT_WR)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10) as r:
            assert r.status == 200
        time.sleep(0.5)  # lets the server reach every hang-up before the stop; the assertion never depends on it
    finally:
        err = _stop_child(proc)
    assert "Traceback" not in err and err == "", err


def test_log_records_with_exceptions_are_one_line():
    import logging

    from scoville.emulator.run import OneLineFormatter

    try:
        raise ConnectionResetError("Cannot write to closing transport\nsecond line")
    except ConnectionResetError:
        record = logging.getLogger("aiohttp.server").makeRecord(
            "aiohttp.server", logging.ERROR, __file__, 1, "Error handling request from %s", ("127.0.0.1",),
            sys.exc_info())
    assert OneLineFormatter().format(record) == ("error: aiohttp.server: Error handling request from 127.0.0.1 "
                                                 "(ConnectionResetError: Cannot write to closing transport)")
