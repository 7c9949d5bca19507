"""Decode spans: many decode-only steps of a fixed batch planned at once.

When every running request decodes and nothing waiting can start, the batch cannot change until a request
finishes, a KV block runs out or a request arrives. The whole run of steps up to the first of those is then
planned in one go — every duration from one vectorised ``step_time`` call, the token times as one numpy
array — instead of one Python iteration per step. A span is a pure plan until ``apply_span`` commits a prefix
of it, so the engine can cut it at any time (an arrival routed here) and commit only the steps that started.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from scoville.sim.drafts import Drafts
from scoville.sim.request import Req
from scoville.sim.stepplan import StepTimer

SPAN_CAP = 4096  # longest span planned at once (bounds the arrays of one plan)


def first_steps(x: Any, j: int) -> np.ndarray:
    """The first ``j`` per-step values of a step_time argument that may be a scalar (for the power log)."""
    a = np.asarray(x, dtype=np.float64)
    return np.full(j, float(a)) if a.ndim == 0 else a[:j]


@dataclass
class Span:
    """A planned run of decode-only steps over a fixed batch."""

    starts: np.ndarray      # start time of each step
    ends: np.ndarray        # end time of each step
    reqs: list[Req]
    accepted: np.ndarray | None  # (steps, seqs) tokens per step with speculative decoding, else None
    inputs: tuple[Any, Any, Any, Any]  # step_time arguments (scalars or per-step arrays), for the power log

    @property
    def end(self) -> float:
        return float(self.ends[-1])

    def rest(self, j: int) -> Span:
        """The plan without its first ``j`` steps (after committing them)."""
        if j == 0:
            return self
        return Span(starts=self.starts[j:], ends=self.ends[j:], reqs=self.reqs,
                    accepted=None if self.accepted is None else self.accepted[j:],
                    inputs=tuple(x[j:] if np.ndim(x) else x for x in self.inputs))


@dataclass
class _Steps:
    """The candidate steps of a span before it is fitted to the free blocks."""

    k: int                                   # steps until the first request finishes (at most SPAN_CAP)
    need: Callable[[int], int]               # blocks the batch needs to run j steps
    accepted: np.ndarray | None = None       # (k, seqs) tokens yielded per step, with speculative decoding
    c_before: np.ndarray | None = None       # (k, seqs) KV length before each step, with speculative decoding

    def cut(self, k: int) -> None:
        """Keep the first ``k`` steps."""
        self.k = k
        if self.accepted is not None:
            self.accepted = self.accepted[:k]
        if self.c_before is not None:
            self.c_before = self.c_before[:k]


def _plain_steps(L: np.ndarray, nb: np.ndarray, remaining: np.ndarray, bs: int) -> _Steps:
    """One token per step for every request: blocks after j steps are ceil((L + j) / bs) - nb, summed."""
    def need(j: int) -> int:
        return int(np.maximum(-(-(L + j) // bs) - nb, 0).sum())
    return _Steps(int(min(remaining.min(), SPAN_CAP)), need)


def _speculative_steps(L: np.ndarray, nb: np.ndarray, remaining: np.ndarray, bs: int, drafts: Drafts) -> _Steps:
    """Accepted drafts drawn for every step ahead; the span ends at the step where a request reaches its target."""
    n = len(L)
    k0 = int(min(remaining.min(), SPAN_CAP))
    look = 1 + drafts.drafts
    acc = drafts.accepted_steps(k0, n)
    cum = np.cumsum(acc, axis=0)
    fin = np.argmax(cum >= remaining[None, :], axis=0)    # first step at which each request reaches its target
    fin = np.where(cum[-1] >= remaining, fin, k0 - 1)
    k = int(fin.min()) + 1
    acc, cum = acc[:k], cum[:k]
    over = cum - remaining[None, :]
    acc = np.where(over > 0, np.maximum(acc - over, 0), acc)
    c_before = L[None, :] + np.vstack([np.zeros((1, n), dtype=np.int64), np.cumsum(acc, axis=0)[:-1]])
    blocks_at = np.maximum(-(-(c_before + look) // bs) - nb[None, :], 0).sum(axis=1)

    def need(j: int) -> int:
        return int(blocks_at[j - 1])
    return _Steps(k, need, acc, c_before)


def _fit(steps: _Steps, avail: int) -> bool:
    """Shorten the span to the most steps whose blocks fit in ``avail``; False when not even one step does."""
    need = steps.need
    if need(1) > avail:
        return False  # the next step already preempts
    if need(steps.k) > avail:
        lo, hi = 1, steps.k  # need(lo) fits, need(hi) does not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if need(mid) <= avail:
                lo = mid
            else:
                hi = mid
        steps.cut(lo)
    return True


def _inputs(steps: _Steps, L: np.ndarray, look: int) -> tuple[Any, Any, Any, Any]:
    """The step_time arguments of every step: (tokens, seqs, attention context, KV tokens)."""
    n, k = len(L), steps.k
    if steps.c_before is None:
        ctx = float(L.sum()) + n * np.arange(k, dtype=np.float64) + n
        return (n, n, ctx, ctx)
    ctx_sum = steps.c_before.sum(axis=1).astype(np.float64)
    kv_tokens = ctx_sum + n * look
    attn = look * ctx_sum + n * look * (look + 1) / 2
    return (n * look, n, attn, kv_tokens)


def plan_span(reqs: list[Req], block_size: int, available: int, timer: StepTimer, drafts: Drafts, clock: float,
              next_arrival: float | None, ahead: bool = False) -> Span | None:
    """The decode steps of ``reqs`` from ``clock`` until a finish, a block shortage or the step that could take in
    ``next_arrival`` (the first to start after it; with a scheduler that runs a step ahead, the one after that);
    None when the very next step needs more than ``available`` blocks (a preemption: a single step decides)."""
    n = len(reqs)
    L = np.fromiter((r.computed for r in reqs), dtype=np.int64, count=n)
    nb = np.fromiter((r.n_blocks for r in reqs), dtype=np.int64, count=n)
    remaining = np.fromiter((r.target - r.generated for r in reqs), dtype=np.int64, count=n)
    if drafts.drafts == 0:
        steps = _plain_steps(L, nb, remaining, block_size)
    else:
        steps = _speculative_steps(L, nb, remaining, block_size, drafts)
    if not _fit(steps, available):
        return None
    inputs = _inputs(steps, L, 1 + drafts.drafts)
    k = steps.k
    dt = np.broadcast_to(np.asarray(timer.step_time(*inputs), dtype=np.float64), (k,))
    ends = clock + np.cumsum(dt)
    starts = np.concatenate(([clock], ends[:-1]))
    accepted = steps.accepted
    if next_arrival is not None:
        cut = int(np.searchsorted(starts, next_arrival, side="left")) + int(ahead)
        if cut < k:
            k = max(cut, 1)
            ends, starts = ends[:k], starts[:k]
            if accepted is not None:
                accepted = accepted[:k]
    return Span(starts=starts, ends=ends, reqs=reqs, accepted=accepted, inputs=inputs)


@dataclass
class Applied:
    """What committing ``j`` steps of a span did: per-request tokens per step, blocks taken, who finished."""

    per_req: list[np.ndarray | None]   # accepted tokens per step (None: one per step)
    new_blocks: int
    generated: int
    finished: list[Req]


def apply_span(span: Span, j: int, block_size: int, look: int) -> Applied:
    """Advance every request of the span by its first ``j`` steps (tokens, KV length, blocks)."""
    per_req: list[np.ndarray | None] = []
    new_blocks = generated = 0
    finished: list[Req] = []
    for i, r in enumerate(span.reqs):
        if span.accepted is None:
            g = j
            per_req.append(None)
            last_computed = r.computed + j - 1
        else:
            acc = span.accepted[:j, i]
            g = int(acc.sum())
            per_req.append(acc)
            last_computed = r.computed + g - int(acc[-1])
        blocks = max(-(-(last_computed + look) // block_size) - r.n_blocks, 0)
        new_blocks += blocks
        r.n_blocks += blocks
        r.computed += g
        r.num_tokens += g
        r.generated += g
        generated += g
        if r.generated >= r.target:
            finished.append(r)
    return Applied(per_req, new_blocks, generated, finished)
