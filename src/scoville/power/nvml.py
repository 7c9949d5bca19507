"""NVML board-power sampler: a thread reading every GPU's power at a fixed rate during a run.

Each sample is (t on the run clock, device, watts) from
``nvmlDeviceGetPowerUsage`` (milliwatts). Where the driver supports it,
``nvmlDeviceGetTotalEnergyConsumption`` (millijoules since driver load) is read
at every ``mark()`` so the energy of each point can be cross-checked against
the trapezoid integral of the sampled power.

The ``nvml`` argument exists so tests can replace the NVML boundary (the
``pynvml`` module) with an object of the same shape; everything above that
boundary is the shipped code path.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from scoville.power.sources import PowerError
from scoville.results.schema import POWER_SCHEMA


def _load_pynvml():
    try:
        import pynvml
    except ImportError:
        raise PowerError("--power nvml needs the nvidia-ml-py package: pip install nvidia-ml-py") from None
    return pynvml


class NvmlSampler:
    """Samples board power of the chosen GPUs (all by default) every ``interval_s`` seconds."""

    def __init__(self, clock: Callable[[], float], *, interval_s: float = 0.1, devices: list[int] | None = None,
                 nvml: Any = None) -> None:
        self.nvml = nvml if nvml is not None else _load_pynvml()
        self.clock = clock
        self.interval_s = interval_s
        try:
            self.nvml.nvmlInit()
        except Exception as e:  # NVMLError_LibraryNotFound, _DriverNotLoaded, ...
            raise PowerError(f"--power nvml: NVML is not available on this machine ({e}); "
                             "use --power rated or --power csv") from None
        count = self.nvml.nvmlDeviceGetCount()
        chosen = list(range(count)) if devices is None else devices
        bad = [d for d in chosen if not 0 <= d < count]
        if bad or not chosen:
            raise PowerError(f"--power nvml: no GPU {bad or chosen} (this machine has {count}); check nvidia-smi")
        self.devices = chosen
        self._handles = [self.nvml.nvmlDeviceGetHandleByIndex(d) for d in chosen]
        self.names = [self._name(h) for h in self._handles]
        self._t: list[float] = []
        self._dev: list[str] = []
        self._w: list[float] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.errors = 0
        self.energy_supported = self._energy_mj(self._handles[0]) is not None

    def _name(self, handle: Any) -> str:
        name = self.nvml.nvmlDeviceGetName(handle)
        return name.decode() if isinstance(name, bytes) else str(name)

    def _energy_mj(self, handle: Any) -> int | None:
        try:
            return int(self.nvml.nvmlDeviceGetTotalEnergyConsumption(handle))
        except Exception:  # NVMLError_NotSupported on older GPUs
            return None

    def sample_once(self) -> None:
        """Read every device once (one row per device)."""
        for d, h in zip(self.devices, self._handles, strict=True):
            try:
                mw = self.nvml.nvmlDeviceGetPowerUsage(h)
            except Exception:
                self.errors += 1
                continue
            t = self.clock()
            with self._lock:
                self._t.append(t)
                self._dev.append(f"gpu{d}")
                self._w.append(mw / 1000.0)

    def _run(self) -> None:
        next_t = time.perf_counter()
        while not self._stop.is_set():
            self.sample_once()
            next_t += self.interval_s
            self._stop.wait(max(0.0, next_t - time.perf_counter()))

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="scoville-nvml", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None
        self.sample_once()  # a closing sample so the window's end is covered
        with contextlib.suppress(Exception):
            self.nvml.nvmlShutdown()

    def mark(self) -> dict[str, Any]:
        """The energy counters now: {"t", "joules": {device: J}} (empty when unsupported)."""
        joules = {}
        if self.energy_supported:
            for d, h in zip(self.devices, self._handles, strict=True):
                mj = self._energy_mj(h)
                if mj is not None:
                    joules[f"gpu{d}"] = mj / 1000.0
        return {"t": self.clock(), "joules": joules}

    def drain(self) -> pa.Table:
        """The samples collected since the last drain, as a POWER_SCHEMA table."""
        with self._lock:
            t, dev, w = self._t, self._dev, self._w
            self._t, self._dev, self._w = [], [], []
        return pa.Table.from_pydict({"t": t, "device": dev, "watts": w}, schema=POWER_SCHEMA)
