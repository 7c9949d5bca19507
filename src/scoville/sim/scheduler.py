"""One simulated serving instance: a vLLM-v1-style continuous-batching scheduler in virtual time.

Each step the scheduler spends a token budget (``max_num_batched_tokens``):
running requests first, in admission order — decodes take one token (1 + drafts
with speculative decoding), unfinished prompts take a chunk — then waiting
requests are admitted while budget, ``max_num_seqs`` and KV blocks allow
(an admitted request also holds ``seq_blocks`` for the per-sequence KV of
sliding-window layers, which does not grow with its length).
When a running request needs a block and none is left, the most recently
admitted request is preempted (its KV is freed and later recomputed, or
swapped to the host tier when there is one). The step's duration comes from
the cost model (``StepCost.step_time``) for exactly the batch that ran.

Speed (SIM-REFERENCE §4.5): when every running request is decoding and
nothing waiting can be admitted, the batch cannot change until a request
finishes, a KV block runs out or a new request arrives. The scheduler then
plans a *span* of steps at once — all their durations in one vectorised
``step_time`` call, token timestamps as one numpy array — instead of one
Python iteration per step. A span is a pure plan until committed, so the
engine can cut it at any time (an arrival routed here) and commit only the
steps that had started.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Hashable, Protocol

import numpy as np

from scoville.sim.kvcache import KVCache
from scoville.workload.spec import RequestSpec

if TYPE_CHECKING:
    from scoville.sim.config import SpeculativeConfig

_SPAN_CAP = 4096  # longest span planned at once (bounds the arrays of one plan)


def flush(req: Req) -> None:
    """Pack a request's single-step token times into one array chunk."""
    req.times.append(np.array(req.pt, dtype=np.float64))
    req.counts.append(np.array(req.pc, dtype=np.int64))
    req.pt, req.pc = [], []


def _first(x: Any, j: int) -> np.ndarray:
    """The first ``j`` per-step values of a step_time argument that may be a scalar."""
    a = np.asarray(x, dtype=np.float64)
    return np.full(j, float(a)) if a.ndim == 0 else a[:j]


class StepTimer(Protocol):
    """The slice of ``scoville.sim.cost.StepCost`` the scheduler uses."""

    def step_time(self, num_tokens: Any, num_seqs: Any, attn_ctx_tokens: Any, kv_tokens: Any,
                  decode_seqs: Any = None, decode_kv: Any = None) -> Any: ...


class Req:
    """Scheduler-side state of one request.

    ``num_tokens`` = prompt + generated tokens; ``computed`` = tokens whose KV is
    in the cache. A decoding request has ``num_tokens - computed == 1`` (the last
    sampled token is fed at the next step).
    """

    __slots__ = ("spec", "rid", "prompt", "target", "num_tokens", "computed", "generated", "n_blocks",
                 "hashed", "keys", "reg", "cached_tokens", "admitted", "t_first", "times", "counts",
                 "swapped", "lost", "kv_ready", "instance", "final_keys", "pt", "pc", "g0", "gid", "seq_res")

    def __init__(self, spec: RequestSpec, keys: list[Hashable]) -> None:
        self.spec = spec
        self.rid = spec.request_id
        self.prompt = spec.input_tokens
        self.target = spec.output_tokens
        self.num_tokens = spec.input_tokens
        self.computed = 0
        self.generated = 0
        self.n_blocks = 0
        self.seq_res = 0                   # blocks reserved for its per-sequence (sliding-window) KV while admitted
        self.hashed: list[Hashable] = []   # keys of the request's leading shared blocks
        self.keys = keys                   # prefix-cache keys of its full prompt blocks
        self.reg = 0                       # next key index to register; -1 = stop registering
        self.cached_tokens = 0
        self.admitted = False
        self.t_first: float | None = None
        self.times: list[np.ndarray] = []     # token-time chunks (record mode), one per span or flush
        self.counts: list[np.ndarray | None] = []
        self.pt: list[float] = []              # single-step token times not yet packed into ``times``
        self.pc: list[int] = []
        self.g0 = -1                           # decode-group step count when it joined (-1: not in the group)
        self.gid = -1                          # serial of its current group membership
        self.swapped = 0                   # tokens of KV parked in the host tier by a preemption
        self.lost = 0                      # tokens of KV thrown away by a preemption (to recompute)
        self.kv_ready = False              # arrived with its prompt KV (disaggregated decode)
        self.instance: "Instance | None" = None
        self.final_keys: list[Hashable] = []  # cached keys of its prompt + output blocks, at finish

    @property
    def decoding(self) -> bool:
        return self.generated > 0 and self.num_tokens - self.computed == 1


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

    def rest(self, j: int) -> "Span":
        """The plan without its first ``j`` steps (after committing them)."""
        if j == 0:
            return self
        return Span(starts=self.starts[j:], ends=self.ends[j:], reqs=self.reqs,
                    accepted=None if self.accepted is None else self.accepted[j:],
                    inputs=tuple(x[j:] if np.ndim(x) else x for x in self.inputs))  # type: ignore[arg-type]


class Counters:
    """Cumulative counters of one instance (Prometheus-style, never reset)."""

    __slots__ = ("prompt_tokens", "generation_tokens", "prefix_queries", "prefix_hits", "preemptions",
                 "recomputed_tokens", "swapped_out_blocks", "host_hit_tokens", "steps")

    def __init__(self) -> None:
        for name in self.__slots__:
            setattr(self, name, 0)


class Instance:
    """A model replica with its own scheduler, KV cache and clock."""

    def __init__(
        self,
        name: str,
        role: str,
        timer: StepTimer,
        kv: KVCache,
        *,
        max_num_seqs: int,
        max_num_batched_tokens: int,
        chunked_prefill: bool,
        speculative: "SpeculativeConfig | None",
        rng: np.random.Generator,
        emit: Callable[[Req, float, int, bool], None],
        emit_span: Callable[[Span, int, list[np.ndarray | None]], None],
        finish: Callable[[Req, float], None],
        handoff: Callable[[Req, float], None] | None = None,
        reuse_reply_blocks: bool = False,
        seq_blocks: int = 0,
    ) -> None:
        self.name = name
        # Blocks every admitted sequence holds whatever its length (sliding-window layers keep ``window``
        # tokens per sequence): taken at admission, given back when it leaves or is preempted.
        self.seq_blocks = seq_blocks
        self.reuse_reply_blocks = reuse_reply_blocks
        self.role = role                    # unified | prefill | decode
        self.timer = timer
        self.kv = kv
        self.max_num_seqs = max_num_seqs
        self.budget = max_num_batched_tokens
        self.chunked = chunked_prefill
        self.drafts = speculative.num_draft_tokens if speculative else 0
        self.accept = speculative.acceptance_rate if speculative else 0.0
        self.rng = rng
        self._emit, self._emit_span, self._finish, self._handoff = emit, emit_span, finish, handoff
        self.clock = 0.0
        self.arrivals: list[tuple[float, int, Req]] = []
        self._seq = itertools.count()
        self.waiting: deque[Req] = deque()
        self.running: list[Req] = []
        self.plan: Span | None = None
        self.extra = 0.0                    # host-tier copy time owed by the current step
        self.c = Counters()
        # (durations, num_tokens, num_seqs, attn_ctx, kv_tokens) of every step, kept only for the
        # utilisation power model (None = off, the default: it costs memory at low concurrency).
        self.steplog: list[tuple[Any, ...]] | None = None
        # The decode group (record mode, no speculative decoding): decoding requests that take one token in
        # every step, advanced lazily — a step costs O(1) for all of them; each member's state is
        # brought up to date ("materialised") only when it finishes, leaves, or the group dissolves.
        self.lazy = False
        self.group: dict[Req, None] = {}
        self.gtimes: list[float] = []                       # end time of each group step
        self.gctx = 0                                       # sum of members' KV lengths
        self._gfin: list[tuple[int, int, Req]] = []         # (group step of last token, gid, req)
        # Each member needs a new block every block_size steps, so members are counted by the phase
        # (step mod block_size) of their block boundary: a step's new blocks are one lookup, not a scan.
        self._gphase = [0] * kv.block_size
        self._gph: dict[Req, int] = {}
        self._gblock: list[tuple[int, int, Req]] = []       # (first block step, gid, req) when > block_size away
        self._gids = itertools.count()
        self._last_push: float | None = None
        self._gap: float | None = None                      # moving mean of the time between arrivals

    # ---- queue ---------------------------------------------------------------------------------

    def push(self, req: Req, t: float) -> None:
        req.instance = self
        if self._last_push is not None and t >= self._last_push:
            gap = t - self._last_push
            self._gap = gap if self._gap is None else 0.8 * self._gap + 0.2 * gap
        self._last_push = t
        heapq.heappush(self.arrivals, (t, next(self._seq), req))
        self.plan = None  # a plan made without this arrival may no longer hold

    def load(self) -> int:
        return len(self.running) + len(self.group) + len(self.waiting) + len(self.arrivals)

    def num_running(self) -> int:
        return len(self.running) + len(self.group)

    def has_work(self) -> bool:
        return bool(self.running or self.group or self.waiting or self.arrivals)

    def next_start(self) -> float | None:
        """When this instance's next step would start (None when idle)."""
        if self.running or self.group or self.waiting:
            return self.clock
        if self.arrivals:
            return max(self.clock, self.arrivals[0][0])
        return None

    def remove(self, req: Req) -> None:
        """Drop a request wherever it is and free its blocks at once (cancel)."""
        if req in self.group:
            self._materialize(req)
            del self.group[req]
        elif req in self.running:
            self.running.remove(req)
        elif req in self.waiting:
            self.waiting.remove(req)
        else:
            self.arrivals = [a for a in self.arrivals if a[2] is not req]
            heapq.heapify(self.arrivals)
        self._release(req)
        if self.kv.host is not None and ("swap", req.rid) in self.kv.host:
            self.kv.host.pop(("swap", req.rid))
        self.plan = None

    # ---- the lazy decode group -----------------------------------------------------------------

    def _join(self, r: Req) -> None:
        q = len(self.gtimes)
        r.g0, r.gid = q, next(self._gids)
        self.group[r] = None
        self.gctx += r.computed
        heapq.heappush(self._gfin, (q + r.target - r.generated, r.gid, r))
        bs = self.kv.block_size
        j1 = r.n_blocks * bs - r.computed + 1   # its first group step that crosses into a new block
        if j1 <= bs:
            ph = (q + j1) % bs
            self._gphase[ph] += 1
            self._gph[r] = ph
        else:
            heapq.heappush(self._gblock, (q + j1, r.gid, r))

    def _materialize(self, r: Req) -> None:
        """Bring a member up to date (tokens, KV length, blocks) and take it out of the group's sums."""
        k = len(self.gtimes) - r.g0
        if k:
            if r.pt:
                flush(r)
            r.times.append(np.array(self.gtimes[r.g0:], dtype=np.float64))
            r.counts.append(np.ones(k, dtype=np.int64))
            r.computed += k
            r.num_tokens += k
            r.generated += k
            r.n_blocks = max(r.n_blocks, -(-r.computed // self.kv.block_size))
        self.gctx -= r.computed
        ph = self._gph.pop(r, None)
        if ph is not None:
            self._gphase[ph] -= 1
        r.g0, r.gid = -1, -1

    def _dissolve(self) -> None:
        """Every member back into ``running`` (oldest first), with its state up to date."""
        members = list(self.group)
        for r in members:
            self._materialize(r)
        self.running[:0] = members
        self._clear_group()

    def _clear_group(self) -> None:
        self.group.clear()
        self._gfin, self._gblock = [], []
        self._gphase = [0] * self.kv.block_size
        self._gph.clear()
        self.gtimes = []
        self.gctx = 0

    def _group_span_worth(self) -> bool:
        """Dissolve the group for a decode span only when the span will be long enough to pay for it."""
        for r in self.running:
            if r.generated == 0 or r.num_tokens - r.computed != 1:
                return False
        if self.waiting and len(self.running) + len(self.group) < self.max_num_seqs:
            return False
        fin = self._gfin
        while fin and fin[0][2].gid != fin[0][1]:
            heapq.heappop(fin)
        if not fin:
            return False
        steps = fin[0][0] - len(self.gtimes)
        need = max(8, len(self.group) // 16)  # materialising costs ~1/16 of a step per member
        if steps < need:
            return False
        if len(self.gtimes) < 2:
            return False  # no step-time estimate yet
        # an arrival cuts the span short; estimate how many steps fit before the next one
        dt = self.gtimes[-1] - self.gtimes[-2]
        if dt > 0:
            if self.arrivals and (self.arrivals[0][0] - self.clock) / dt < need:
                return False
            if self._gap is not None and self._gap / dt < need:
                return False
        return True

    def _group_blocks(self, q: int) -> tuple[int, list[Req]]:
        """New blocks the group needs in group step ``q``, and members whose boundary becomes periodic."""
        heap, late = self._gblock, []
        while heap and heap[0][0] <= q:
            _, gid, r = heapq.heappop(heap)
            if r.gid == gid:
                late.append(r)
        return self._gphase[q % self.kv.block_size] + len(late), late

    def _retire(self, r: Req) -> None:
        """A finished request leaves: in a session, its output blocks stay cached for the next turn.

        A session's next prompt extends this one byte for byte (history + reply +
        new message), so, as vLLM does by hashing generated blocks too, the
        reply's full blocks are registered under session-scoped keys the engine
        maps onto the next turn's prompt (``SimEngine.submit``).
        """
        if (self.reuse_reply_blocks and self.kv.prefix_caching and r.spec.session_id and r.reg >= 0
                and len(r.hashed) == r.reg):
            full = r.computed // self.kv.block_size
            for j in range(len(r.hashed), full):
                k = r.keys[j] if j < len(r.keys) else ("sess", r.spec.session_id, r.spec.turn, j)
                if not self.kv.register(k):
                    break
                r.hashed.append(k)
            r.final_keys = list(r.hashed)
        self._release(r)

    def _release(self, req: Req) -> None:
        self.kv.release(req.hashed, req.n_blocks - len(req.hashed) + req.seq_res)
        req.hashed, req.n_blocks, req.seq_res = [], 0, 0

    # ---- acting ----------------------------------------------------------------------------------

    def act(self) -> float | None:
        """Start the next step: execute it, or plan a decode span (``self.plan``).

        Returns the end time when a request finished in an executed step (for the
        engine's stop-at-first-finish), else None.
        """
        start = self.next_start()
        assert start is not None
        self.clock = start
        while self.arrivals and self.arrivals[0][0] <= start:
            self.waiting.append(heapq.heappop(self.arrivals)[2])
        if self.group and self._group_span_worth():
            self._dissolve()
        if self._span_ok():
            self.plan = self._plan_span()
            if self.plan is not None:
                if self.lazy and len(self.plan.ends) < max(8, len(self.running) // 16):
                    self.plan = None  # a short span costs more than group steps (an arrival is near)
                else:
                    return None
        return self._step()

    # ---- single steps ------------------------------------------------------------------------

    def _decode_tokens(self, r: Req) -> int:
        return 1 + min(self.drafts, max(r.target - r.generated - 1, 0))

    def _preempt(self, victim: Req) -> None:
        host = self.kv.host
        if host is not None and victim.computed > 0 and host.put(("swap", victim.rid), victim.n_blocks):
            victim.swapped = victim.computed
            self.extra += host.transfer_time(victim.n_blocks)
            self.c.swapped_out_blocks += victim.n_blocks
        else:
            victim.lost = victim.computed
        self._release(victim)
        victim.computed = 0
        victim.reg = 0 if not victim.kv_ready else -1
        victim.kv_ready = False
        self.waiting.appendleft(victim)
        self.c.preemptions += 1

    def _admit(self, r: Req, budget: int) -> int:
        """Allocate KV for a waiting request's first chunk; its token count, or 0 if it cannot start."""
        kv, bs = self.kv, self.kv.block_size
        host = kv.host
        if r.swapped and host is not None and ("swap", r.rid) in host:
            pend = r.num_tokens - r.swapped
            n = self._decode_tokens(r) if r.generated and pend == 1 else min(pend, budget)
            if n <= 0 or (not self.chunked and n < pend):
                return 0
            blocks = kv.blocks_for(r.swapped + n)
            if blocks + self.seq_blocks > kv.available:
                return 0
            kv.allocate(blocks + self.seq_blocks)
            moved = host.pop(("swap", r.rid))
            self.extra += host.transfer_time(moved)
            r.n_blocks, r.computed, r.swapped, r.seq_res = blocks, r.swapped, 0, self.seq_blocks
            r.reg = -1  # restored KV is private; its prefix blocks were released to the cache at preemption
            return n
        if r.swapped:  # the host tier evicted its KV: recompute after all
            r.lost, r.swapped = r.swapped, 0
        hbm = host_hits = 0
        if r.kv_ready:
            computed0 = r.computed
        else:
            limit = min(len(r.keys), (r.num_tokens - 1) // bs)
            if limit > 0:
                hbm, host_hits = kv.match(r.keys, limit)
            computed0 = (hbm + host_hits) * bs
        pend = r.num_tokens - computed0
        n = self._decode_tokens(r) if r.generated and pend == 1 else min(pend, budget)
        if n <= 0 or (not self.chunked and n < pend):
            return 0
        hit_keys = r.keys[:hbm]
        total = kv.blocks_for(computed0 + n)
        new = total - hbm
        if new + self.seq_blocks > kv.available - kv.evictable_among(hit_keys):
            return 0
        kv.acquire(hit_keys)
        kv.allocate(new + self.seq_blocks)
        r.seq_res = self.seq_blocks
        r.hashed = list(hit_keys)
        r.reg = hbm if r.reg >= 0 else -1
        if host_hits:
            for k in r.keys[hbm:hbm + host_hits]:
                host.pop(k)  # type: ignore[union-attr]
                if kv.register(k):
                    r.hashed.append(k)
                    r.reg += 1
                else:
                    r.reg = -1
                    break
            self.extra += host.transfer_time(host_hits)  # type: ignore[union-attr]
            self.c.host_hit_tokens += host_hits * bs
        r.n_blocks, r.computed = total, computed0
        if not r.admitted:
            r.admitted = True
            r.cached_tokens = computed0 if not r.kv_ready else 0
            self.c.prompt_tokens += r.prompt
            if not r.kv_ready:
                self.c.prefix_queries += r.prompt
                self.c.prefix_hits += computed0
        if r.lost:
            self.c.recomputed_tokens += max(r.lost - computed0, 0)
            r.lost = 0
        r.kv_ready = False
        return n

    def _register(self, r: Req) -> None:
        """Share the request's newly full prompt blocks through the prefix cache."""
        full = min(r.computed // self.kv.block_size, len(r.keys))
        kv = self.kv
        while 0 <= r.reg < full and len(r.hashed) == r.reg:
            k = r.keys[r.reg]
            if not kv.register(k):
                r.reg = -1
                return
            r.hashed.append(k)
            r.reg += 1

    def _step(self) -> float | None:
        kv, running = self.kv, self.running
        budget = self.budget
        sched: list[tuple[Req, int, bool]] = []
        preempted = False
        self.extra = 0.0
        gn = 0
        if self.lazy:
            if running:
                keep = []
                for r in running:
                    if r.generated > 0 and r.num_tokens - r.computed == 1:
                        self._join(r)
                    else:
                        keep.append(r)
                running[:] = keep
            gn = len(self.group)
            if gn:
                q = len(self.gtimes) + 1
                need, late = self._group_blocks(q)
                ph_now = q % kv.block_size
                # Out of blocks: preempt the newest requests (prefills first, then the latest to join).
                while need > kv.available and (running or self.group):
                    if running:
                        victim = running.pop()
                    else:
                        victim = next(reversed(self.group))
                        self._materialize(victim)
                        del self.group[victim]
                        if victim in late:
                            late.remove(victim)
                        need = self._gphase[ph_now] + len(late)
                    self._preempt(victim)
                    preempted = True
                gn = len(self.group)
                if gn > budget:
                    self._dissolve()
                    gn = 0
                elif not gn:
                    self._clear_group()
                else:
                    kv.allocate(need)
                    ph = q % kv.block_size
                    for r in late:
                        self._gphase[ph] += 1
                        self._gph[r] = ph
                    budget -= gn
        elif running and any(not (r.generated > 0 and r.num_tokens - r.computed == 1) for r in running):
            # Decodes first, then prompt chunks (each group in admission order): the order the lazy group
            # imposes, kept here too so both output modes schedule identically.
            running[:] = ([r for r in running if r.generated > 0 and r.num_tokens - r.computed == 1]
                          + [r for r in running if not (r.generated > 0 and r.num_tokens - r.computed == 1)])
        i = 0
        drafts, bs, chunked = self.drafts, kv.block_size, self.chunked
        # The hot loop of mixed prefill+decode steps: kept free of method calls on the decode path.
        while i < len(running):
            r = running[i]
            pend = r.num_tokens - r.computed
            dec = pend == 1 and r.generated > 0
            if dec:
                n = self._decode_tokens(r) if drafts else 1
            else:
                n = pend if pend < budget else budget
            if n <= 0 or n > budget:
                break
            if not chunked and n < pend:
                i += 1
                continue
            need = -(-(r.computed + n) // bs) - r.n_blocks
            if need > 0:
                while need > kv.available and running:
                    victim = running.pop()
                    self._preempt(victim)
                    preempted = True
                    if victim is r:
                        break
                if i >= len(running):
                    break
                kv.allocate(need)
                r.n_blocks += need
            sched.append((r, n, dec))
            budget -= n
            i += 1
        if not preempted:
            while self.waiting and budget > 0 and len(running) + gn < self.max_num_seqs:
                r = self.waiting[0]
                n = self._admit(r, budget)
                if n == 0:
                    break
                self.waiting.popleft()
                running.append(r)
                sched.append((r, n, r.decoding))
                budget -= n
        if not sched and not gn:
            if self.extra:
                self.clock += self.extra
            return None
        nt = ns = nd = gn
        attn = kvt = kvd = float(self.gctx + gn)
        for r, n, dec in sched:
            nt += n
            ns += 1
            attn += n * r.computed + n * (n + 1) / 2
            kvt += r.computed + n
            if dec:
                nd += 1
                kvd += r.computed + n
        dt = float(self.timer.step_time(nt, ns, attn, kvt, nd, kvd)) + self.extra
        if self.steplog is not None:
            self.steplog.append((dt, nt, ns, attn, kvt))
        end = self.clock + dt
        self.clock = end
        self.c.steps += 1
        finished_at = None
        if gn:
            self.gtimes.append(end)
            self.gctx += gn
            self.c.generation_tokens += gn
            q = len(self.gtimes)
            fin = self._gfin
            while fin and fin[0][0] <= q:
                _, gid, r = heapq.heappop(fin)
                if r.gid != gid:
                    continue
                self._materialize(r)
                del self.group[r]
                self._retire(r)
                self._finish(r, end)
                finished_at = end
            if not self.group:
                self._clear_group()
        for r, n, dec in sched:
            if dec:
                a = self._accepted(n - 1) if n > 1 else 1
                r.computed = r.num_tokens - 1 + a
            else:
                r.computed += n
                if r.reg >= 0 and r.keys:
                    self._register(r)
                if r.computed < r.num_tokens:
                    continue
                a = 1
            a = min(a, r.target - r.generated)
            r.num_tokens += a
            r.generated += a
            self.c.generation_tokens += a
            done = r.generated >= r.target
            if self.role == "prefill" and not done:
                running.remove(r)
                self._release(r)
                self._handoff(r, end)  # type: ignore[misc]
                continue
            self._emit(r, end, a, done)
            if done:
                running.remove(r)
                self._retire(r)
                self._finish(r, end)
                finished_at = end
        return finished_at

    def _accepted(self, drafts: int) -> int:
        """Tokens one verify step yields: 1 + accepted drafts (each accepted with prob a, stop at first miss)."""
        u = self.rng.random()
        if self.accept <= 0.0:
            return 1
        if self.accept >= 1.0:
            return 1 + drafts
        return 1 + min(int(math.log(u) / math.log(self.accept)) if u > 0 else drafts, drafts)

    # ---- spans -------------------------------------------------------------------------------

    def _span_ok(self) -> bool:
        """True when the batch is fixed: all running requests decode and nothing waiting can start."""
        running = self.running
        if not running or self.group:
            return False
        for r in running:
            if r.generated == 0 or r.num_tokens - r.computed != 1:
                return False
        need_tokens = sum(self._decode_tokens(r) for r in running) if self.drafts else len(running)
        if need_tokens > self.budget:
            return False
        if self.waiting and len(running) < self.max_num_seqs and need_tokens < self.budget:
            r = self.waiting[0]
            kv = self.kv
            step_blocks = sum(max(kv.blocks_for(q.computed + self._decode_tokens(q)) - q.n_blocks, 0)
                              for q in running)
            if step_blocks > kv.available:
                return False  # a preemption is due: take the single-step path
            if self._admissible(r, self.budget - need_tokens, kv.available - step_blocks):
                return False
        return True

    def _admissible(self, r: Req, budget: int, available: int) -> bool:
        """Could ``r`` start this step with ``budget`` tokens and ``available`` blocks? (No side effects.)"""
        kv, bs = self.kv, self.kv.block_size
        if r.swapped and kv.host is not None and ("swap", r.rid) in kv.host:
            base = r.swapped
            hbm, hit_keys = 0, []
        elif r.kv_ready:
            base, hbm, hit_keys = r.computed, 0, []
        else:
            limit = min(len(r.keys), (r.num_tokens - 1) // bs)
            hbm, host_hits = kv.match(r.keys, limit) if limit > 0 else (0, 0)
            base, hit_keys = (hbm + host_hits) * bs, r.keys[:hbm]
        pend = r.num_tokens - base
        n = min(pend, budget)
        if n <= 0 or (not self.chunked and n < pend):
            return False
        return kv.blocks_for(base + n) - hbm + self.seq_blocks <= available - kv.evictable_among(hit_keys)

    def _plan_span(self) -> Span | None:
        reqs = list(self.running)
        kv, bs = self.kv, self.kv.block_size
        n = len(reqs)
        L = np.fromiter((r.computed for r in reqs), dtype=np.int64, count=n)
        nb = np.fromiter((r.n_blocks for r in reqs), dtype=np.int64, count=n)
        remaining = np.fromiter((r.target - r.generated for r in reqs), dtype=np.int64, count=n)
        k0 = int(min(remaining.min(), _SPAN_CAP))
        if self.drafts == 0:
            k = k0
            look = 1
            # blocks needed after j steps: ceil((L + j) / bs) - nb, summed; largest j that fits
            def need(j: int) -> int:
                return int(np.maximum(-(-(L + j) // bs) - nb, 0).sum())
            accepted = None
            c_before = None
        else:
            look = 1 + self.drafts
            u = self.rng.random((k0, n))
            a = self.accept
            if a <= 0.0:
                acc = np.ones((k0, n), dtype=np.int64)
            elif a >= 1.0:
                acc = np.full((k0, n), 1 + self.drafts, dtype=np.int64)
            else:
                g = np.floor(np.log(np.maximum(u, 1e-300)) / math.log(a)).astype(np.int64)
                acc = 1 + np.minimum(g, self.drafts)
            cum = np.cumsum(acc, axis=0)
            # first step at which each request reaches its target
            fin = np.argmax(cum >= remaining[None, :], axis=0)
            fin = np.where(cum[-1] >= remaining, fin, k0 - 1)
            k = int(fin.min()) + 1
            acc = acc[:k]
            cum = cum[:k]
            over = cum - remaining[None, :]
            acc = np.where(over > 0, np.maximum(acc - over, 0), acc)
            c_before = L[None, :] + np.vstack([np.zeros((1, n), dtype=np.int64), np.cumsum(acc, axis=0)[:-1]])
            blocks_at = np.maximum(-(-(c_before + look) // bs) - nb[None, :], 0).sum(axis=1)
            accepted = acc

            def need(j: int) -> int:
                return int(blocks_at[j - 1])
        avail = kv.available
        if need(1) > avail:
            return None  # the next step already preempts
        if need(k) > avail:
            lo, hi = 1, k  # need(lo) fits, need(hi) does not
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if need(mid) <= avail:
                    lo = mid
                else:
                    hi = mid
            k = lo
            if accepted is not None:
                accepted = accepted[:k]
                c_before = c_before[:k]  # type: ignore[index]
        if accepted is None:
            steps = np.arange(k, dtype=np.float64)
            ctx = float(L.sum()) + n * steps + n
            inputs: tuple[Any, Any, Any, Any] = (n, n, ctx, ctx)
            dt = self.timer.step_time(*inputs)
        else:
            ctx_sum = c_before.sum(axis=1).astype(np.float64)  # type: ignore[union-attr]
            kv_tokens = ctx_sum + n * look
            attn = look * ctx_sum + n * look * (look + 1) / 2
            inputs = (n * look, n, attn, kv_tokens)
            dt = self.timer.step_time(*inputs)
        dt = np.broadcast_to(np.asarray(dt, dtype=np.float64), (k,))
        ends = self.clock + np.cumsum(dt)
        starts = np.concatenate(([self.clock], ends[:-1]))
        if self.arrivals:
            cut = int(np.searchsorted(starts, self.arrivals[0][0], side="left"))
            if cut < k:
                k = max(cut, 1)
                ends, starts = ends[:k], starts[:k]
                if accepted is not None:
                    accepted = accepted[:k]
        return Span(starts=starts, ends=ends, reqs=reqs, accepted=accepted, inputs=inputs)

    def commit(self, bound: float | None = None) -> float | None:
        """Apply the planned span (only the steps that start before ``bound``); end time if a request finished."""
        span = self.plan
        assert span is not None
        j = len(span.ends) if bound is None else int(np.searchsorted(span.starts, bound, side="left"))
        # The steps after ``bound`` stay planned: they remain valid until an arrival or cancel lands here.
        self.plan = span.rest(j) if j < len(span.ends) else None
        if j <= 0:
            return None
        kv = self.kv
        ends = span.ends[:j]
        per_req: list[np.ndarray | None] = []
        new_blocks = 0
        bs = kv.block_size
        look = 1 + self.drafts
        finished = []
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
            blocks = max(-(-(last_computed + look) // bs) - r.n_blocks, 0)
            new_blocks += blocks
            r.n_blocks += blocks
            r.computed += g
            r.num_tokens += g
            r.generated += g
            self.c.generation_tokens += g
            if r.generated >= r.target:
                finished.append(r)
        ok = kv.allocate(new_blocks)
        assert ok, "span planned beyond the KV blocks available"
        self.c.steps += j
        if self.steplog is not None:
            dts = np.diff(np.concatenate(([span.starts[0]], ends)))
            self.steplog.append((dts,) + tuple(_first(x, j) for x in span.inputs))
        self.clock = float(ends[-1])
        self._emit_span(span, j, per_req)
        for r in finished:
            self.running.remove(r)
            self._retire(r)
            self._finish(r, self.clock)
        return self.clock if finished else None
