"""The NVML sampler with the NVML library boundary (the ``pynvml`` module) replaced by a stand-in.

Everything above that boundary — the sampling thread, run-clock stamps, energy
counter marks, writing power.parquet and the per-kW metrics — is the shipped path.
Time is the test's (a clock it moves, or a counter that moves per read), and the
test waits for the thread's reads, never for a sleep: a loaded host changes nothing.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import types
from collections.abc import Callable

import pytest
from client_support import Behaviour

from scoville.client.config import ClientConfig
from scoville.client.sweep import Sweep, run_sweep
from scoville.load import concurrency_sweep
from scoville.power.nvml import NvmlSampler
from scoville.power.sources import PowerError, plan_power, system_info
from scoville.results.store import read_power
from scoville.workload.synthetic import SyntheticWorkload


class FakeClock:
    """Time that moves only when the test moves it: what NVML's energy counter and the sampler both read."""

    def __init__(self, t: float = 1.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def fake_nvml(watts=(300.0, 500.0), energy: bool = True, fail_init: bool = False,
              clock: Callable[[], float] | None = None, reads_wanted: int = 0) -> types.ModuleType:
    """A stand-in for pynvml: each GPU draws a constant power.

    The energy counter integrates that power over ``clock``; without a clock it
    advances one second's worth at every read (so a reading is exact however
    long the host took between reads). ``state["enough"]`` is set once the power
    has been read ``reads_wanted`` times: what a test waits for instead of sleeping.
    """
    m = types.ModuleType("pynvml")
    state = {"reads": 0, "energy_reads": [0] * len(watts), "enough": threading.Event()}

    def init():
        if fail_init:
            raise RuntimeError("NVML Shared Library Not Found")

    def energy_mj(h):
        if not energy:
            raise RuntimeError("Not Supported")
        state["energy_reads"][h] += 1
        seconds = clock() if clock is not None else state["energy_reads"][h]
        return int(watts[h] * seconds * 1000)

    def power_mw(h):
        state["reads"] += 1
        if state["reads"] >= reads_wanted:
            state["enough"].set()
        return int(watts[h] * 1000)

    m.nvmlInit = init
    m.nvmlShutdown = lambda: None
    m.nvmlDeviceGetCount = lambda: len(watts)
    m.nvmlDeviceGetHandleByIndex = lambda i: i
    m.nvmlDeviceGetName = lambda h: b"NVIDIA H200"
    m.nvmlDeviceGetPowerUsage = power_mw
    m.nvmlDeviceGetTotalEnergyConsumption = energy_mj
    m.state = state
    return m


def test_sampler_thread_samples_every_device_on_the_run_clock():
    clock = FakeClock(1.0)
    nvml = fake_nvml(clock=clock, reads_wanted=8)
    s = NvmlSampler(clock, interval_s=0.001, nvml=nvml)
    assert s.names == ["NVIDIA H200", "NVIDIA H200"] and s.energy_supported
    start = s.mark()
    s.start()
    assert nvml.state["enough"].wait(60), "the sampling thread never ran"
    clock.t = 3.0
    s.stop()
    end = s.mark()
    table = s.drain()
    devices = table.column("device").to_pylist()
    assert devices.count("gpu0") == devices.count("gpu1") >= 4 + 1  # whole rounds, and the closing one
    w = dict(zip(devices, table.column("watts").to_pylist(), strict=True))
    assert w == {"gpu0": 300.0, "gpu1": 500.0}
    t = table.column("t").to_pylist()
    assert t == sorted(t) and t[0] == 1.0 and t[-1] == 3.0  # stamped on the run clock, the closing sample last
    assert (start["t"], end["t"]) == (1.0, 3.0)
    assert {d: end["joules"][d] - start["joules"][d] for d in end["joules"]} == {"gpu0": 600.0, "gpu1": 1000.0}
    assert s.drain().num_rows == 0


def test_missing_nvml_is_a_one_line_error():
    with pytest.raises(PowerError, match="NVML is not available .*use --power rated"):
        NvmlSampler(time.perf_counter, nvml=fake_nvml(fail_init=True))
    with pytest.raises(PowerError, match=r"no GPU \[5\]"):
        NvmlSampler(time.perf_counter, nvml=fake_nvml(), devices=[5])


def test_energy_counter_is_optional():
    s = NvmlSampler(time.perf_counter, nvml=fake_nvml(energy=False))
    assert not s.energy_supported and s.mark()["joules"] == {}


def test_nvml_sweep_writes_power_and_per_kw_metrics(server, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml())
    server.set(Behaviour(interval_s=0.01))
    plan = plan_power("nvml", hardware="h200", accelerators=2)
    sweep = Sweep(cfg=ClientConfig(base_url=server.base_url, model="test-model"),
                  workload=SyntheticWorkload(isl=16, osl=8, range_ratio=1.0), points=concurrency_sweep(
                      [2], num_requests=6, warmup_requests=0), power=plan, system=system_info("h200", 2, plan, None))
    result = run_sweep(sweep, tmp_path)
    power = read_power(result.run_dir)
    assert set(power.column("device").to_pylist()) == {"gpu0", "gpu1"}
    row = result.rows[0]
    assert row["power_source"] == "nvml" and row["power_boundary"] == "board"
    assert row["power_w"] == pytest.approx(800.0)
    assert row["total_throughput_per_kw"] == pytest.approx(row["total_throughput"] / 0.8)
    m = json.loads((result.run_dir / "manifest.json").read_text())  # the file as written
    assert m["power"]["nvml_device_names"] == ["NVIDIA H200"] * 2
    (mark,) = m["power"]["energy_counter"]
    # one counter read at the point's start and one at its end: the counter moved one second's worth
    assert mark["joules"] == {"gpu0": 300.0, "gpu1": 500.0} and mark["t_end"] > mark["t_start"]


def test_nvml_sweep_without_nvml_fails_before_a_run_exists(server, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(fail_init=True))
    plan = plan_power("nvml", hardware=None, accelerators=1)
    sweep = Sweep(cfg=ClientConfig(base_url=server.base_url, model="test-model"),
                  workload=SyntheticWorkload(isl=16, osl=8), points=concurrency_sweep([1], num_requests=1),
                  power=plan, system={})
    with pytest.raises(PowerError, match="NVML is not available"):
        run_sweep(sweep, tmp_path)
    assert list(tmp_path.iterdir()) == []
