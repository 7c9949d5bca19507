"""The lint gate: pyflakes' errors (undefined names, unused imports, redefinitions) and syntax errors, and no
function in src/ above the McCabe complexity set in pyproject ([tool.ruff.lint.mccabe]), on every test run, so CI
refuses what a reviewer would (ruff is in the dev extra)."""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"

def _ruff(*args: str) -> subprocess.CompletedProcess[str]:
    pytest.importorskip("ruff", reason="ruff comes with the dev extra: pip install -e '.[dev]'")
    return subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_ruff_finds_no_error_in_the_code_tests_or_benches():
    done = _ruff("--select", "F,E9", "src", "tests", "bench")
    assert done.returncode == 0, done.stdout + done.stderr


def _qualname(path: Path, row: int) -> str:
    """``package.module.Class.function`` of the function defined at ``row`` of ``path`` (ruff names only the
    function, and a method's name alone says little)."""
    module = ".".join(path.resolve().relative_to(SRC).with_suffix("").parts)

    def find(node: ast.AST, prefix: str) -> str | None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}.{child.name}"
                if child.lineno == row and not isinstance(child, ast.ClassDef):
                    return name
                found = find(child, name)
                if found is not None:
                    return found
        return None

    found = find(ast.parse(path.read_text()), module)
    assert found is not None, f"ruff reported a function at {path}:{row} that the parser does not see"
    return found


def test_no_function_in_src_is_over_the_complexity_limit():
    done = _ruff("--select", "C901", "--output-format", "json", "--exit-zero", "src")
    assert done.returncode == 0, done.stdout + done.stderr
    over = {_qualname(Path(d["filename"]), d["location"]["row"]): d["message"] for d in json.loads(done.stdout)}
    assert not over, ("functions over the McCabe complexity limit (pyproject [tool.ruff.lint.mccabe]); split them "
                      "into short functions that each do one thing:\n"
                      + "\n".join(sorted(f"{name}: {msg}" for name, msg in over.items())))
