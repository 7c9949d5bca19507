"""The shipped coefficients keep every public InferenceX 8k/1k figure within the 25% target.

A regression guard: a change to the cost model or the catalog that moves a prediction off the
published points fails here, not silently in a report. Uses the calibration bench's steady-state
frontier search (bench/bench_sim_calibration.py), which runs in well under a second.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "bench_sim_calibration.py"


@pytest.fixture(scope="module")
def cal():
    spec = importlib.util.spec_from_file_location("bench_sim_calibration", BENCH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod          # dataclasses resolve their module by name
    spec.loader.exec_module(mod)
    return mod


def test_reference_data_documents_its_source_and_token_convention(cal):
    ref = cal.reference()
    assert ref["throughput_tokens"] == "total" and ref["power_basis"] == "rated" and "InferenceX" in ref["source"]
    assert {(p["model"], p["hardware"]) for p in ref["points"]} == {
        ("gpt-oss-120b", "gb200"), ("deepseek-r1", "gb300"), ("kimi-k2.5", "gb300")}


def test_every_reference_figure_within_25_percent(cal):
    rows = cal.errors(cal.reference())
    assert len(rows) == 9
    for name, metric, ref, pred, _ in rows:
        assert abs(pred / ref - 1) <= 0.25, f"{name} {metric}: predicted {pred:.4g} vs {ref:.4g}"
