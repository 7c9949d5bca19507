"""Every Python block of docs/python-api.md runs, in order, in a fresh folder: the page cannot rot."""

import re
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[1] / "docs" / "python-api.md"


@pytest.mark.slow
def test_every_example_of_the_python_api_page_runs(tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)
    assert len(blocks) >= 5
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for i, code in enumerate(blocks):
        exec(compile(code, f"{PAGE.name} block {i + 1}", "exec"), namespace)
    assert (tmp_path / "h200-vs-b200.html").stat().st_size > 100_000
    assert len(list((tmp_path / "runs").iterdir())) >= 3
