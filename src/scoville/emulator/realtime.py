"""Drive a ServingEngine in step with the wall clock and hand each token event to its stream.

One asyncio task owns the engine. It repeatedly advances the engine to *now*,
delivers the events that became due, and sleeps until the engine's next event
(or until a new request arrives and may change the schedule). Engine time is
``time.perf_counter() - t0`` seconds, so the schedule and the send times of
tokens are on one clock and the lag between them can be measured.

Timer precision. asyncio's selector rounds its timeout up to whole
milliseconds (epoll takes ms), so a plain ``call_later`` wakes up to ~1 ms late.
To release tokens within a fraction of a millisecond, the loop wakes
``coarse_margin_s`` early through asyncio and covers the rest with a blocking
``time.sleep`` (nanosecond clock, ~60 µs overshoot on Linux). The loop blocks
for at most that margin per event time; handlers have already written the
previous tokens by then, because the task yields once after every delivery.

Coalescing. Events are appended to their stream and the stream's handler wakes
and writes everything pending as one chunk. While the loop keeps pace, that is
one chunk per engine step; when the per-token interval is shorter than what the
loop can turn around, several steps' tokens are pending by the time a handler
runs and go out together — coalescing happens exactly when, and only as much
as, pacing cannot be honoured.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from scoville.sim.engine_api import ServingEngine, TokenEvent
from scoville.workload.spec import RequestSpec

log = logging.getLogger("scoville.emulator")


class Stream:
    """Token events of one request, buffered until its handler takes them."""

    __slots__ = ("request_id", "pending", "_waiter", "finished")

    def __init__(self, request_id: str) -> None:
        self.request_id = request_id
        self.pending: list[TokenEvent] = []
        self._waiter: asyncio.Future[None] | None = None
        self.finished = False

    def push(self, event: TokenEvent) -> None:
        self.pending.append(event)
        if event.finished or event.error is not None:
            self.finished = True
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    async def take(self) -> list[TokenEvent]:
        """Every event delivered since the last call; waits for at least one."""
        if not self.pending:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        batch, self.pending = self.pending, []
        return batch


class RealTimeLoop:
    """Owns ``engine``; all calls into it happen on one event loop, so no locking is needed."""

    def __init__(self, engine: ServingEngine, *, coarse_margin_s: float = 0.0015,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.engine = engine
        self.coarse_margin_s = coarse_margin_s
        self._clock = clock
        self.t0 = clock()
        self._streams: dict[str, Stream] = {}
        self._wake: asyncio.Future[bool] | None = None
        self._task: asyncio.Task[None] | None = None
        self.engine_failures = 0

    def now(self) -> float:
        """Seconds on the engine's clock."""
        return self._clock() - self.t0

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="scoville-engine-loop")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    @property
    def active(self) -> int:
        return len(self._streams)

    def submit(self, spec: RequestSpec) -> Stream:
        stream = Stream(spec.request_id)
        self._streams[spec.request_id] = stream
        self.engine.submit(spec, self.now())
        self._poke()
        return stream

    def cancel(self, request_id: str) -> None:
        """Free the request's slot and KV blocks now (client went away or the handler failed)."""
        if self._streams.pop(request_id, None) is not None:
            self.engine.cancel(request_id, self.now())
            self._poke()

    def _poke(self) -> None:
        w = self._wake
        if w is not None and not w.done():
            w.set_result(False)

    def _deliver(self, events: list[TokenEvent]) -> None:
        streams = self._streams
        for ev in events:
            s = streams.get(ev.request_id)
            if s is None:
                continue
            s.push(ev)
            if s.finished:
                del streams[ev.request_id]

    def _fail_all(self, message: str) -> None:
        """The engine raised: end every stream with an error rather than leave it hanging."""
        now = self.now()
        for rid, s in list(self._streams.items()):
            s.push(TokenEvent(request_id=rid, t=now, count=0, finished=True, error=message))
        self._streams.clear()

    async def _wait(self, timeout: float | None) -> bool:
        """Wait until ``timeout`` passes (True) or a submit/cancel pokes the loop (False)."""
        loop = asyncio.get_running_loop()
        self._wake = fut = loop.create_future()
        handle = loop.call_later(timeout, _resolve, fut) if timeout is not None else None
        try:
            return await fut
        finally:
            if handle is not None:
                handle.cancel()
            self._wake = None

    async def _sleep_until(self, t: float) -> None:
        delay = t - self.now()
        if delay > self.coarse_margin_s:
            if not await self._wait(delay - self.coarse_margin_s):
                return  # poked: the schedule may have changed
            delay = t - self.now()
        if delay > 0:
            time.sleep(delay)

    async def _run(self) -> None:
        engine = self.engine
        while True:
            try:
                events = engine.advance(self.now())
                if events:
                    self._deliver(events)
                nxt = engine.next_event_time()
            except Exception as e:  # the server must outlive an engine bug
                self.engine_failures += 1
                log.exception("engine failed; ending the requests in flight")
                self._fail_all(f"emulator engine failure: {type(e).__name__}: {e}")
                nxt = None
            # Let the handlers write what was just delivered before any blocking wait.
            await asyncio.sleep(0)
            if nxt is None:
                await self._wait(None)
            else:
                await self._sleep_until(nxt)


def _resolve(fut: asyncio.Future[bool]) -> None:
    if not fut.done():
        fut.set_result(True)
