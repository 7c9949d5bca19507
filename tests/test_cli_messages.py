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
