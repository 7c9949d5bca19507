"""Load plans: sweeps, arrival processes, and trace arrival times kept in shape."""

from pathlib import Path

import numpy as np
import pytest

from scoville.errors import UserError
from scoville.load import (
    arrival_offsets,
    concurrency_sweep,
    parse_float_list,
    parse_int_list,
    rate_sweep,
    session_start_offsets,
)
from scoville.workload.synthetic import scenario
from scoville.workload.traces import load_trace

TRACES = Path(__file__).resolve().parents[1] / "src" / "scoville" / "data" / "traces"


def test_inferencex_sweep_defaults_are_10c_measured_after_2c_warmup():
    points = concurrency_sweep(parse_int_list("1-8"))
    assert [(p.concurrency, p.num_requests, p.warmup_requests) for p in points] == [
        (1, 10, 2), (2, 20, 4), (4, 40, 8), (8, 80, 16)]


def test_bad_lists_are_user_errors():
    for text in ("abc", "0,1", "8-2"):
        with pytest.raises(UserError):
            parse_int_list(text)
    for text in ("x", "0", "1,-2", "nan", "1,nan"):
        with pytest.raises(UserError, match="rate"):
            parse_float_list(text)
    assert parse_float_list("0.5, inf") == [0.5, float("inf")]  # inf: every request at once


def test_poisson_arrivals_have_the_requested_mean_rate_and_are_seeded():
    (point,) = rate_sweep([4.0], num_requests=4000)
    a = arrival_offsets(point, 4000, seed=1)
    assert a[0] == 0 and np.all(np.diff(a) >= 0)
    assert (a.size - 1) / a[-1] == pytest.approx(4.0, rel=0.05)
    assert np.array_equal(a, arrival_offsets(point, 4000, seed=1))


def test_synthetic_workloads_use_the_points_arrival_process():
    (point,) = rate_sweep([2.0], num_requests=50)
    wl = scenario("1k1k")
    assert np.array_equal(session_start_offsets(point, 50, 3, wl), arrival_offsets(point, 50, 3))


def test_a_timed_trace_keeps_its_shape_scaled_to_the_points_rate():
    trace = load_trace(TRACES / "scoville_sample.jsonl")
    assert trace.has_arrivals
    raw = np.asarray(trace.arrivals(5, 0))
    (point,) = rate_sweep([10.0], num_requests=5)
    got = session_start_offsets(point, 5, 0, trace)
    assert (got.size - 1) / got[-1] == pytest.approx(10.0)
    # same relative gaps: bursts and lulls survive the time scaling
    assert np.allclose(got / got[-1], (raw - raw[0]) / (raw[-1] - raw[0]))
