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
``time.sleep`` up to ``spin_s`` before the due time, then spins on the clock
(``time.sleep`` itself overshoots by ~0.1 ms, and by up to ~1 ms when a
virtual CPU has gone idle). The loop blocks for at most the margin per event
time; responses that ended have been completed by then, because the task
yields once after every delivery.

Coalescing. Each advance hands a stream all of its events that became due,
and the stream writes them as one chunk. While the loop keeps pace that is one
chunk per engine step; when the per-token interval is shorter than what the
loop can turn around, the loop wakes after several of a stream's steps have
come due and they go out together, so coalescing happens exactly when, and
only as much as, pacing cannot be honoured.

Measured limit (bench/bench_emulator_pacing.py, 2-core shared VM, uvloop,
lockstep engine): the tokens of one step go out as sequential socket writes of
~10-25 µs each, so a step of N streams spreads over N × that. Under
``--realtime-priority`` (SCHED_FIFO) the p99 lag stayed under 1 ms up to 32
streams at 1 ms/token (32k tokens/s, p99 0.37 ms) and 64 streams at 1 ms/token
(64k tokens/s, p99 0.93 ms) with 1.00-1.02 tokens per chunk; 64 streams at
2-4 ms/token measured p99 1.0-1.5 ms (an idle virtual CPU wakes late). At normal
priority on a busy host, other processes set the tail (p99 3-40 ms) and chunks
coalesce to 1.9-3 tokens at 64 streams × 1-2 ms.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from scoville.emulator.prom import Histogram
from scoville.sim.engine_api import ServingEngine, TokenEvent
from scoville.workload.spec import RequestSpec

log = logging.getLogger("scoville.emulator")


class Stream:
    """One request's consumer of token events.

    ``on_events`` is called synchronously by the loop with every event of this
    request that became due in one advance (usually one; several only when the
    loop fell behind, and then they go out as one chunk). Writing from inside
    the loop, rather than waking a handler task per token, is what keeps 64
    streams within a fraction of a millisecond of the schedule. ``done``
    resolves when the request finished, failed, or was cancelled.
    """

    __slots__ = ("request_id", "on_events", "done")

    def __init__(self, request_id: str, on_events: Callable[[list[TokenEvent]], bool],
                 done: asyncio.Future[None]) -> None:
        self.request_id = request_id
        self.on_events = on_events   # returns True once the request is over
        self.done = done


class RealTimeLoop:
    """Owns ``engine``; all calls into it happen on one event loop, so no locking is needed."""

    def __init__(self, engine: ServingEngine, *, coarse_margin_s: float = 0.0015, spin_s: float = 0.0002,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.engine = engine
        self.coarse_margin_s = coarse_margin_s
        self.spin_s = spin_s
        self._clock = clock
        self.t0 = clock()
        self._streams: dict[str, Stream] = {}
        self._wake: asyncio.Future[bool] | None = None
        self._task: asyncio.Task[None] | None = None
        self.engine_failures = 0
        # Wall time of each engine.advance() call: time the loop could not release tokens.
        self.advance_seconds: Histogram | None = None

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

    def submit(self, spec: RequestSpec, on_events: Callable[[list[TokenEvent]], bool]) -> asyncio.Future[None]:
        """Queue ``spec`` now; ``on_events`` receives its tokens when due. Returns the ``done`` future."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._streams[spec.request_id] = Stream(spec.request_id, on_events, done)
        self.engine.submit(spec, self.now())
        self._poke()
        return done

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
        groups: dict[str, list[TokenEvent]] = {}
        for ev in events:
            g = groups.get(ev.request_id)
            if g is None:
                groups[ev.request_id] = [ev]
            else:
                g.append(ev)
        streams = self._streams
        for rid, evs in groups.items():
            s = streams.get(rid)
            if s is None:
                continue
            try:
                over = s.on_events(evs)
            except Exception as e:  # a broken stream (e.g. its socket closed) ends alone
                log.debug("stream %s failed: %r", rid, e)
                self.cancel(rid)
                if not s.done.done():
                    s.done.set_exception(e)
                continue
            if over:
                streams.pop(rid, None)
                if not s.done.done():
                    s.done.set_result(None)

    def _fail_all(self, message: str) -> None:
        """The engine raised: end every stream with an error rather than leave it hanging."""
        now = self.now()
        streams, self._streams = self._streams, {}
        for rid, s in streams.items():
            try:
                s.on_events([TokenEvent(request_id=rid, t=now, count=0, finished=True, error=message)])
            except Exception:
                log.debug("stream %s failed while ending", rid)
            if not s.done.done():
                s.done.set_result(None)

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
        if delay > self.spin_s:
            time.sleep(delay - self.spin_s)
        clock, t_abs = self._clock, t + self.t0
        while clock() < t_abs:  # the last ``spin_s``: a spinning core wakes on time, a sleeping one may not
            pass

    async def _run(self) -> None:
        engine = self.engine
        while True:
            try:
                t_call = self._clock()
                events = engine.advance(t_call - self.t0)
                if self.advance_seconds is not None:
                    self.advance_seconds.observe(self._clock() - t_call)
                if events:
                    self._deliver(events)
                nxt = engine.next_event_time()
            except Exception as e:  # the server must outlive an engine bug
                self.engine_failures += 1
                log.exception("engine failed; ending the requests in flight")
                self._fail_all(f"emulator engine failure: {type(e).__name__}: {e}")
                nxt = None
            # Let handlers whose requests just ended finish their responses before any blocking wait.
            await asyncio.sleep(0)
            if nxt is None:
                await self._wait(None)
            else:
                await self._sleep_until(nxt)


def _resolve(fut: asyncio.Future[bool]) -> None:
    if not fut.done():
        fut.set_result(True)
