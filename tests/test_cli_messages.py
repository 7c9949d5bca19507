"""A one-line error reaches the terminal as written and names the real cause: square brackets (pip extras) are
text, not Rich markup."""

from __future__ import annotations

import os
import subprocess
import sys


def test_an_error_quoting_a_pip_extra_keeps_its_brackets(tmp_path):
    cmd = [sys.executable, "-c", "from scoville.cli import main; main()", "simulate", "--hardware", "mi355x",
           "--model", "llama-3.1-8b", "--cost-backend", "measured", "--scenario", "1k1k", "--runs", str(tmp_path)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "1000"})
    assert out.returncode == 2
    assert "pip install 'scoville[silicon]'" in out.stderr, out.stderr
    assert "does not fit" not in out.stderr       # the search used to read the missing tables as "no layout fits"


def test_sweep_help_fits_an_80_column_terminal_without_cutting_an_option_name():
    cmd = [sys.executable, "-c", "from scoville.cli import main; main()", "sweep", "--help"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env={**os.environ, "COLUMNS": "80"})
    assert out.returncode == 0
    lines = out.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    names = [line.split()[1] for line in lines if line.startswith("│ --")]
    assert "--url" in names and "--no-ignore-eos" in names and not any(n.endswith("…") for n in names)
    assert {"Target", "Workload", "Load", "Power and cost", "Output", "Execution"} <= {
        line.strip("╭─╮ ").strip() for line in lines if line.startswith("╭─")}
