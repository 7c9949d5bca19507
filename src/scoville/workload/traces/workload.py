"""Trace replay: recorded sessions turned into the shared Session / RequestSpec shape.

Two replay modes:

* ``timed`` (default): each trace session is replayed from its first request.
  Closed-loop drivers run sessions at the chosen concurrency, waiting each
  turn's recorded think time; open-loop drivers start session ``i`` at
  ``arrivals(count, stream)[i]`` seconds after the point starts — the recorded
  arrival times, scaled by ``time_scale`` and with idle gaps capped at
  ``idle_gap_cap_s``. (Drivers: ``arrivals`` is the open-loop schedule of a
  trace; use it instead of ``load.arrival_offsets`` when the workload has it.)
* ``agentx``: InferenceX AgentX semantics. Concurrency counts live session
  trees (a root and its subagents share one lane). Lane ``i`` replays a trace
  chosen by a seeded permutation, starting at a random turn ``k`` in
  [25 %, 75 %] of its requests, after one warm-up request (turn ``k-1``'s
  prompt with one output token, ``RequestSpec.warmup = True``) that primes the
  prefix a real session would already have cached. Closed loop only.

Every replay of a trace gets its own cache-bust marker: block ids are remapped
into a namespace of (point, replay round[, session]) so a recycled trace, or
the same trace at the next load point, never hits a cache its earlier replay
warmed, while ids shared within a trace (``local`` scope) or within the file
(``global`` scope) still share tokens exactly.

Think time of turn k > 0: the recorded ``think_s`` when the format has one,
else the recorded gap ``t_k - (t_{k-1} + api_{k-1})`` (or ``t_k - t_{k-1}``
without service times), never negative; then scaled and capped like arrivals.
"""

from __future__ import annotations

import hashlib
import math
from itertools import pairwise
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from scoville.workload.sessions import LazySessions
from scoville.workload.spec import MAX_REQUEST_TOKENS, RequestSpec, Session
from scoville.workload.synthetic import WorkloadError
from scoville.workload.traces.common import TraceSession, TraceTurn

REPLAY_MODES = ("timed", "agentx")
_MASK48 = np.uint64((1 << 48) - 1)


class TraceOptions(msgspec.Struct, kw_only=True, frozen=True):
    """How a trace is replayed; recorded in the run manifest with the file's hash."""

    time_scale: float = 1.0                 # multiply every recorded time (0.5 = twice as fast)
    sample: float | None = None             # keep this fraction of sessions (seeded)
    max_sessions: int | None = None         # keep at most this many (earliest first)
    idle_gap_cap_s: float | None = None     # cap any idle gap (arrivals and think times)
    replay: str = "timed"                   # timed | agentx
    block_size: int | None = None           # override the file's block size
    seed: int = 0
    context_limit: int | None = None        # the server's window: sessions end before a turn that would not fit

    def __post_init__(self) -> None:
        if not self.time_scale > 0:
            raise WorkloadError(f"--time-scale must be > 0 (got {self.time_scale})")
        if self.sample is not None and not 0 < self.sample <= 1:
            raise WorkloadError(f"--sample must be a fraction in (0, 1] (got {self.sample})")
        if self.max_sessions is not None and self.max_sessions < 1:
            raise WorkloadError(f"--max-sessions must be >= 1 (got {self.max_sessions})")
        if self.idle_gap_cap_s is not None and not self.idle_gap_cap_s >= 0:  # nan included
            raise WorkloadError(f"--idle-gap-cap must be >= 0 seconds (got {self.idle_gap_cap_s})")
        if self.replay not in REPLAY_MODES:
            raise WorkloadError(f"unknown replay mode {self.replay!r}; use one of {', '.join(REPLAY_MODES)}")
        if self.block_size is not None and not 1 <= self.block_size <= MAX_REQUEST_TOKENS:
            raise WorkloadError(f"--trace-block-size must be from 1 to {MAX_REQUEST_TOKENS:,} (got {self.block_size})")
        if self.context_limit is not None and self.context_limit < 2:
            raise WorkloadError(f"a context window of {self.context_limit} tokens holds no request")


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser, vectorised (uint64 arithmetic wraps by design)."""
    with np.errstate(over="ignore"):
        x = x ^ (x >> np.uint64(30))
        x = x * np.uint64(0xBF58476D1CE4E5B9)
        x = x ^ (x >> np.uint64(27))
        x = x * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def _namespace(*parts: int) -> int:
    digest = hashlib.blake2b(b"/".join(str(p).encode() for p in parts), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def remap_hashes(ids: tuple[int, ...], namespace: int) -> tuple[int, ...]:
    """Trace block ids -> 48-bit block hashes of one namespace (equal ids stay equal)."""
    if not ids:
        return ()
    x = np.array(ids, dtype=np.uint64)
    with np.errstate(over="ignore"):
        x = _mix64(x ^ np.uint64(namespace)) + np.uint64(namespace)
    return tuple((_mix64(x) & _MASK48).tolist())


def _cap(x: float, cap: float | None) -> float:
    return min(x, cap) if cap is not None else x


class TraceWorkload:
    """A replayable trace: ``sessions(count, stream)`` and, for timed replay, ``arrivals(count, stream)``."""

    kind = "trace"

    def __init__(self, path: Path, fmt: str, sessions: list[TraceSession], options: TraceOptions,
                 sha256: str) -> None:
        self.path, self.format, self.options, self.sha256 = path, fmt, options, sha256
        self._all = sessions
        self.name = f"trace:{path.name}"
        # Keep each session's ordinal in the file: it names its local hash namespace, stable under sub-sampling.
        kept = [(i, s) for i, s in enumerate(sessions) if s.turns]
        if options.sample is not None:
            keep = np.random.default_rng([options.seed, 0x5A3B1E]).random(len(sessions)) < options.sample
            kept = [(i, s) for i, s in kept if keep[i]]
        kept.sort(key=lambda p: (p[1].turns[0].t is None, p[1].turns[0].t or 0.0, p[0]))
        if options.max_sessions is not None:
            kept = kept[: options.max_sessions]
        if not kept:
            raise WorkloadError(f"{path}: no sessions left to replay "
                                "(empty trace, or --sample / --max-sessions too small)")
        self.trace_sessions: list[TraceSession] = [s for _, s in kept]
        self._ordinals = [i for i, _ in kept]
        self._thinks = [self._think_times(s) for s in self.trace_sessions]

    # --- description ---------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "format": self.format, "path": str(self.path),
                "sha256": self.sha256, "sessions": len(self.trace_sessions),
                "requests": sum(len(s.turns) for s in self.trace_sessions),
                **msgspec.to_builtins(self.options)}

    @property
    def reuses_prefixes(self) -> bool:
        """Whether prompts share blocks (hash ids) or later turns follow earlier ones."""
        return any(len(s.turns) > 1 or any(t.hash_ids for t in s.turns) for s in self.trace_sessions)

    def fit_context(self, limit: int) -> TraceWorkload:
        """This trace replayed within a ``limit``-token window (see ``_fit``)."""
        options = msgspec.structs.replace(self.options, context_limit=min(limit, self.options.context_limit or limit))
        return TraceWorkload(self.path, self.format, self._all, options, self.sha256)

    @property
    def has_arrivals(self) -> bool:
        # AgentX times are relative to each session's own start: they say nothing about when sessions arrive.
        return (self.options.replay == "timed" and self.format != "agentx"
                and all(s.turns[0].t is not None for s in self.trace_sessions))

    def summary(self) -> dict[str, Any]:
        turns = [t for s in self.trace_sessions for t in s.turns]
        starts = self._starts() if self.has_arrivals else None
        return {
            "sessions": len(self.trace_sessions),
            "requests": len(turns),
            "turns_per_session_mean": len(turns) / len(self.trace_sessions),
            "input_tokens_mean": float(np.mean([t.input_tokens for t in turns])),
            "output_tokens_mean": float(np.mean([t.output_tokens for t in turns])),
            "block_sizes": sorted({s.block_size for s in self.trace_sessions}),
            "subagent_requests": sum(1 for t in turns if t.lane),
            "span_s": float(starts[-1] - starts[0]) if starts is not None and starts.size else None,
        }

    # --- timing ----------------------------------------------------------------------------------

    def _think_times(self, s: TraceSession) -> list[float]:
        out = [0.0]
        for prev, cur in pairwise(s.turns):
            if cur.think_s is not None:
                gap = cur.think_s
            elif cur.t is not None and prev.t is not None:
                gap = cur.t - prev.t - (prev.api_s or 0.0)
            else:
                gap = 0.0
            out.append(_cap(max(gap, 0.0) * self.options.time_scale, self.options.idle_gap_cap_s))
        return out

    def _starts(self) -> np.ndarray:
        t = np.array([s.turns[0].t for s in self.trace_sessions], dtype=float)
        gaps = np.diff(t - t.min(), prepend=0.0) * self.options.time_scale
        if self.options.idle_gap_cap_s is not None:
            gaps = np.minimum(gaps, self.options.idle_gap_cap_s)
        return np.cumsum(gaps)

    def arrivals(self, count: int, stream: int = 0) -> np.ndarray:
        """Open-loop start time (s from point start) of each of ``sessions(count, stream)``.

        Recycled rounds (``count`` above the trace's sessions) follow one another,
        each starting one mean inter-arrival gap after the previous round's last.
        """
        if self.options.replay != "timed":
            raise WorkloadError("AgentX replay is closed-loop (concurrency = live session trees); "
                                "use --concurrency, or --replay timed for open-loop arrivals")
        if not self.has_arrivals:
            raise WorkloadError(f"{self.path}: the trace records no session arrival times; replay it closed-loop "
                                "(--concurrency) or give --rate")
        starts = self._starts()
        n = starts.size
        span = float(starts[-1])
        period = span + (span / (n - 1) if n > 1 else 0.0)
        idx = np.arange(count)
        return starts[idx % n] + (idx // n) * period

    # --- sessions --------------------------------------------------------------------------------

    def _namespace(self, j: int, stream: int, replay: int) -> int:
        """The hash namespace of one replay: the seed is in it, so a run with a fresh seed sends fresh prompts."""
        seed = self.options.seed
        if self.trace_sessions[j].scope == "local":
            return _namespace(seed, stream, replay, self._ordinals[j])
        return _namespace(seed, stream, replay)

    def _fit(self, turn: TraceTurn) -> tuple[int, int, tuple[int, ...]] | None:
        """(input, output, hash ids) of ``turn`` within the context limit; None when it cannot fit as recorded.

        As a session scenario shapes its sessions: a request over the window ends
        its session there, except a session's first, which is shortened to fit.
        """
        n_in, n_out = turn.input_tokens, max(1, turn.output_tokens)
        limit = self.options.context_limit
        if limit is None or n_in + n_out <= limit:
            return n_in, n_out, turn.hash_ids
        return None

    def _shorten(self, turn: TraceTurn, block_size: int) -> tuple[int, int, tuple[int, ...]]:
        limit = self.options.context_limit
        assert limit is not None
        n_out = min(max(1, turn.output_tokens), max(1, limit // 2))
        n_in = max(1, min(turn.input_tokens, limit - n_out))
        return n_in, n_out, turn.hash_ids[: -(-n_in // block_size)]

    def _specs(self, s: TraceSession, sid: str, namespace: int, start: int,
               thinks: list[float]) -> list[RequestSpec]:
        specs: list[RequestSpec] = []
        for k in range(start, len(s.turns)):
            turn = s.turns[k]
            fitted = self._fit(turn)
            if fitted is None and specs:
                break
            n_in, n_out, hash_ids = fitted or self._shorten(turn, s.block_size)
            lane = f"-{turn.lane}" if turn.lane else ""
            specs.append(RequestSpec(
                request_id=f"{sid}-t{k}{lane}",
                input_tokens=n_in,
                output_tokens=n_out,
                session_id=sid,
                turn=k,
                think_s=0.0 if k == start else thinks[k],
                block_hashes=remap_hashes(hash_ids, namespace),
                block_size=s.block_size,
                prompt_seed=(namespace ^ (k * 0x9E3779B1)) & ((1 << 62) - 1),
            ))
        return specs

    def sessions(self, count: int, stream: int = 0) -> LazySessions:
        """``count`` sessions; past the trace's end sessions are recycled under a fresh cache-bust marker."""
        n = len(self.trace_sessions)
        perm = None
        if self.options.replay == "agentx":
            perm = np.random.default_rng([self.options.seed, stream, 0xA6E7]).permutation(n).tolist()
        return LazySessions(count, lambda i: self._session(i, stream, perm))

    def _session(self, i: int, stream: int, perm: list[int] | None) -> Session:
        n = len(self.trace_sessions)
        j = perm[i % n] if perm is not None else i % n
        s, replay = self.trace_sessions[j], i // n
        sid = f"p{stream}-{s.key}" + (f"-r{replay}" if replay else "")
        ns = self._namespace(j, stream, replay)
        if perm is None or len(s.turns) < 2:
            return Session(session_id=sid, requests=tuple(self._specs(s, sid, ns, 0, self._thinks[j])))
        # AgentX lane: start at a random turn k in [25 %, 75 %] after priming turn k-1's prompt.
        length = len(s.turns)
        lo = max(1, math.floor(0.25 * length))
        hi = max(lo, min(length - 1, math.floor(0.75 * length)))
        k = int(np.random.default_rng([self.options.seed, stream, 0xA6E7, i]).integers(lo, hi + 1))
        prev = s.turns[k - 1]
        n_in, _, prev_ids = self._fit(prev) or self._shorten(prev, s.block_size)
        prime = RequestSpec(
            request_id=f"{sid}-prime", input_tokens=n_in, output_tokens=1, session_id=sid,
            turn=k - 1, block_hashes=remap_hashes(prev_ids, ns), block_size=s.block_size,
            prompt_seed=(ns ^ ((k - 1) * 0x9E3779B1)) & ((1 << 62) - 1), warmup=True,
        )
        rest = self._specs(s, sid, ns, k, self._thinks[j])
        first = msgspec.structs.replace(rest[0], think_s=self._thinks[j][k])
        return Session(session_id=sid, requests=(prime, first, *rest[1:]))
