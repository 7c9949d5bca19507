"""Report tests share the synthetic run builder of tests/analysis."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "analysis"))

from runs_factory import BASELINE_POINTS, CONTENDER_POINTS, make_run  # noqa: E402

MEASURED_POINTS = [(15.0, 20_000.0), (30.0, 15_000.0), (60.0, 8_000.0), (100.0, 3_000.0), (140.0, 900.0),
                   (180.0, 200.0), (200.0, 100.0)]


@pytest.fixture(scope="session")
def report_runs(tmp_path_factory):
    """Exact seed-figure baseline and contender, plus a 7-point run with measured (NVML-style) power."""
    root = tmp_path_factory.mktemp("report-runs")
    base = make_run(root, "20261202T100000Z-base00", BASELINE_POINTS, hardware="H200", accelerators=8, watts=700,
                    requests_per_point=8)
    cont = make_run(root, "20261202T100001Z-cont00", CONTENDER_POINTS, hardware="GB300 NVL72", accelerators=72,
                    watts=1400, source="simulated", requests_per_point=8)
    meas = make_run(root, "20261202T100002Z-meas00", MEASURED_POINTS, hardware="B200", accelerators=8,
                    watts=1000, jitter=0.2, measured_power=True, requests_per_point=24, seed=3)
    return root, [base, cont, meas]
