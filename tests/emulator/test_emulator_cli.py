"""`scoville serve`: starts, answers, and stops cleanly on Ctrl-C."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request

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
