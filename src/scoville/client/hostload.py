"""How loaded the measuring host was during a point: the client's CPU share and the hypervisor's steal.

A client process whose event loop is busy all the time stamps chunks late, so
its latencies are the client's, not the server's; a virtual machine whose
hypervisor steals CPU time does the same. Both are read from the kernel at
the start and end of a point (``/proc/<pid>/stat`` and ``/proc/stat``), so
measuring them costs nothing while requests are in flight. Elsewhere than
Linux only this process's own CPU time is known and steal is not.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_STAT_FIELDS_BEFORE_UTIME = 11   # fields after the name's ")" in /proc/<pid>/stat: state ... cmajflt


@dataclass(frozen=True)
class HostSample:
    """One reading: wall clock, CPU seconds per client process, and the host's steal and total jiffies."""

    t: float
    cpu_s: dict[int, float]
    steal: int | None
    total: int | None


def _process_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of a process (None when it is gone or /proc is absent)."""
    if pid == os.getpid() and not Path("/proc/self/stat").exists():
        t = os.times()
        return t.user + t.system
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[-1].split()
    try:
        utime, stime = fields[_STAT_FIELDS_BEFORE_UTIME], fields[_STAT_FIELDS_BEFORE_UTIME + 1]
        return (int(utime) + int(stime)) / _TICKS
    except (IndexError, ValueError):
        return None


def _steal_jiffies() -> tuple[int | None, int | None]:
    """(steal, total) jiffies over all CPUs from /proc/stat's first line; (None, None) where unreadable."""
    try:
        with open("/proc/stat") as f:
            first = f.readline().split()
    except OSError:
        return None, None
    if not first or first[0] != "cpu" or len(first) < 9:
        return None, None
    values = [int(v) for v in first[1:9]]  # user nice system idle iowait irq softirq steal (guest is in user)
    return values[7], sum(values)


def sample(pids: list[int]) -> HostSample:
    """The host's state now, for the given client processes."""
    cpu = {pid: s for pid in pids if (s := _process_cpu_s(pid)) is not None}
    steal, total = _steal_jiffies()
    return HostSample(time.perf_counter(), cpu, steal, total)


def client_cpu_share(start: HostSample, end: HostSample) -> float | None:
    """The busiest client process's CPU time over the wall time between two samples (1.0 = one core).

    The busiest, not the sum: one saturated event loop delays its own streams even when the others idle.
    """
    wall = end.t - start.t
    shares = [(end.cpu_s[p] - start.cpu_s[p]) / wall for p in start.cpu_s if p in end.cpu_s] if wall > 0 else []
    return max(shares) if shares else None


def steal_share(start: HostSample, end: HostSample) -> float | None:
    """The share of all CPU time the hypervisor gave to other guests between two samples (None where unknown)."""
    if None in (start.steal, start.total, end.steal, end.total):
        return None
    total = end.total - start.total  # type: ignore[operator]
    return (end.steal - start.steal) / total if total > 0 else None  # type: ignore[operator]
