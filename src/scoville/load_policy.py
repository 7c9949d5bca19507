"""One load point's decisions, the same for every driver: what is sent when, what is warm-up, when the point ends.

The measuring client (``scoville.client.driver``) sends over HTTP in real time and the simulator
(``scoville.sim.driver``) submits to an engine in virtual time. Both ask a ``PointLoad`` what to do, so a
simulated point and a measured one differ only in where their timestamps come from, and a rule changed here
changes in both (``tests/emulator/test_load_conformance.py`` runs one plan through each and compares them):

* a point draws its sessions up front: one per request it may send, or ``DURATION_ONLY_SESSIONS`` when
  only its duration bounds it; it sends at most ``request_cap`` requests;
* closed loop: ``lanes`` lanes, each taking the next session and running its turns in order, the next
  session as soon as one ends; open loop: each session starts at its arrival time
  (``scoville.load.session_start_offsets``), and ``in_flight_cap`` (the point's concurrency, if set)
  bounds requests in flight;
* every turn after a session's first is due ``think_s`` after the previous turn finished;
* the n-th request sent in a point (over all lanes, and all workers sharing the counters) is warm-up
  when ``n < point.warmup_requests`` or its spec says so;
* no request is sent once the point is over: ``request_cap`` requests taken, its duration passed, or the
  driver ended it. A request admitted before that still goes out when the in-flight cap lets it.

What stays with each driver is the how: waiting (``asyncio`` sleeps, a virtual-time heap), sending (HTTP,
``engine.submit``), the in-flight cap's mechanism (a semaphore, a queue) and recording.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from scoville.load import LoadPoint, session_start_offsets
from scoville.workload.spec import RequestSpec, Session

# A point bounded only by --duration draws this many sessions up front (its request cap).
DURATION_ONLY_SESSIONS = 100_000


def request_cap(point: LoadPoint) -> int | None:
    """How many requests the point sends; None when only its duration bounds it."""
    if point.num_requests == 0 and point.duration_s:
        return None
    return point.total_requests


def session_count(point: LoadPoint) -> int:
    """Sessions the point draws: the trace's own count, its request cap, or a large pool for duration-only points."""
    if point.sessions is not None:
        return point.sessions
    cap = request_cap(point)
    return DURATION_ONLY_SESSIONS if cap is None else cap


def point_sessions(workload: Any, point: LoadPoint) -> list[Session]:
    """The sessions a point draws (each point its own reproducible stream, ``stream = point.index``)."""
    return workload.sessions(session_count(point), stream=point.index)


def lanes(point: LoadPoint) -> int:
    """Closed-loop lanes of the whole point (its concurrency; 1 when none is given)."""
    return point.concurrency or 1


def in_flight_cap(point: LoadPoint) -> int | None:
    """Open loop: the most requests in flight (``--max-concurrency``); None when uncapped or closed loop."""
    return point.concurrency if point.rate is not None else None


class SlotCounters(Protocol):
    """Session indices and request slots of one point, handed out in order; None once none is left.

    Shared by everything that drives the point together (``LocalSlots`` in one process, shared
    memory across ``scoville.client.workers``), so caps and warm-up hold over all of them.
    """

    def take_session(self) -> int | None: ...
    def take_request(self) -> int | None: ...


class LocalSlots:
    """Slot counters for a point driven by one process (or one share of it)."""

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


@dataclass(frozen=True, slots=True)
class Turn:
    """A session's turn that is due: at run-clock time ``t``, turn ``turn`` of session ``session`` (an index
    into the point's session list)."""

    t: float
    session: int
    turn: int


@dataclass(frozen=True, slots=True)
class Send:
    """A turn admitted for sending: the request and whether it is warm-up."""

    turn: Turn
    spec: RequestSpec
    warmup: bool


class PointLoad:
    """The load policy of one point (or one driver's share of it) while it runs.

    A driver starts the turns ``lane_starts`` (closed loop) or ``arrivals`` (open loop) give, waits until
    each is due, asks ``admit`` whether to send it (None: the point is over), sends, and hands the
    finished send to ``after`` for the session's next turn, or the lane's next session (None: nothing
    more on this path). ``t_start`` and every time are on the driver's run clock.
    """

    def __init__(self, point: LoadPoint, sessions: Sequence[Session], counters: SlotCounters, *,
                 t_start: float) -> None:
        self.point, self.sessions, self.counters, self.t_start = point, sessions, counters, t_start
        self.deadline = t_start + point.duration_s if point.duration_s else None
        self.closed = point.rate is None
        self._ended = False
        # Sessions under way, by index: ``sessions`` is read once per session, when its first turn is admitted
        # (the Ray coordinator's session view notes that moment as the session's start).
        self._live: dict[int, Session] = {}

    def over(self, now: float) -> bool:
        """True once nothing more may be sent: the cap was reached, the duration passed, or ``end`` was called."""
        return self._ended or (self.deadline is not None and now >= self.deadline)

    def end(self) -> None:
        """End the point for every path of this driver (the client does when an arrival fails outright)."""
        self._ended = True

    def lane_starts(self, count: int) -> list[Turn]:
        """Closed loop: the first turns of ``count`` lanes at ``t_start`` (fewer when sessions run out)."""
        starts = []
        for _ in range(count):
            turn = self._next_session(self.t_start)
            if turn is None:
                break
            starts.append(turn)
        return starts

    def arrivals(self, seed: int, workload: Any = None, chosen: Iterable[int] | None = None) -> Iterator[Turn]:
        """Open loop: the first turn of each session in ``chosen`` (default all), in order, at its arrival time.

        ``workload``, when it is a timed trace, supplies the arrival shape; ``seed`` draws the gamma/Poisson
        process otherwise (``scoville.load.session_start_offsets``). A generator: 100k sessions are not
        materialised as turns up front.
        """
        offsets = session_start_offsets(self.point, len(self.sessions), seed, workload)
        for i in range(len(self.sessions)) if chosen is None else chosen:
            yield Turn(self.t_start + float(offsets[i]), i, 0)

    def admit(self, turn: Turn, now: float) -> Send | None:
        """The request to send for ``turn`` at ``now``, taking the point's next request slot; None once over."""
        if self.over(now):
            return None
        session = self._live.get(turn.session)
        if session is None:
            session = self._live[turn.session] = self.sessions[turn.session]
        n = self.counters.take_request()
        if n is None:
            self._ended = True
            return None
        spec = session.requests[turn.turn]
        return Send(turn, spec, n < self.point.warmup_requests or spec.warmup)

    def after(self, sent: Send, t_done: float) -> Turn | None:
        """What follows ``sent``, finished at ``t_done``: its session's next turn after the think time, else
        (closed loop) the lane's next session at once; None when this path has nothing more to send."""
        index, k = sent.turn.session, sent.turn.turn + 1
        turns = self._live[index].requests
        if k < len(turns):
            return Turn(t_done + turns[k].think_s, index, k)
        del self._live[index]
        return self._next_session(t_done) if self.closed else None

    def _next_session(self, t: float) -> Turn | None:
        if self.over(t):
            return None
        i = self.counters.take_session()
        return None if i is None else Turn(t, i, 0)
