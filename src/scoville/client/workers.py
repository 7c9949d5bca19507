"""Running a point in one process or spread over worker processes.

Why processes: one Python event loop tops out at some tens of thousands of
received chunks per second; past that the client, not the server, would set
the measured latencies. Workers each run ``drive_point`` with a share of the
lanes (closed loop) or of the sessions (open loop), pull session indices and
request slots from counters in shared memory, stamp times with the parent's
``t0`` (``perf_counter`` is CLOCK_MONOTONIC on Linux, one clock for all
processes) and send each finished record to the parent at once, which
journals it. So all records land in the one run directory, on one clock.

Workers ignore SIGINT: the parent decides what an interrupt means (stop
sending, keep what finished) and tells them; a parent killed outright closes
their pipes, which ends them.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import math
import multiprocessing as mp
import os
import resource
import signal
from collections.abc import Callable
from multiprocessing.connection import Connection, wait
from typing import Any, cast

import msgspec

from scoville.client.config import ClientConfig
from scoville.client.driver import drive_point, run_async
from scoville.client.errors import ClientError
from scoville.client.fastpath import ClientLimitError
from scoville.load import LoadPoint
from scoville.load_policy import LocalSlots, in_flight_cap, lanes, point_sessions, request_cap, session_count
from scoville.results.schema import RequestRecord

_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder(RequestRecord).decode
# Streams one event loop drives at >= 50k chunks/s with p99 timestamp lag well under 1 ms on the
# raw-socket path (bench/bench_client.py); wider points get more processes, up to the cores.
LANES_PER_WORKER = 256
_PR_SET_PDEATHSIG = 1  # linux/prctl.h
# Descriptors a client process holds besides its sockets: the interpreter, pipes, the event loop.
_BASE_FILES = 64


def auto_workers(point_lanes: int) -> int:
    """Worker processes for the widest point: one loop up to LANES_PER_WORKER lanes, then more, up to the cores."""
    return max(1, min(os.cpu_count() or 1, math.ceil(point_lanes / LANES_PER_WORKER)))


def ensure_open_files(streams: int) -> None:
    """Raise the soft open-file limit to the hard one (workers inherit it); refuse what cannot fit.

    ``streams`` is the most connections one client process will hold at once
    (0 when not known, as for an uncapped --rate point). Without this, a
    sweep at 256 streams under ``ulimit -n 256`` failed in the middle with
    EMFILE; now it runs, or stops before it starts with one line.
    """
    need = streams + _BASE_FILES
    infinite = resource.RLIM_INFINITY
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != infinite and hard < need:
        raise ClientError(f"{streams} concurrent streams need about {need} open files, but this shell allows "
                          f"{hard} (ulimit -Hn); raise the limit, lower --concurrency, or spread the streams "
                          "over more --workers")
    target = hard if hard != infinite else max(soft, need)
    if soft != infinite and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def split(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


class _SharedCounters:
    """Session and request counters in shared memory, reset by the parent before each point."""

    def __init__(self, ctx) -> None:
        self.session = ctx.Value("q", 0)
        self.request = ctx.Value("q", 0)
        self.session_cap = ctx.Value("q", 0)
        self.request_cap = ctx.Value("q", -1)
        self.stop = ctx.Event()

    def reset(self, sessions: int, requests: int | None) -> None:
        self.stop.clear()
        for v, x in ((self.session, 0), (self.request, 0), (self.session_cap, sessions),
                     (self.request_cap, -1 if requests is None else requests)):
            with v.get_lock():
                v.value = x

    def take_session(self) -> int | None:
        with self.session.get_lock():
            if self.session.value >= self.session_cap.value:
                return None
            self.session.value += 1
            return self.session.value - 1

    def take_request(self) -> int | None:
        with self.request.get_lock():
            cap = self.request_cap.value
            if cap >= 0 and self.request.value >= cap:
                return None
            self.request.value += 1
            return self.request.value - 1


def run_point_here(cfg: ClientConfig, workload: Any, point: LoadPoint, *, t0: float, t_start: float,
                   on_record: Callable[[RequestRecord], None], seed: int = 0, salt: int = 0) -> None:
    """Drive a whole point in this process (Ctrl-C cancels in-flight requests and re-raises)."""
    sessions = point_sessions(workload, point)
    counters = LocalSlots(len(sessions), request_cap(point))
    run_async(drive_point(cfg, sessions, point, t0=t0, t_start=t_start, counters=counters, on_record=on_record,
                          lanes=lanes(point), seed=seed, max_in_flight=in_flight_cap(point),
                          workload=workload, salt=salt))


def die_with_parent() -> None:
    """Ask Linux to kill this process when its parent dies (kill -9 included); elsewhere a no-op.

    A parent killed outright closes the workers' pipes, but a worker in the middle
    of a long stream would only notice at its next record; this ends it at once.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the closed pipe still ends the worker
        pass


def _worker_main(index: int, count: int, conn: Connection, counters: _SharedCounters, cfg: ClientConfig,
                 workload: Any, parent: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent()
    if os.getppid() != parent:  # the parent died before the request above took effect
        return
    name = f"w{index}"
    conn.send_bytes(b"S")  # imported and ready: the parent starts no point before every worker is
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg[0] == "exit":
            return
        _, point_dict, t0, t_start, seed, salt = msg
        point = msgspec.convert(point_dict, LoadPoint)
        try:
            _worker_point(index, count, name, conn, counters, cfg, workload, point, t0, t_start, seed, salt)
        except (BrokenPipeError, EOFError, OSError):
            return  # the parent is gone
        except ClientLimitError as e:  # this machine's limit, said as it is
            conn.send_bytes(b"E" + str(e).encode())
            continue
        except Exception as e:  # report, do not hang the parent
            conn.send_bytes(b"E" + f"{type(e).__name__}: {e}".encode())
            continue
        conn.send_bytes(b"D")


def _worker_point(index: int, count: int, name: str, conn: Connection, counters: _SharedCounters,
                  cfg: ClientConfig, workload: Any, point: LoadPoint, t0: float, t_start: float, seed: int,
                  salt: int) -> None:
    sessions = point_sessions(workload, point)
    my_lanes = split(lanes(point), count)[index]
    max_in_flight = None
    open_sessions = None
    if point.rate is not None:
        # A cap of C in flight over more than C workers: only C of them send (one slot each). A worker
        # with no slot would otherwise run uncapped (Semaphore(0) means "no cap" to drive_point).
        active = min(count, point.concurrency) if point.concurrency else count
        if index >= active:
            return
        open_sessions = range(index, len(sessions), active)
        max_in_flight = split(point.concurrency, active)[index] if point.concurrency else None
    send = conn.send_bytes

    def on_record(rec: RequestRecord) -> None:
        send(b"R" + _encode(rec))

    async def main() -> None:
        task = asyncio.ensure_future(drive_point(
            cfg, sessions, point, t0=t0, t_start=t_start, counters=counters, on_record=on_record,
            lanes=my_lanes if point.rate is None else 0, seed=seed, open_sessions=open_sessions,
            max_in_flight=max_in_flight, worker=name, workload=workload, salt=salt))
        # The parent's stop (Ctrl-C) is an Event in shared memory, polled here: in-flight requests are
        # cancelled, finished ones were already sent.
        while not task.done():
            await asyncio.wait([task], timeout=0.05)
            if counters.stop.is_set():
                task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    if point.rate is None and my_lanes == 0:
        return
    run_async(main())


class WorkerPool:
    """``count`` worker processes kept for a whole sweep."""

    def __init__(self, count: int, cfg: ClientConfig, workload: Any) -> None:
        ctx = mp.get_context("spawn")
        self.counters = _SharedCounters(ctx)
        self.conns: list[Connection] = []
        self.procs = []
        for i in range(count):
            parent, child = ctx.Pipe()
            p = ctx.Process(target=_worker_main, args=(i, count, child, self.counters, cfg, workload, os.getpid()),
                            name=f"scoville-worker-{i}", daemon=True)
            p.start()
            child.close()
            self.conns.append(parent)
            self.procs.append(p)
        for c, p in zip(self.conns, self.procs, strict=True):
            try:
                ready = c.poll(60) and c.recv_bytes() == b"S"
            except (EOFError, OSError):
                ready = False
            if not ready:
                self.close()
                raise ClientError(f"client worker {p.name} did not start (exit code {p.exitcode})")

    def run_point(self, point: LoadPoint, *, t0: float, t_start: float, on_record: Callable[[RequestRecord], None],
                  seed: int = 0, salt: int = 0) -> None:
        """Drive one point over all workers; on KeyboardInterrupt stop them, keep what finished, re-raise.

        Any other failure here (the journal cannot be written) stops the workers too, so
        none goes on sending load that nobody records.
        """
        self.counters.reset(session_count(point), request_cap(point))
        for c in self.conns:
            c.send(("point", point.to_dict(), t0, t_start, seed, salt))
        pending = set(self.conns)
        try:
            self._collect(on_record, pending)
        except KeyboardInterrupt:
            self.counters.stop.set()
            with contextlib.suppress(KeyboardInterrupt, TimeoutError, ClientError):
                self._collect(on_record, pending, timeout=5.0)
            raise
        except BaseException:
            self.counters.stop.set()
            raise

    def _collect(self, on_record: Callable[[RequestRecord], None], pending: set[Connection],
                 timeout: float | None = None) -> None:
        """Journal records as they come until every pending worker reports its point done."""
        errors = []
        while pending:
            # wait returns the very objects it was given; typeshed widens them to any waitable (sockets, fds)
            ready = cast(list[Connection], wait(list(pending), timeout=timeout))
            if not ready:
                raise TimeoutError("workers did not finish")
            for c in ready:
                try:
                    msg = c.recv_bytes()
                except (EOFError, OSError):
                    pending.discard(c)
                    errors.append("a worker process died")
                    continue
                tag = msg[:1]
                if tag == b"R":
                    on_record(_decode(msg[1:]))
                elif tag == b"D":
                    pending.discard(c)
                elif tag == b"E":
                    pending.discard(c)
                    errors.append(msg[1:].decode())
        if errors:
            raise ClientError(f"client worker failed: {' '.join(errors[0].split())}")

    def close(self) -> None:
        for c in self.conns:
            with contextlib.suppress(OSError):
                c.send(("exit",))
        for p in self.procs:
            p.join(2)
            if p.is_alive():
                p.terminate()
                p.join(2)
