"""Utilisation power model: idle at rest, rated when compute-saturated, decode in between."""

from __future__ import annotations

import numpy as np
import pytest

from scoville.sim.cost import Parallel, StepCost
from scoville.sim.power_model import PowerModel


def test_bounds_and_monotonicity():
    pm = PowerModel("h200")
    assert pm.watts(0, 0) == pytest.approx(90)
    assert pm.watts(1, 1) == pytest.approx(700)
    grid = np.linspace(0, 1, 11)
    assert np.all(np.diff(pm.watts(grid, 0.3)) >= 0) and np.all(np.diff(pm.watts(0.05, grid)) >= 0)


def test_prefill_draws_more_than_decode_and_energy_integrates():
    c = StepCost("llama-3.1-70b", "h200", Parallel(tp=4))
    pm = PowerModel(c.hw)
    pre = pm.watts(*c.utilization(8192, 1, 8192 * 4096, 8192))
    dec = pm.watts(*c.utilization(32, 32, 32 * 8192, 32 * 8192))
    assert 0.45 * 700 < dec < pre <= 700
    assert pm.energy_joules([1.0, 2.0], [0, 0], [0, 0]) == pytest.approx(3 * 90)


def test_sliding_window_layers_read_only_their_window_in_the_utilisation():
    # gpt-oss decode at 256 x 8.7k context: the 18 sliding layers read 128 tokens per sequence, not 8.7k,
    # so the memory utilisation (and the modelled power) counts the full layers' KV and the window only.
    c = StepCost("gpt-oss-120b", "h200")
    m, S = c.model, 256
    K = S * 8700.0
    _, mu = c.utilization(S, S, K, K)
    kv = (K * m.num_full_layers + S * m.sliding_window * m.num_sliding_layers) * c._kv_layer_rank
    expect = (c.weight_bytes_per_accelerator + kv) / c.step_time(S, S, K, K) / c.hw.hbm_bytes_per_s
    assert float(mu) == pytest.approx(expect, rel=1e-9)
    assert PowerModel(c.hw).watts(*c.utilization(S, S, K, K)) < 700   # a decode step is not at rated power
