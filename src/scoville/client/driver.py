"""The measuring client's load driver: one point's requests over HTTP, as ``scoville.load_policy`` decides them.

One coroutine, ``drive_point``, runs a point inside one event loop; worker
processes (``scoville.client.workers``) and Ray client actors
(``scoville.client.ray_pool``) run the same coroutine with a share of the
lanes or sessions and shared counters, so the request count, the warm-up flags
and the stop conditions hold across all of them exactly as in one process.

What is sent when, what is warm-up and when the point ends is the load policy's
(``PointLoad``, which the simulator follows too); this module only waits in real
time, sends, caps requests in flight with a semaphore and hands records on.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

import aiohttp

from scoville.client import fastpath
from scoville.client.config import ClientConfig
from scoville.client.fastpath import KEEPALIVE_IDLE_S, FastHTTP
from scoville.client.request import Prompts, send_request, send_request_fast
from scoville.load import LoadPoint
from scoville.load_policy import PointLoad, Send, SlotCounters, Turn
from scoville.results.schema import RequestRecord
from scoville.workload.spec import Session

# Open loop: an arrival's task is created this long before it is due (it then sleeps the rest exactly).
ARRIVAL_LEAD_S = 0.05


def make_connector() -> aiohttp.TCPConnector:
    # No pool limit: the driver, not the connector, decides how many requests are in flight. Idle
    # connections are dropped before a server's keep-alive (uvicorn: 5 s) can close them under a request.
    return aiohttp.TCPConnector(limit=0, limit_per_host=0, ttl_dns_cache=300, enable_cleanup_closed=False,
                                keepalive_timeout=KEEPALIVE_IDLE_S)


def make_timeout(cfg: ClientConfig) -> aiohttp.ClientTimeout:
    return aiohttp.ClientTimeout(total=cfg.timeout_s, sock_connect=10.0, sock_read=cfg.read_timeout_s)


async def sleep_until(t: float, t0: float) -> None:
    """Sleep until run-clock time ``t``; never returns early (uvloop timers may fire up to 1 ms early)."""
    perf = time.perf_counter
    while (delay := t - (perf() - t0)) > 0:
        await asyncio.sleep(delay)


async def drive_point(
    cfg: ClientConfig,
    sessions: Sequence[Session],
    point: LoadPoint,
    *,
    t0: float,
    t_start: float,
    counters: SlotCounters,
    on_record: Callable[[RequestRecord], None],
    lanes: int,
    seed: int = 0,
    open_sessions: Sequence[int] | None = None,
    max_in_flight: int | None = None,
    worker: str | None = None,
    stop: Callable[[], bool] = lambda: False,
    workload: Any = None,
    salt: int = 0,
) -> None:
    """Run (this process's share of) one load point.

    Closed loop: ``lanes`` lanes each take the next session and run its turns
    in order (``PointLoad``). Open loop: each session in ``open_sessions``
    (default all) starts at its arrival offset from ``t_start``;
    ``max_in_flight`` caps requests in flight. ``t_start`` is on the run clock
    (``perf_counter() - t0``). ``workload``, when given, lets a timed trace
    supply its own arrival times. ``salt`` (the run's attempt number) makes the
    prompts of a resumed attempt new to the server. ``stop`` ends the point
    from outside (Ctrl-C, a lost coordinator).
    """
    load = PointLoad(point, sessions, counters, t_start=t_start)
    prompts = Prompts(cfg, salt)
    perf = time.perf_counter
    fast = FastHTTP(cfg.base_url, t0) if cfg.base_url.startswith("http://") and fastpath.AVAILABLE else None
    sem = asyncio.Semaphore(max_in_flight) if max_in_flight else None
    async with aiohttp.ClientSession(connector=make_connector(), timeout=make_timeout(cfg),
                                     auto_decompress=False, skip_auto_headers=("User-Agent",)) as http:

        async def send(s: Send) -> RequestRecord:
            if fast is not None:
                return await send_request_fast(fast, cfg, prompts, s.spec, point=point.index, t0=t0,
                                               warmup=s.warmup, worker=worker)
            return await send_request(http, cfg, prompts, s.spec, point=point.index, t0=t0, warmup=s.warmup,
                                      worker=worker)

        async def follow(turn: Turn | None, after: Awaitable[None] | None = None,
                         admitted: asyncio.Future[None] | None = None) -> None:
            """Send ``turn`` when due and whatever follows it (the session's turns, a lane's next sessions). An
            open-loop arrival is admitted once the arrival before it was (``after``), and says so (``admitted``)."""
            while turn is not None and not stop():
                await sleep_until(turn.t, t0)
                if after is not None:
                    await after
                    after = None
                s = None if stop() else load.admit(turn, perf() - t0)
                if admitted is not None:
                    admitted.set_result(None)
                    admitted = None
                if s is None:
                    return
                if sem is None:
                    rec = await send(s)
                else:
                    async with sem:
                        rec = await send(s)
                on_record(rec)
                turn = load.after(s, rec.t_done if rec.t_done is not None else perf() - t0)

        try:
            if load.closed:
                await run_lanes(load, load.lane_starts(lanes), follow)
            else:
                await run_arrivals(load, load.arrivals(seed, workload, open_sessions), follow, stop, t0)
        finally:
            if fast is not None:
                fast.close()


Follow = Callable[[Turn, Awaitable[None] | None, asyncio.Future[None]], Awaitable[None]]


async def run_lanes(load: PointLoad, starts: Sequence[Turn], follow: Callable[[Turn], Awaitable[None]]) -> None:
    """Closed loop: each lane's turns in a task of its own. The first lane to fail (a record that cannot be written,
    no socket left) ends the point for the others (``load.end``), and its error is raised once every lane has
    finished the request it had in flight: a plain ``gather`` raised the first error at once and left the other
    lanes' (the same full disk) unretrieved, which asyncio printed as a traceback at shutdown beside the one-line
    error."""
    failure: list[BaseException] = []

    async def lane(turn: Turn) -> None:
        try:
            await follow(turn)
        except Exception as e:
            if not failure:
                failure.append(e)
            load.end()

    await asyncio.gather(*(lane(turn) for turn in starts))
    if failure:
        raise failure[0]


async def run_arrivals(load: PointLoad, arrivals: Iterable[Turn], follow: Follow, stop: Callable[[], bool],
                       t0: float) -> None:
    """Start each arrival's session at its time, in order, without creating 100k sleeping tasks at once.

    Each arrival is admitted (given its request id and slot) only after the one before it: on a loop running
    late, an arrival's task can start past its time and run before the timer of the one due earlier has fired,
    which sent the plan's requests out of order (1 run in 6 of the load-conformance test beside three busy
    processes). The first error of an arrival (no socket left) ends the point for every other arrival too
    (``load.end``) and is raised once those in flight end.
    """
    perf = time.perf_counter
    tasks: set[asyncio.Task] = set()
    failure: list[BaseException] = []
    before: asyncio.Future[None] | None = None

    async def arrive(turn: Turn, after: asyncio.Future[None] | None, admitted: asyncio.Future[None]) -> None:
        try:
            await follow(turn, after, admitted)
        finally:                                   # a failed or cancelled arrival lets the next one in too
            if not admitted.done():
                admitted.set_result(None)

    def settle(task: asyncio.Task) -> None:
        tasks.discard(task)
        if not task.cancelled() and task.exception() is not None and not failure:
            failure.append(task.exception())  # type: ignore[arg-type]
            load.end()

    for turn in arrivals:
        if stop() or load.over(perf() - t0):
            break
        delay = turn.t - (perf() - t0) - ARRIVAL_LEAD_S
        if delay > 0:
            await asyncio.sleep(delay)
        admitted = asyncio.get_running_loop().create_future()
        task = asyncio.ensure_future(arrive(turn, before, admitted))
        before = admitted
        tasks.add(task)
        task.add_done_callback(settle)
    if tasks:
        await asyncio.gather(*tasks, return_exceptions=True)
    if failure:
        raise failure[0]


def new_loop() -> asyncio.AbstractEventLoop:
    """uvloop when installed (faster I/O), else the default loop."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def run_async(coro) -> None:
    """Run ``coro`` to completion on a fresh (uv)loop; Ctrl-C cancels it and re-raises."""
    with asyncio.Runner(loop_factory=new_loop) as runner:
        runner.run(coro)
