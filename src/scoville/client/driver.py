"""Load drivers: closed loop (C lanes of sessions) and open loop (sessions at arrival times).

One coroutine, ``drive_point``, runs a point inside one event loop; worker
processes (``scoville.client.workers``) run the same coroutine with a share of
the lanes and shared counters, so the request count, the warm-up flags and the
stop conditions hold across all of them exactly as in one process.

Counters hand out session indices and request send slots: the n-th request
sent in a point (over all lanes and workers) is warm-up when
``n < point.warmup_requests``, and no request is sent once
``point.total_requests`` have been or the point's duration has passed.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable, Protocol, Sequence

import aiohttp

from scoville.client.config import ClientConfig
from scoville.client import fastpath
from scoville.client.fastpath import KEEPALIVE_IDLE_S, FastHTTP
from scoville.client.request import Prompts, send_request, send_request_fast
from scoville.load import LoadPoint, session_start_offsets
from scoville.results.schema import RequestRecord
from scoville.workload.spec import RequestSpec, Session

# A point bounded only by --duration draws this many sessions up front (its request cap).
DURATION_ONLY_SESSIONS = 100_000


class Counters(Protocol):
    def take_session(self) -> int | None: ...
    def take_request(self) -> int | None: ...


class LocalCounters:
    """Counters for a point driven by one process."""

    def __init__(self, sessions: int, requests: int | None) -> None:
        self._sessions, self._requests = sessions, requests
        self._next_session = self._next_request = 0

    def take_session(self) -> int | None:
        if self._next_session >= self._sessions:
            return None
        self._next_session += 1
        return self._next_session - 1

    def take_request(self) -> int | None:
        if self._requests is not None and self._next_request >= self._requests:
            return None
        self._next_request += 1
        return self._next_request - 1


def request_cap(point: LoadPoint) -> int | None:
    """How many requests the point sends; None when only its duration bounds it."""
    if point.num_requests == 0 and point.duration_s:
        return None
    return point.total_requests


def session_count(point: LoadPoint) -> int:
    if point.sessions is not None:
        return point.sessions
    cap = request_cap(point)
    return DURATION_ONLY_SESSIONS if cap is None else cap


def point_sessions(workload, point: LoadPoint) -> list[Session]:
    """The sessions a point draws (each point its own reproducible stream)."""
    return workload.sessions(session_count(point), stream=point.index)


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
    counters: Counters,
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
    in order, sleeping ``think_s`` before every turn after the first. Open
    loop: each session in ``open_sessions`` (default all) starts at its
    arrival offset from ``t_start``; ``max_in_flight`` caps requests in flight.
    ``t_start`` is on the run clock (``perf_counter() - t0``). ``workload``,
    when given, lets a timed trace supply its own arrival times. ``salt`` (the
    run's attempt number) makes the prompts of a resumed attempt new to the server.
    """
    prompts = Prompts(cfg, salt)
    deadline = t_start + point.duration_s if point.duration_s else None
    perf = time.perf_counter

    exhausted = False
    failure: list[BaseException] = []  # the first error of an open-loop arrival (no socket left): ends the point

    def over() -> bool:
        return exhausted or bool(failure) or stop() or (deadline is not None and perf() - t0 >= deadline)

    fast = FastHTTP(cfg.base_url, t0) if cfg.base_url.startswith("http://") and fastpath.AVAILABLE else None
    async with aiohttp.ClientSession(connector=make_connector(), timeout=make_timeout(cfg),
                                     auto_decompress=False, skip_auto_headers=("User-Agent",)) as http:

        async def send(spec: RequestSpec, warmup: bool) -> RequestRecord:
            if fast is not None:
                return await send_request_fast(fast, cfg, prompts, spec, point=point.index, t0=t0,
                                               warmup=warmup, worker=worker)
            return await send_request(http, cfg, prompts, spec, point=point.index, t0=t0, warmup=warmup,
                                      worker=worker)

        sem = asyncio.Semaphore(max_in_flight) if max_in_flight else None

        async def run_session(session: Session) -> bool:
            """Turns of one session in order; False once the point is over."""
            nonlocal exhausted
            t_prev_done = None
            for k, spec in enumerate(session.requests):
                if k and spec.think_s > 0 and t_prev_done is not None:
                    await sleep_until(t_prev_done + spec.think_s, t0)
                if over():
                    return False
                n = counters.take_request()
                if n is None:
                    exhausted = True
                    return False
                if sem is None:
                    rec = await send(spec, n < point.warmup_requests or spec.warmup)
                else:
                    async with sem:
                        rec = await send(spec, n < point.warmup_requests or spec.warmup)
                t_prev_done = rec.t_done
                on_record(rec)
            return True

        if point.rate is None:
            async def lane() -> None:
                while not over():
                    i = counters.take_session()
                    if i is None or not await run_session(sessions[i]):
                        return

            try:
                await asyncio.gather(*(lane() for _ in range(lanes)))
            finally:
                if fast is not None:
                    fast.close()
            return

        offsets = session_start_offsets(point, len(sessions), seed, workload)
        chosen = range(len(sessions)) if open_sessions is None else open_sessions

        async def arrival(i: int) -> None:
            await sleep_until(t_start + float(offsets[i]), t0)
            if not over():
                await run_session(sessions[i])

        def settle(task: asyncio.Task, tasks: set[asyncio.Task]) -> None:
            tasks.discard(task)
            if not task.cancelled() and task.exception() is not None and not failure:
                failure.append(task.exception())  # retrieved here, raised once the arrivals in flight end

        async def schedule() -> None:
            # Start arrivals in order without creating 100k sleeping tasks at once.
            tasks: set[asyncio.Task] = set()
            for i in chosen:
                if over():
                    break
                delay = t_start + float(offsets[i]) - (perf() - t0) - 0.05
                if delay > 0:
                    await asyncio.sleep(delay)
                task = asyncio.ensure_future(arrival(i))
                tasks.add(task)
                task.add_done_callback(lambda t: settle(t, tasks))
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)
            if failure:
                raise failure[0]

        try:
            await schedule()
        finally:
            if fast is not None:
                fast.close()


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
