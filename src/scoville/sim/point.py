"""One load point in virtual time: a fresh SimEngine, the load policy's sends, and the records it would have
measured.

What is sent when, what is warm-up and when a point ends is ``scoville.load_policy.PointLoad``'s, the
policy the measuring client (``scoville.client.driver``) follows too, so a simulated point and a measured
one differ only in where the timestamps came from. This module keeps what is its own: a heap of due turns
in virtual time, submission to the engine, a FIFO queue for the open-loop in-flight cap (the client's
semaphore), and the records.

Each point runs on a fresh engine (an idle server with an empty cache, as after a restart), its records
stamped from the ``t_start`` it is given; records become an Arrow table column by column (token timestamps
straight from the engine's numpy arrays). Apart from ``scoville.sim.driver`` (points in a row, a run
directory) so that ``scoville.sim.fanout`` can run points as tasks without importing the driver that calls it.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from scoville.load import LoadPoint
from scoville.load_policy import LocalSlots, PointLoad, Send, Turn, in_flight_cap, lanes, point_sessions, request_cap
from scoville.results.schema import ARROW_SCHEMA
from scoville.sim.config import SimConfig
from scoville.sim.engine import RequestTrace, SimEngine
from scoville.workload.spec import Session

POINT_GAP_S = 1.0               # idle time between points on the run clock


@dataclass
class PointResult:
    """One simulated point: its records, when it ended, and what the engine counted."""

    table: pa.Table
    t_start: float
    t_end: float
    counters: dict[str, int]
    watts_per_accelerator: float | None = None   # utilisation model mean over the point (power="model")


@dataclass
class _Columns:
    request_id: list[str] = field(default_factory=list)
    session_id: list[str | None] = field(default_factory=list)
    turn: list[int] = field(default_factory=list)
    t_sent: list[float] = field(default_factory=list)
    t_first: list[float | None] = field(default_factory=list)
    t_done: list[float] = field(default_factory=list)
    times: list[np.ndarray] = field(default_factory=list)
    counts: list[np.ndarray] = field(default_factory=list)
    input_tokens: list[int] = field(default_factory=list)
    output_tokens: list[int] = field(default_factory=list)
    cached_tokens: list[int] = field(default_factory=list)
    ok: list[bool] = field(default_factory=list)
    error: list[str | None] = field(default_factory=list)
    http_status: list[int | None] = field(default_factory=list)
    warmup: list[bool] = field(default_factory=list)

    def add(self, sent: Send, t_sent: float, tr: RequestTrace) -> None:
        """One finished request, as the client records it (no session id for a single-turn request)."""
        spec, ok = sent.spec, tr.error is None
        self.request_id.append(spec.request_id)
        self.session_id.append(spec.session_id)
        self.turn.append(spec.turn)
        self.t_sent.append(t_sent)
        self.t_first.append(tr.t_first)
        self.t_done.append(tr.t_done)
        self.times.append(tr.times)
        self.counts.append(tr.counts)
        self.input_tokens.append(spec.input_tokens)
        self.output_tokens.append(tr.output_tokens)
        self.cached_tokens.append(tr.cached_tokens)
        self.ok.append(ok)
        self.error.append(tr.error)
        self.http_status.append(200 if ok else 400)
        self.warmup.append(sent.warmup)

    def table(self, point: int) -> pa.Table:
        """The point's requests as the record schema's columns (token times packed per request)."""
        n = len(self.request_id)
        lengths = np.fromiter((a.size for a in self.times), dtype=np.int32, count=n)
        offsets = np.concatenate(([0], np.cumsum(lengths, dtype=np.int64))).astype(np.int32)
        flat_t = np.concatenate(self.times) if n else np.empty(0)
        flat_c = np.concatenate(self.counts).astype(np.int32) if n else np.empty(0, dtype=np.int32)
        cols = {
            "point": pa.array(np.full(n, point, dtype=np.int32)),
            "request_id": pa.array(self.request_id, pa.string()),
            "session_id": pa.array(self.session_id, pa.string()),
            "turn": pa.array(self.turn, pa.int32()),
            "t_sent": pa.array(self.t_sent, pa.float64()),
            "t_first_token": pa.array(self.t_first, pa.float64()),
            "t_done": pa.array(self.t_done, pa.float64()),
            "token_times": pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat_t, pa.float64())),
            "token_counts": pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat_c, pa.int32())),
            "input_tokens": pa.array(self.input_tokens, pa.int64()),
            "output_tokens": pa.array(self.output_tokens, pa.int64()),
            "cached_tokens": pa.array(self.cached_tokens, pa.int64()),
            "ok": pa.array(self.ok, pa.bool_()),
            "error": pa.array(self.error, pa.string()),
            "http_status": pa.array(self.http_status, pa.int32()),
            "warmup": pa.array(self.warmup, pa.bool_()),
            "worker": pa.nulls(n, pa.string()),
            "token_count_source": pa.array(["server"] * n, pa.string()),
        }
        return pa.Table.from_arrays([cols[name] for name in ARROW_SCHEMA.names], schema=ARROW_SCHEMA)


class _Replay:
    """One point in virtual time: the engine, a heap of due turns, the in-flight cap's queue and the records.

    ``PointLoad`` decides; this only keeps time. A turn is admitted when it is due (as the client takes its
    request slot at that moment) and, when the in-flight cap is full, waits in FIFO order for the next
    request to finish (as behind the client's semaphore).
    """

    def __init__(self, engine: SimEngine, load: PointLoad, cap: int | None) -> None:
        self.engine, self.load, self.cap = engine, load, cap
        self.pending: list[tuple[float, int, Turn]] = []   # (due time, seq, turn): ties keep push order
        self.seq = itertools.count()
        self.inflight: dict[str, tuple[Send, float]] = {}  # request id -> (what was sent, when)
        self.queued: deque[Send] = deque()
        self.cols = _Columns()

    def push(self, turn: Turn | None) -> None:
        if turn is not None:
            heapq.heappush(self.pending, (turn.t, next(self.seq), turn))

    def run(self) -> None:
        """Advance the engine from one due turn to the next until nothing is due or running."""
        engine, pending = self.engine, self.pending
        while pending or not engine.idle():
            t_next = pending[0][0] if pending else float("inf")
            for ev in engine.advance(t_next, stop_at_finish=True):
                if ev.finished:
                    self._finished(ev.request_id)
            while pending and pending[0][0] <= engine.now:
                self._due(heapq.heappop(pending)[2])

    def _due(self, turn: Turn) -> None:
        sent = self.load.admit(turn, turn.t)
        if sent is None:          # the point is over: nothing due will be sent
            self.pending.clear()
        elif self.cap is not None and len(self.inflight) >= self.cap:
            self.queued.append(sent)
        else:
            self._submit(sent, turn.t)

    def _submit(self, sent: Send, t: float) -> None:
        self.engine.submit(sent.spec, t)
        self.inflight[sent.spec.request_id] = (sent, t)

    def _finished(self, rid: str) -> None:
        sent, t_sent = self.inflight.pop(rid)
        tr = self.engine.pop_trace(rid)
        self.cols.add(sent, t_sent, tr)
        self.push(self.load.after(sent, tr.t_done))
        if self.queued:
            self._submit(self.queued.popleft(), tr.t_done)


def simulate_point(config: SimConfig, workload: Any, point: LoadPoint, *, seed: int = 0, t_start: float = 0.0,
                   sessions: list[Session] | None = None, model_power: bool = False) -> PointResult:
    """Run one load point in virtual time on a fresh engine; records stamped from ``t_start``."""
    engine = SimEngine(config, seed=seed * 1_000_003 + point.index, token_events=False)
    if model_power:
        for inst in engine.instances:
            inst.steplog = []
    if sessions is None:
        sessions = point_sessions(workload, point)
    load = PointLoad(point, sessions, LocalSlots(len(sessions), request_cap(point)), t_start=t_start)
    replay = _Replay(engine, load, in_flight_cap(point))
    for turn in load.lane_starts(lanes(point)) if load.closed else load.arrivals(seed, workload):
        replay.push(turn)
    replay.run()
    cols = replay.cols
    table = cols.table(point.index)
    t_end = max(cols.t_done, default=t_start) or t_start
    watts = _model_watts(config, engine, t_start, t_end) if model_power else None
    return PointResult(table, t_start, float(t_end), engine.counters(), watts)


def _model_watts(config: SimConfig, engine: SimEngine, t_start: float, t_end: float) -> float | None:
    """Mean watts per accelerator over the point from each step's compute and memory utilisation."""
    from scoville.sim.power_model import PowerModel

    span = t_end - t_start
    if span <= 0:
        return None
    pm = PowerModel(config.hardware)
    energy = 0.0
    accs = 0
    for inst in engine.instances:
        n_acc = inst.timer.accelerators  # type: ignore[attr-defined]
        accs += n_acc
        busy = 0.0
        for entry in inst.steplog or []:
            dt = np.asarray(entry[0], dtype=np.float64)
            cu, mu = inst.timer.utilization(*entry[1:])  # type: ignore[attr-defined]
            energy += float(np.sum(dt * pm.watts(cu, mu))) * n_acc
            busy += float(np.sum(dt))
        energy += max(span - busy, 0.0) * pm.idle * n_acc
    return energy / span / accs if accs else None
