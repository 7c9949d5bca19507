"""The lint gate: pyflakes' errors (undefined names, unused imports, redefinitions) and syntax errors, on every
test run, so CI refuses what a reviewer would (ruff is in the dev extra)."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_finds_no_error_in_the_code_tests_or_benches():
    pytest.importorskip("ruff", reason="ruff comes with the dev extra: pip install -e '.[dev]'")
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--select", "F,E9", "--no-cache", "src", "tests",
                           "bench"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
