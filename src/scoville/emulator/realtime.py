"""Drive a ServingEngine in step with the wall clock and hand each token event to its stream.

One asyncio task owns the engine. It repeatedly advances the engine to *now*,
delivers the events that became due, and waits until the engine's next event
(or until a new request arrives and may change the schedule). Engine time is
``time.perf_counter() - t0`` seconds, so the schedule and the send times of
tokens are on one clock and the lag between them can be measured.

Waiting. A core that goes idle wakes late: on the 2-vCPU VMs this was
measured on, an epoll or ``time.sleep`` timeout of 1-10 ms overshoots by
~0.1-0.2 ms at the median but 2-3 ms at p99 and up to 9 ms at the worst
(the hypervisor has to reschedule a halted vCPU). So the loop lets the core
idle only while the next event is more than ``spin_horizon_s`` away, and
wakes that much early; inside the horizon it stays on the CPU, serving
sockets with zero-timeout loop iterations until ``spin_s`` before the event
and then spinning on the clock alone, so no handler can start in the last
moments. The price is one busy core while steps are shorter than the horizon
and requests are in flight; an idle server blocks as usual.

Delivering. At an event time the loop first takes only the events due then
(``advance(due)``), writes every stream's chunk, and only afterwards lets
the engine start the steps that began meanwhile (``advance(now)``) and runs
each stream's bookkeeping (``Stream.settle``: latency histograms). Before it
waits, it asks the engine for the events of the step now under way
(``peek``) and each stream renders its next chunk (``Stream.prepare``). So
step planning, JSON rendering and metrics never sit between the schedule
and the socket writes. A step's tokens still leave as one socket write per
stream, in sequence, so the last stream of a step of N waits for the N - 1
writes before it (~7-10 µs each on loopback).

Collecting. The cyclic garbage collector runs only between events, in the
time the next event leaves (see :mod:`scoville.emulator.collector`).

Coalescing. Each advance hands a stream all of its events that became due,
and the stream writes them as one chunk. While the loop keeps pace that is one
chunk per engine step; when the per-token interval is shorter than what the
loop can turn around, the loop wakes after several of a stream's steps have
come due and they go out together, so coalescing happens exactly when, and
only as much as, pacing cannot be honoured.

Measured limits (bench/bench_emulator_pacing.py): see docs/emulator.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Callable

from scoville.emulator.collector import SlackCollector
from scoville.emulator.prom import Histogram
from scoville.sim.engine_api import ServingEngine, TokenEvent
from scoville.workload.spec import RequestSpec

log = logging.getLogger("scoville.emulator")

# An idle loop still wakes this often, so garbage that request handlers leave (a server only scraped for
# /metrics, say) is collected although automatic collection is off.
_IDLE_WAKE_S = 1.0


class Stream:
    """One request's consumer of token events.

    ``on_events`` is called synchronously by the loop with every event of this
    request that became due in one advance (usually one; several only when the
    loop fell behind, and then they go out as one chunk); it writes and returns
    True once the request is over. Writing from inside the loop, rather than
    waking a handler task per token, is what keeps 64 streams within a fraction
    of a millisecond of the schedule. The optional hooks keep work away from
    that moment: ``prepare`` gets the events expected next while the loop
    waits for them (to render the chunk ahead), ``settle`` runs after every
    stream due at that moment has been written (bookkeeping). ``done``
    resolves when the request finished, failed, or was cancelled.
    """

    __slots__ = ("request_id", "on_events", "prepare", "settle", "done")

    def __init__(self, request_id: str, on_events: Callable[[list[TokenEvent]], bool],
                 prepare: Callable[[list[TokenEvent]], None] | None, settle: Callable[[], None] | None,
                 done: asyncio.Future[None]) -> None:
        self.request_id = request_id
        self.on_events = on_events
        self.prepare = prepare
        self.settle = settle
        self.done = done


class RealTimeLoop:
    """Owns ``engine``; all calls into it happen on one event loop, so no locking is needed."""

    def __init__(self, engine: ServingEngine, *, spin_horizon_s: float = 0.005, spin_s: float = 0.0002,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        if spin_horizon_s < 0 or spin_s < 0:
            raise ValueError(f"spin_horizon_s and spin_s must be >= 0 (got {spin_horizon_s}, {spin_s})")
        self.engine = engine
        self.spin_horizon_s = spin_horizon_s
        self.spin_s = spin_s
        self._clock = clock
        self.t0 = clock()
        self._streams: dict[str, Stream] = {}
        self._wake: asyncio.Future[bool] | None = None
        self._poked = False
        self._task: asyncio.Task[None] | None = None
        self.engine_failures = 0
        self.collector = SlackCollector(clock=clock)
        # Wall time of each engine.advance() call.
        self.advance_seconds: Histogram | None = None

    def now(self) -> float:
        """Seconds on the engine's clock."""
        return self._clock() - self.t0

    def start(self) -> None:
        self.collector.start()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="scoville-engine-loop")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
            self.collector.stop()

    @property
    def active(self) -> int:
        return len(self._streams)

    def submit(self, spec: RequestSpec, on_events: Callable[[list[TokenEvent]], bool], *,
               prepare: Callable[[list[TokenEvent]], None] | None = None,
               settle: Callable[[], None] | None = None) -> asyncio.Future[None]:
        """Queue ``spec`` now; ``on_events`` receives its tokens when due (see :class:`Stream`).

        Returns the ``done`` future.
        """
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._streams[spec.request_id] = Stream(spec.request_id, on_events, prepare, settle, done)
        self.engine.submit(spec, self.now())
        self._poke()
        return done

    def cancel(self, request_id: str) -> None:
        """Free the request's slot and KV blocks now (client went away or the handler failed)."""
        if self._streams.pop(request_id, None) is not None:
            self.engine.cancel(request_id, self.now())
            self._poke()

    def _poke(self) -> None:
        self._poked = True
        w = self._wake
        if w is not None and not w.done():
            w.set_result(False)

    def _advance(self, until: float) -> list[TokenEvent]:
        if self.advance_seconds is None:
            return self.engine.advance(until)
        t = self._clock()
        events = self.engine.advance(until)
        self.advance_seconds.observe(self._clock() - t)
        return events

    def _prepare(self, until: float) -> None:
        """Let each stream render the events already fixed to come due by ``until``."""
        streams = self._streams
        for rid, evs in _by_request(self.engine.peek(until)).items():
            s = streams.get(rid)
            if s is not None and s.prepare is not None:
                try:
                    s.prepare(evs)
                except Exception:  # rendering again when due will raise where it is handled
                    log.debug("stream %s failed to prepare", rid, exc_info=True)

    def _deliver(self, events: list[TokenEvent]) -> None:
        """Write every stream's due events (one chunk each), then settle the streams that were written."""
        streams = self._streams
        written: list[Stream] = []
        for rid, evs in _by_request(events).items():
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
            if s.settle is not None:
                written.append(s)
            if over:
                streams.pop(rid, None)
                if not s.done.done():
                    s.done.set_result(None)
        for s in written:
            try:
                s.settle()  # type: ignore[misc]
            except Exception:
                log.exception("bookkeeping of stream %s failed", s.request_id)

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
        if self._poked:
            return False
        loop = asyncio.get_running_loop()
        self._wake = fut = loop.create_future()
        handle = loop.call_later(timeout, _resolve, fut) if timeout is not None else None
        try:
            return await fut
        finally:
            if handle is not None:
                handle.cancel()
            self._wake = None

    async def _sleep_until(self, t: float) -> bool:
        """Return at engine time ``t`` (True), or earlier when a submit/cancel may have changed the schedule."""
        delay = t - self.now()
        if delay > self.spin_horizon_s and not await self._wait(delay - self.spin_horizon_s):
            return False
        clock, t_abs = self._clock, t + self.t0
        io_until = t_abs - self.spin_s
        while clock() < io_until:  # stay on the CPU, but keep accepting requests and reading sockets
            await asyncio.sleep(0)
            if self._poked:
                return False
        while clock() < t_abs:  # the last ``spin_s``: nothing else may start now
            pass
        return True

    async def _run(self) -> None:
        due: float | None = None  # the event time the loop waited for, when it got there
        while True:
            self._poked = False  # a submit or cancel from here on re-plans before the next wait
            try:
                now = self.now()
                events = self._advance(now if due is None else min(due, now))
                if events:
                    self._deliver(events)
                # Steps that started at or after ``due`` are planned only now, after the writes.
                late = self._advance(self.now())
                if late:
                    self._deliver(late)
                nxt = self.engine.next_event_time()
                if nxt is not None:
                    self._prepare(nxt)
            except Exception as e:  # the server must outlive an engine bug
                self.engine_failures += 1
                log.exception("engine failed; ending the requests in flight")
                self._fail_all(f"emulator engine failure: {type(e).__name__}: {e}")
                nxt = None
            # Let handlers whose requests just ended finish their responses, then collect garbage in the slack.
            await asyncio.sleep(0)
            slack = math.inf if nxt is None else nxt - self.now() - self.spin_s
            self.collector.collect(slack, idle=not self._streams)
            if nxt is None:
                due = None
                await self._wait(_IDLE_WAKE_S)
            else:
                due = nxt if await self._sleep_until(nxt) else None


def _by_request(events: list[TokenEvent]) -> dict[str, list[TokenEvent]]:
    """Events grouped per request, in order of each request's first event."""
    groups: dict[str, list[TokenEvent]] = {}
    for ev in events:
        g = groups.get(ev.request_id)
        if g is None:
            groups[ev.request_id] = [ev]
        else:
            g.append(ev)
    return groups


def _resolve(fut: asyncio.Future[bool]) -> None:
    if not fut.done():
        fut.set_result(True)
