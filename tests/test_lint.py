"""The gates: ``ruff check`` with the project's rules (pyproject [tool.ruff]: pycodestyle, pyflakes, bugbear,
pyupgrade, simplify, import order at 120 columns, and no function above McCabe complexity 20) over the code, the
tests and the benches, and mypy (pydantic plugin) over the code and the benches, on every full test run, so CI
refuses what a reviewer would (both are in the dev extra). The import layering has its own test
(tests/test_layering.py)."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_finds_nothing_in_the_code_tests_or_benches():
    pytest.importorskip("ruff", reason="ruff comes with the dev extra: pip install -e '.[dev]'")
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "src", "tests", "bench"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_mypy_finds_no_type_error_in_the_code():
    """mypy with the pydantic plugin over src/scoville and bench (pyproject [tool.mypy]); about 20 s, so the full
    suite only."""
    pytest.importorskip("mypy", reason="mypy comes with the dev extra: pip install -e '.[dev]'")
    done = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental"], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
