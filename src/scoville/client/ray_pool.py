"""Distributed load generation: one coordinator, N client workers as Ray actors on any nodes.

The Ray counterpart of ``scoville.client.workers.WorkerPool``, and a part of the client for that reason:
``scoville.executor`` supplies what is not the client's (the Ray connection, clock sync, the split of a
point) and imports nothing of the client back.

Each worker runs the real measuring client (``scoville.client.driver.drive_point``
with ``send_request``) against the target URL, over its share of each point
(``scoville.executor.split``). The coordinator

* measures each worker's clock offset before every point (``scoville.executor.clock``)
  and hands the worker ``t0 = coordinator t0 + offset``, so the worker's
  records come back stamped on the coordinator's run clock;
* starts all shares at one instant on that clock, polls each worker for its
  finished records every ``poll_s`` and hands them at once to the measured
  sweep's journal (``scoville.client.sweep`` with ``Sweep(executor="ray")``,
  which ``scoville sweep --executor ray`` runs): the run directory is exactly a
  local run's, and ``scoville.metrics`` computes every metric the same way;
* bounds every actor call by ``call_timeout_s``: a worker that dies or stops
  answering is killed and loses only its in-flight requests, recorded as
  ``ok=False, error="worker lost ..."``; the sessions it had not started are
  handed to a surviving worker with the dead worker's lanes, so neither the
  request count nor the concurrency of the plan changes. The coordinator never
  waits on a dead worker.

Caveat (documented in docs/ray.md): a session a worker starts in the last
``poll_s`` before it dies is not yet known to have started; it is re-sent by
the survivor, so the server may see it twice, while the run records it once.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from scoville.client.config import ClientConfig
from scoville.client.driver import drive_point, run_async
from scoville.client.errors import ClientError
from scoville.errors import UserError
from scoville.executor.clock import ClockSync, measure_offset
from scoville.executor.ray_executor import connect
from scoville.executor.split import Share, split_point
from scoville.load import LoadPoint
from scoville.load_policy import LocalSlots, point_sessions, session_count
from scoville.results.schema import RequestRecord
from scoville.workload.spec import Session

LOST = "worker lost"


class WorkerReport(msgspec.Struct):
    """What a worker has to say about one of its share runs since the last poll."""

    records: list[RequestRecord]
    started: dict[int, float]  # session index -> run-clock time it was taken (since last poll)
    done: bool
    error: str | None = None


_encode_report = msgspec.msgpack.Encoder().encode
_decode_report = msgspec.msgpack.Decoder(WorkerReport).decode


class _TrackedSessions(Sequence[Session]):
    """The session list ``drive_point`` reads, noting when each session is taken.

    ``drive_point``'s load policy (``PointLoad.admit``) reads a session once, just
    before its first turn is sent, so an index access is the moment a session
    starts; that is what lets the coordinator tell in-flight work from work not
    yet started.
    """

    def __init__(self, sessions: Sequence[Session], index: Sequence[int] | None,
                 on_take: Callable[[int], None]) -> None:
        self._sessions, self._index, self._on_take = sessions, index, on_take

    def __len__(self) -> int:
        return len(self._index) if self._index is not None else len(self._sessions)

    def __getitem__(self, j: int) -> Session:  # type: ignore[override]  # one session at a time, never a slice
        k = self._index[j] if self._index is not None else j
        self._on_take(k)
        return self._sessions[k]


class _ShareRun:
    """One share running on its own event loop in a worker thread."""

    def __init__(self, worker: str, cfg: ClientConfig, sessions: list[Session], share: Share, *,
                 t0: float, t_start: float, seed: int, workload: Any = None, salt: int = 0) -> None:
        self.worker, self.cfg, self.sessions, self.share = worker, cfg, sessions, share
        self.workload = workload
        self.t0, self.t_start, self.seed, self.salt = t0, t_start, seed, salt
        self.lock = threading.Lock()
        self.records: list[RequestRecord] = []
        self.started: dict[int, float] = {}
        self.done = False
        self.error: str | None = None
        self.stopped = False
        self.thread = threading.Thread(target=self._run, name=f"share-{share.point.index}", daemon=True)

    def _take(self, k: int) -> None:
        with self.lock:
            self.started[k] = time.perf_counter() - self.t0

    def _record(self, rec: RequestRecord) -> None:
        with self.lock:
            self.records.append(rec)

    def _run(self) -> None:
        share = self.share
        open_loop = share.point.rate is not None
        try:
            delay = self.t_start - (time.perf_counter() - self.t0)
            if delay > 0:
                time.sleep(delay)
            view = _TrackedSessions(self.sessions, None if open_loop else share.sessions, self._take)
            counters = LocalSlots(len(share.sessions), share.requests)
            run_async(drive_point(
                self.cfg, view, share.point, t0=self.t0, t_start=self.t_start, counters=counters,
                on_record=self._record, lanes=share.lanes, seed=self.seed,
                open_sessions=share.sessions if open_loop else None, max_in_flight=share.max_in_flight,
                worker=self.worker, stop=lambda: self.stopped, workload=self.workload, salt=self.salt))
        except BaseException as e:  # reported to the coordinator, which records what was lost
            self.error = f"{type(e).__name__}: {e}"
        finally:
            self.done = True

    def report(self) -> WorkerReport:
        with self.lock:
            done = self.done  # read first: records appended before done are in this report
            out = WorkerReport(records=self.records, started=self.started, done=done, error=self.error)
            self.records, self.started = [], {}
        return out


class ClientWorker:
    """A Ray actor (wrapped with ``ray.remote`` by the coordinator) that sends one share at a time or more."""

    def __init__(self, name: str, cfg: ClientConfig, workload: Any) -> None:
        self.name = f"{name}@{socket.gethostname()}"
        self.cfg, self.workload = cfg, workload
        self._runs: dict[int, _ShareRun] = {}
        self._sessions: dict[tuple[int, int], list[Session]] = {}

    def identity(self) -> str:
        return self.name

    def clock(self) -> float:
        return time.perf_counter()

    def start(self, run_id: int, share: Share, plan_point: LoadPoint, t0: float, t_start: float, seed: int,
              salt: int = 0) -> None:
        """Start ``share`` of ``plan_point``; ``t0`` is on this worker's clock, ``t_start`` on the run clock."""
        key = (plan_point.index, session_count(plan_point))
        if key not in self._sessions:
            self._sessions = {key: point_sessions(self.workload, plan_point)}
        run = _ShareRun(self.name, self.cfg, self._sessions[key], share, t0=t0, t_start=t_start, seed=seed,
                        workload=self.workload, salt=salt)
        self._runs[run_id] = run
        run.thread.start()

    def poll(self, run_id: int) -> bytes:
        report = self._runs[run_id].report()
        if report.done:
            self._runs.pop(run_id, None)
        return _encode_report(report)

    def stop(self) -> None:
        for run in self._runs.values():
            run.stopped = True


class _Active(msgspec.Struct, kw_only=True):
    """Coordinator-side state of one running share."""

    run_id: int
    worker: int
    share: Share
    started: dict[int, float] = {}
    finished: dict[str, float] = {}  # request id -> t_done (t_sent when it has none)
    accounted: int = 0                # records received or written for this share


@dataclass
class _PointCtx:
    """Everything about the point being driven that the polling loop needs."""

    point: LoadPoint
    sessions: list[Session]
    t0: float
    t_start: float
    seed: int
    salt: int
    offsets: dict[int, ClockSync]
    on_record: Callable[[RequestRecord], None]
    active: list[_Active] = field(default_factory=list)
    records: list[RequestRecord] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # client failures, raised once the point is collected

    def emit(self, rec: RequestRecord) -> None:
        self.records.append(rec)
        self.on_record(rec)


class RayLoadCoordinator:
    """Drives load points through ``workers`` Ray client actors and writes one run directory."""

    def __init__(self, cfg: ClientConfig, workload: Any, *, workers: int = 2, ray_address: str | None = None,
                 num_cpus: float = 1.0, resources: dict[str, float] | None = None, call_timeout_s: float = 10.0,
                 poll_s: float = 0.1, start_delay_s: float = 0.5, pings: int = 8,
                 start_timeout_s: float = 60.0) -> None:
        if workers < 1:
            raise UserError(f"--workers must be >= 1 (got {workers})")
        self.cfg, self.workload = cfg, workload
        self.n_workers, self.ray_address, self.num_cpus = workers, ray_address, num_cpus
        # e.g. {"scoville_client": 1}: keeps client workers off the nodes serving the model
        self.resources = resources or {}
        self.call_timeout_s, self.poll_s, self.start_delay_s, self.pings = call_timeout_s, poll_s, start_delay_s, pings
        self.start_timeout_s = start_timeout_s  # actor placement can take a while on a busy cluster
        self._ray: Any = None
        self.actors: list[Any] = []
        self.names: list[str] = []
        self.alive: list[bool] = []
        self.syncs: list[dict[str, Any]] = []  # per point and worker, for the manifest
        self._next_run = 0

    # -- workers ---------------------------------------------------------------------------------
    def start_workers(self) -> None:
        ray, _ = connect(self.ray_address)
        self._ray = ray
        cls = ray.remote(num_cpus=self.num_cpus, resources=self.resources, max_restarts=0, max_task_retries=0,
                         scheduling_strategy="SPREAD")(ClientWorker)
        self.actors = [cls.remote(f"ray-{i}", self.cfg, self.workload) for i in range(self.n_workers)]
        wait_s = self.start_timeout_s
        try:
            self.names = ray.get([a.identity.remote() for a in self.actors], timeout=wait_s)
        except (ray.exceptions.GetTimeoutError, ray.exceptions.RayActorError) as e:
            for a in self.actors:
                ray.kill(a, no_restart=True)
            raise UserError(
                f"Ray could not start {self.n_workers} client workers within {wait_s:.0f} s "
                f"(each needs num_cpus={self.num_cpus:g}"
                f"{', resources=' + str(self.resources) if self.resources else ''}; "
                f"{type(e).__name__}); `ray status` shows what the cluster has free") from None
        self.alive = [True] * self.n_workers

    def _get(self, ref: Any) -> Any:
        return self._ray.get(ref, timeout=self.call_timeout_s)

    def _lose(self, i: int) -> None:
        self.alive[i] = False
        with contextlib.suppress(Exception):  # already gone; nothing else to release
            self._ray.kill(self.actors[i], no_restart=True)

    def _sync(self, i: int) -> ClockSync | None:
        try:
            return measure_offset(lambda: self._get(self.actors[i].clock.remote()), self.pings)
        except Exception:
            self._lose(i)
            return None

    # -- one point (the interface of scoville.client.workers.WorkerPool.run_point) ----------------
    def run_point(self, point: LoadPoint, *, t0: float, t_start: float, on_record: Callable[[RequestRecord], None],
                  seed: int = 0, salt: int = 0) -> list[RequestRecord]:
        """Send ``point`` through the live workers, calling ``on_record`` (the journal) as records arrive.

        ``t0`` is the run clock's origin on this machine (``RunWriter.t0``);
        ``t_start`` is pushed back by ``start_delay_s`` if needed so that every
        worker has its start instant in hand before it comes. On Ctrl-C the
        workers stop sending, what they finished is still collected, and the
        KeyboardInterrupt is re-raised (the caller marks the run interrupted).
        """
        if self._ray is None:
            self.start_workers()
        sessions = point_sessions(self.workload, point)
        offsets: dict[int, ClockSync] = {}
        for i in range(self.n_workers):
            if self.alive[i] and (sync := self._sync(i)) is not None:
                offsets[i] = sync
                self.syncs.append({"point": point.index, "worker": self.names[i], "offset_s": sync.offset,
                                   "rtt_s": sync.rtt})
        live = sorted(offsets)
        if not live:
            raise UserError("every Ray client worker is lost; check the cluster (`ray status`) and rerun")
        t_start = max(t_start, time.perf_counter() - t0 + self.start_delay_s)
        ctx = _PointCtx(point=point, sessions=sessions, t0=t0, t_start=t_start, seed=seed, salt=salt,
                        offsets=offsets, on_record=on_record)
        for share in split_point(point, len(live), seed):
            w = live[share.worker]
            try:
                ctx.active.append(self._start(w, share, ctx))
            except Exception:  # died since its clock sync: nothing of the share started, so a survivor takes it all
                self._lose(w)
                ctx.active.extend(self._reassign(_Active(run_id=-1, worker=w, share=share), ctx))
        try:
            while ctx.active:
                time.sleep(self.poll_s)
                self._poll_all(ctx)
        except KeyboardInterrupt:
            self.stop()
            with contextlib.suppress(Exception, KeyboardInterrupt):
                self._poll_all(ctx)  # keep what finished before the stop
            raise
        if ctx.errors:  # as the local WorkerPool does: what finished is journaled, then the failure surfaces
            raise ClientError(f"client worker failed: {ctx.errors[0]}")
        return ctx.records

    def _poll_all(self, ctx: _PointCtx) -> None:
        refs = [self.actors[a.worker].poll.remote(a.run_id) for a in ctx.active]
        still: list[_Active] = []
        for a, ref in zip(ctx.active, refs, strict=True):
            name = self.names[a.worker]
            try:
                report = _decode_report(self._get(ref))
            except Exception as e:  # dead, or silent for call_timeout_s: either way it is gone
                self._lose(a.worker)
                self._record_lost(a, ctx, f"{LOST} ({name}: {type(e).__name__}); in flight when it died")
                still.extend(self._reassign(a, ctx))
                continue
            self._absorb(a, report, ctx)
            if not report.done:
                still.append(a)
            elif report.error:  # the client itself failed: rerunning it elsewhere would fail the same way
                self._record_lost(a, ctx, f"{LOST} ({name}: {report.error})")
                ctx.errors.append(f"{name}: {report.error}")
        ctx.active = still

    def _start(self, w: int, share: Share, ctx: _PointCtx) -> _Active:
        run_id, self._next_run = self._next_run, self._next_run + 1
        t0_worker = ctx.t0 + ctx.offsets[w].offset
        self._get(self.actors[w].start.remote(run_id, share, ctx.point, t0_worker, ctx.t_start, ctx.seed, ctx.salt))
        return _Active(run_id=run_id, worker=w, share=share)

    @staticmethod
    def _absorb(a: _Active, report: WorkerReport, ctx: _PointCtx) -> None:
        a.started.update(report.started)
        for rec in report.records:
            ctx.emit(rec)
            a.finished[rec.request_id] = rec.t_done if rec.t_done is not None else rec.t_sent
        a.accounted += len(report.records)

    def _record_lost(self, a: _Active, ctx: _PointCtx, error: str) -> None:
        """One error record per started session whose next turn never came back (the in-flight ones)."""
        budget = None if a.share.requests is None else a.share.requests - a.accounted
        lost = 0
        for k in sorted(a.started, key=a.started.__getitem__):
            if budget is not None and lost >= budget:
                break
            turns = ctx.sessions[k].requests
            pending = [spec for spec in turns if spec.request_id not in a.finished]
            if not pending:
                continue
            spec = pending[0]
            # Its exact send time is unknown: record the earliest it can have been sent.
            t_sent = max([a.started[k]] + [a.finished[t.request_id] for t in turns if t.request_id in a.finished])
            ctx.emit(RequestRecord(
                point=ctx.point.index, request_id=spec.request_id, session_id=spec.session_id, turn=spec.turn,
                t_sent=t_sent, ok=False, error=error,
                warmup=a.accounted + lost < a.share.point.warmup_requests, worker=self.names[a.worker],
                input_tokens=spec.input_tokens))
            lost += 1
        a.accounted += lost

    @staticmethod
    def _remainder(a: _Active) -> tuple[Share | None, int]:
        """The part of a share that was never started, as a share of its own (None when nothing is left)."""
        remaining = tuple(k for k in a.share.sessions if k not in a.started)
        left = None if a.share.requests is None else a.share.requests - a.accounted
        if not remaining or left == 0:
            return None, 0
        old = a.share.point
        n = len(remaining) if left is None else min(left, len(remaining))
        warm = min(max(0, old.warmup_requests - a.accounted), n)
        sub = msgspec.structs.replace(old, warmup_requests=warm, num_requests=0 if left is None else n - warm)
        return Share(worker=a.share.worker, point=sub, sessions=remaining, lanes=a.share.lanes,
                     max_in_flight=a.share.max_in_flight, requests=left), n

    def _record_unsent(self, share: Share, n: int, ctx: _PointCtx, error: str) -> None:
        """Requests of the plan nobody can send, recorded so the point does not silently shrink."""
        for j, k in enumerate(share.sessions[:n]):
            spec = ctx.sessions[k].requests[0]
            ctx.emit(RequestRecord(
                point=ctx.point.index, request_id=spec.request_id, session_id=spec.session_id, turn=spec.turn,
                t_sent=time.perf_counter() - ctx.t0, ok=False, warmup=j < share.point.warmup_requests,
                error=f"{LOST}: {error}", input_tokens=spec.input_tokens))

    def _reassign(self, a: _Active, ctx: _PointCtx) -> list[_Active]:
        """Hand the sessions a lost worker had not started to a survivor, with its lanes."""
        share, n = self._remainder(a)
        if share is None:
            return []
        for w in sorted(ctx.offsets):
            if not self.alive[w]:
                continue
            try:
                return [self._start(w, share, ctx)]
            except Exception:
                self._lose(w)
        self._record_unsent(share, n, ctx, "not sent, no client worker left")
        return []

    def stop(self) -> None:
        for i, actor in enumerate(self.actors):
            if self.alive[i]:
                try:
                    self._ray.get(actor.stop.remote(), timeout=self.call_timeout_s)
                except Exception:
                    self._lose(i)

    def describe(self) -> dict[str, Any]:
        """The manifest's ``executor`` entry: who sent the load and how their clocks lined up."""
        return {"kind": "ray", "address": self.ray_address, "client_workers": self.names,
                "lost_workers": [n for n, ok in zip(self.names, self.alive, strict=True) if not ok],
                "clock_sync": self.syncs}

    def close(self) -> None:
        for i in range(len(self.actors)):
            if self.alive[i]:
                self._lose(i)
        self.actors, self._ray = [], None

