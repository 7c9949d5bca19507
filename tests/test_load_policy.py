"""The load policy both drivers follow (``scoville.load_policy``), exercised on its own: no I/O, no clock, no engine."""

from __future__ import annotations

import numpy as np
import pytest

from scoville.load import LoadPoint, session_start_offsets
from scoville.load_policy import (
    DURATION_ONLY_SESSIONS,
    LocalSlots,
    PointLoad,
    Send,
    Turn,
    in_flight_cap,
    lanes,
    request_cap,
    session_count,
)
from scoville.workload.spec import RequestSpec, Session


def sessions(*turns: int, think: float = 0.0, warm: tuple[str, ...] = ()) -> list[Session]:
    """Sessions of the given numbers of turns; request ids ``s<i>t<k>``, every later turn thinking ``think`` s."""
    out = []
    for i, n in enumerate(turns):
        specs = tuple(RequestSpec(request_id=f"s{i}t{k}", input_tokens=8, output_tokens=2, session_id=f"s{i}", turn=k,
                                  think_s=think if k else 0.0, warmup=f"s{i}t{k}" in warm) for k in range(n))
        out.append(Session(session_id=f"s{i}", requests=specs))
    return out


def policy(point: LoadPoint, sess: list[Session], t_start: float = 10.0, counters: LocalSlots | None = None):
    return PointLoad(point, sess, counters or LocalSlots(len(sess), request_cap(point)), t_start=t_start)


def test_caps_and_session_counts_of_a_point():
    counted = LoadPoint(index=0, concurrency=4, num_requests=10, warmup_requests=3)
    assert (request_cap(counted), session_count(counted)) == (13, 13)
    timed = LoadPoint(index=0, concurrency=4, num_requests=0, duration_s=5.0)
    assert (request_cap(timed), session_count(timed)) == (None, DURATION_ONLY_SESSIONS)
    both = LoadPoint(index=0, concurrency=4, num_requests=7, duration_s=5.0)  # a count bounds it too
    assert request_cap(both) == 7
    trace = LoadPoint(index=0, rate=2.0, num_requests=9, sessions=3)
    assert (request_cap(trace), session_count(trace)) == (9, 3)
    assert (lanes(counted), lanes(LoadPoint(index=0, rate=1.0)), in_flight_cap(counted)) == (4, 1, None)
    assert in_flight_cap(LoadPoint(index=0, rate=1.0, concurrency=3)) == 3


def test_closed_loop_lanes_start_on_the_first_sessions_and_take_the_next_when_one_ends():
    load = policy(LoadPoint(index=0, concurrency=2, num_requests=4), sessions(1, 1, 1, 1))
    starts = load.lane_starts(2)
    assert starts == [Turn(10.0, 0, 0), Turn(10.0, 1, 0)]
    sent = load.admit(starts[1], 10.0)
    assert sent is not None and sent.spec.request_id == "s1t0"
    assert load.after(sent, 12.5) == Turn(12.5, 2, 0)  # the lane's next session, at once


def test_lanes_beyond_the_sessions_do_not_start():
    load = policy(LoadPoint(index=0, concurrency=5, num_requests=2), sessions(1, 1))
    assert [t.session for t in load.lane_starts(5)] == [0, 1]


def test_a_sessions_next_turn_is_due_its_think_time_after_the_reply():
    load = policy(LoadPoint(index=0, rate=1.0, num_requests=3), sessions(3, think=0.75))
    (first,) = list(load.arrivals(seed=0))
    sent = load.admit(first, first.t)
    second = load.after(sent, 11.0)
    assert second == Turn(11.75, 0, 1)
    third = load.after(load.admit(second, 11.75), 12.0)
    assert third == Turn(12.75, 0, 2)
    assert load.after(load.admit(third, 12.75), 13.0) is None  # open loop: the session ends, nothing follows


def test_the_first_warmup_requests_sent_are_warmup_over_every_lane_and_sharer():
    point = LoadPoint(index=0, concurrency=2, num_requests=3, warmup_requests=2)
    sess = sessions(1, 1, 1, 1, 1)
    shared = LocalSlots(len(sess), request_cap(point))
    a, b = policy(point, sess, counters=shared), policy(point, sess, counters=shared)  # two workers, one point
    flags = []
    for load in (a, b, a, b):
        (turn,) = load.lane_starts(1)
        flags.append(load.admit(turn, 10.0).warmup)
    assert flags == [True, True, False, False]


def test_a_spec_marked_warmup_stays_warmup():
    load = policy(LoadPoint(index=0, concurrency=1, num_requests=2), sessions(2, warm=("s0t1",)))
    (turn,) = load.lane_starts(1)
    first = load.admit(turn, 10.0)
    second = load.admit(load.after(first, 10.5), 10.5)
    assert (first.warmup, second.warmup) == (False, True)


def test_the_request_cap_ends_the_point_for_every_lane_even_mid_session():
    load = policy(LoadPoint(index=0, concurrency=2, num_requests=3), sessions(2, 2, 2))
    a, b = load.lane_starts(2)
    sa, sb = load.admit(a, 10.0), load.admit(b, 10.0)
    third = load.admit(load.after(sa, 11.0), 11.0)
    assert third is not None and not load.over(11.0)
    assert load.admit(load.after(sb, 11.0), 11.0) is None  # the fourth request: over the cap
    assert load.over(11.0)
    assert load.after(third, 12.0) is None  # a lane whose session ended takes no new one once the point is over


def test_nothing_is_sent_from_the_deadline_on():
    load = policy(LoadPoint(index=0, concurrency=1, num_requests=10, duration_s=2.0), sessions(*[1] * 10))
    (turn,) = load.lane_starts(1)
    sent = load.admit(turn, 10.0)
    nxt = load.after(sent, 11.999)
    assert load.admit(nxt, 11.999) is not None
    late = Turn(12.0, 5, 0)
    assert load.over(12.0) and load.admit(late, 12.0) is None


def test_end_stops_every_path():
    load = policy(LoadPoint(index=0, rate=5.0, num_requests=4), sessions(1, 1, 1, 1))
    first, second, *_ = load.arrivals(seed=1)
    assert load.admit(first, first.t) is not None
    load.end()
    assert load.over(first.t) and load.admit(second, second.t) is None


def test_arrivals_are_the_plans_offsets_from_the_start_in_the_chosen_order():
    point = LoadPoint(index=2, rate=4.0, burstiness=0.5, num_requests=6)
    load = policy(point, sessions(*[1] * 6), t_start=3.0)
    offsets = session_start_offsets(point, 6, 9)
    turns = list(load.arrivals(seed=9))
    assert [t.session for t in turns] == list(range(6)) and all(t.turn == 0 for t in turns)
    assert np.allclose([t.t for t in turns], 3.0 + offsets)
    assert [t.session for t in load.arrivals(seed=9, chosen=[4, 1])] == [4, 1]  # a worker's share
    assert [t.t for t in load.arrivals(seed=9, chosen=[4, 1])] == [turns[4].t, turns[1].t]


class CountingSessions(list):
    """A session list that counts reads of each session (the Ray coordinator reads a read as the session's start)."""

    def __init__(self, items: list[Session]) -> None:
        super().__init__(items)
        self.reads: list[int] = []

    def __getitem__(self, i):  # type: ignore[override]
        self.reads.append(i)
        return super().__getitem__(i)


def test_each_session_is_read_once_when_its_first_turn_is_admitted():
    sess = CountingSessions(sessions(3, 2))
    load = policy(LoadPoint(index=0, concurrency=1, num_requests=5), sess)
    turn = load.lane_starts(1)[0]
    assert sess.reads == []   # taking a lane's session is not yet starting it
    while turn is not None:
        sent = load.admit(turn, turn.t)
        assert isinstance(sent, Send)
        turn = load.after(sent, turn.t + 1.0)
    assert sess.reads == [0, 1]


@pytest.mark.parametrize("concurrency", [1, 3])
def test_a_closed_loop_played_to_the_end_sends_exactly_the_cap_each_session_in_turn_order(concurrency):
    point = LoadPoint(index=0, concurrency=concurrency, num_requests=9, warmup_requests=2)
    load = policy(point, sessions(2, 3, 1, 4, 2, 2, 1, 3, 2, 1, 1))  # 21 turns: the cap ends it mid-way
    due = sorted(load.lane_starts(concurrency), key=lambda t: t.t)
    sent: list[Send] = []
    while due:   # every request takes 1 s; turns due at once go in lane order
        turn = due.pop(0)
        s = load.admit(turn, turn.t)
        if s is None:
            continue
        sent.append(s)
        if (nxt := load.after(s, turn.t + 1.0)) is not None:
            due = sorted(due + [nxt], key=lambda t: t.t)
    assert len(sent) == point.total_requests == 11 and sum(s.warmup for s in sent) == 2
    assert [s.warmup for s in sent[:2]] == [True, True]
    by_session: dict[str, list[int]] = {}
    for s in sent:
        by_session.setdefault(s.spec.session_id, []).append(s.spec.turn)
    assert all(t == list(range(len(t))) for t in by_session.values())
