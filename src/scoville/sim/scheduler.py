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
Three framework settings delay admissions: a poll interval (SGLang's
``--scheduler-recv-interval``), TensorRT-LLM's batch waiting, which holds
new prompts while sequences decode so that several start together, and
TensorRT-LLM's attention-DP balance, which holds them until every attention
rank has one (a request is given a rank when it arrives: the one with the
fewest requests, as TensorRT-LLM's router does).

The parts follow vLLM v1's split: the scheduler *decides* a step as a
``StepPlan`` (``sim/stepplan.py``), asks the ``KVManager`` (``sim/kvmanager.py``)
for blocks, has the plan priced, then applies its outcome. Decoding requests
in record mode advance lazily as a ``DecodeGroup`` (``sim/decode_group.py``),
and a batch that cannot change runs as a planned ``Span`` (``sim/span.py``).
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from scoville.sim.counters import InstanceCounters
from scoville.sim.decode_group import DecodeGroup
from scoville.sim.drafts import Drafts
from scoville.sim.kvcache import KVCache
from scoville.sim.kvmanager import KVManager
from scoville.sim.request import Req
from scoville.sim.span import Span, apply_span, first_steps, plan_span
from scoville.sim.stepplan import StepPlan, StepTimer

if TYPE_CHECKING:
    from scoville.sim.config import AttentionDpBalanceConfig, BatchWaitConfig, SpeculativeConfig


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
        speculative: SpeculativeConfig | None,
        rng: np.random.Generator,
        emit: Callable[[Req, float, int, bool], None],
        emit_span: Callable[[Span, int, list[np.ndarray | None]], None],
        finish: Callable[[Req, float], None],
        handoff: Callable[[Req, float], None] | None = None,
        reuse_reply_blocks: bool = False,
        seq_blocks: int = 0,
        recv_interval: int = 1,
        batch_wait: BatchWaitConfig | None = None,
        attention_dp: int = 1,
        adp_balance: AttentionDpBalanceConfig | None = None,
        schedules_ahead: bool = False,
        reserve_whole_length: bool = False,
    ) -> None:
        self.name = name
        self.seq_blocks = seq_blocks        # blocks of sliding-window KV every admitted sequence holds
        self.role = role                    # unified | prefill | decode
        self.timer = timer
        self.kv = kv
        self.max_num_seqs = max_num_seqs
        # Under attention data parallelism each of the ``attention_dp`` ranks schedules its own token budget and
        # holds a prompt's chunk whole: the instance's budget is their sum, a chunk at most a rank's budget less
        # the rank's share of the step's decode tokens (``_chunk_room``).
        self.rank_budget = max_num_batched_tokens
        self.budget = max_num_batched_tokens * attention_dp
        self.chunked = chunked_prefill
        self.drafts = Drafts(speculative.num_draft_tokens if speculative else 0,
                             speculative.acceptance_rate if speculative else 0.0, rng)
        self._emit, self._emit_span, self._finish, self._handoff = emit, emit_span, finish, handoff
        self.clock = 0.0
        self.arrivals: list[tuple[float, int, Req]] = []
        self._seq = itertools.count()
        self.waiting: deque[Req] = deque()
        self.running: list[Req] = []
        self.plan: Span | None = None
        self.c = InstanceCounters()
        self.kvm = KVManager(kv, self.c, seq_blocks=seq_blocks, reuse_reply_blocks=reuse_reply_blocks,
                             reserve_whole_length=reserve_whole_length, draft_tokens=self.drafts.drafts)
        # (durations, num_tokens, num_seqs, attn_ctx, kv_tokens) of every step, kept only for the
        # utilisation power model (None = off, the default: it costs memory at low concurrency).
        self.steplog: list[tuple[Any, ...]] | None = None
        # Record mode without speculative decoding: decoding requests leave ``running`` for the lazy group,
        # where a step costs O(1) for all of them.
        self.lazy = False
        self.group = DecodeGroup(kv.block_size)
        self._last_push: float | None = None
        self._gap: float | None = None                      # moving mean of the time between arrivals
        # requests that reached the instance are taken in at a poll: every step, or every ``recv_interval`` decode
        # steps (SGLang's --scheduler-recv-interval), at once after a step with prompt tokens and when idle
        self.recv_interval = recv_interval
        self._since_poll = recv_interval
        # An asynchronous scheduler (SimConfig.async_scheduling) formed this step when the last one started, so a
        # busy instance takes in only what had arrived by then: the start of the step that ran last.
        self.schedules_ahead = schedules_ahead
        self._last_start: float | None = None
        # TensorRT-LLM's batch waiting (BatchWaitConfig): the steps the waiting prompts have been held so far
        self.batch_wait = batch_wait
        self._held_steps = 0
        # TensorRT-LLM's attention-DP balance over ``attention_dp`` ranks (None below two ranks): the step count at
        # which its timeout counter last restarted (in between it counts every step, and restarts on its own each
        # ``timeout_iters`` steps), the steps held since every rank had a prompt, and how many of the waiting
        # prompts a release has let go (they start over as many steps as the token budget needs)
        self.adp_balance = adp_balance if attention_dp > 1 else None
        self.attention_dp = attention_dp
        self._adp_anchor = 0
        self._adp_batching = 0
        self._adp_released = 0

    # ---- queue ---------------------------------------------------------------------------------

    def push(self, req: Req, t: float) -> None:
        """A request reaches this scheduler at ``t``; any planned span is void (it did not see it)."""
        req.instance = self
        if self.adp_balance is not None:
            req.rank = self._least_loaded_rank()
        if self._last_push is not None and t >= self._last_push:
            gap = t - self._last_push
            self._gap = gap if self._gap is None else 0.8 * self._gap + 0.2 * gap
        self._last_push = t
        heapq.heappush(self.arrivals, (t, next(self._seq), req))
        self.plan = None  # a plan made without this arrival may no longer hold

    def _least_loaded_rank(self) -> int:
        """The attention rank with the fewest requests here (the lowest such rank), where a new one goes."""
        loads = [0] * self.attention_dp
        for r in itertools.chain(self.running, self.group.members, self.waiting, (a[2] for a in self.arrivals)):
            loads[r.rank] += 1
        return loads.index(min(loads))

    def load(self) -> int:
        """Requests here in any state (the least-loaded router's key)."""
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
            self.group.leave(req)
        elif req in self.running:
            self.running.remove(req)
        elif req in self.waiting:
            self.waiting.remove(req)
        else:
            self.arrivals = [a for a in self.arrivals if a[2] is not req]
            heapq.heapify(self.arrivals)
        self.kvm.drop(req)
        self.plan = None

    # ---- acting ----------------------------------------------------------------------------------

    def act(self) -> float | None:
        """Start the next step: execute it, or plan a decode span (``self.plan``).

        Returns the end time when a request finished in an executed step (for the
        engine's stop-at-first-finish), else None.
        """
        start = self.next_start()
        assert start is not None
        self.clock = start
        self._poll(start)
        if self.group and self._group_span_worth():
            self.running[:0] = self.group.dissolve()
        if self._span_ok():
            self.plan = plan_span(list(self.running), self.kv.block_size, self.kv.available, self.timer,
                                  self.drafts, self.clock, self.arrivals[0][0] if self.arrivals else None,
                                  ahead=self.schedules_ahead)
            if self.plan is not None:
                if self.lazy and len(self.plan.ends) < max(8, len(self.running) // 16):
                    self.plan = None  # a short span costs more than group steps (an arrival is near)
                else:
                    return None
        return self._step()

    def _poll(self, start: float) -> None:
        """Take in the requests that have arrived by ``start`` (by the last step's start when the scheduler runs a
        step ahead), unless the poll interval has not run out on a busy instance (an idle scheduler waits on its
        queue and takes a request in as it comes)."""
        busy = self.running or self.group or self.waiting
        if self.recv_interval > 1 and busy and self._since_poll < self.recv_interval:
            return
        self._since_poll = 0
        if busy and self.schedules_ahead and self._last_start is not None:
            start = self._last_start
        while self.arrivals and self.arrivals[0][0] <= start:
            self.waiting.append(heapq.heappop(self.arrivals)[2])

    def _group_span_worth(self) -> bool:
        """Dissolve the group for a decode span only when the span will be long enough to pay for it."""
        if not all(r.decoding for r in self.running):
            return False
        if self.waiting and len(self.running) + len(self.group) < self.max_num_seqs:
            return False
        steps = self.group.steps_to_first_finish()
        need = max(8, len(self.group) // 16)  # materialising costs ~1/16 of a step per member
        if steps is None or steps < need:
            return False
        dt = self.group.last_step_s()
        if dt is None:
            return False  # no step-time estimate yet
        # an arrival cuts the span short; estimate how many steps fit before the next one
        if dt > 0:
            if self.arrivals and (self.arrivals[0][0] - self.clock) / dt < need:
                return False
            if self._gap is not None and self._gap / dt < need:
                return False
        return True

    def _span_ok(self) -> bool:
        """True when the batch is fixed: all running requests decode and nothing waiting can start."""
        running = self.running
        if not running or self.group or not all(r.decoding for r in running):
            return False
        tokens = self.drafts.tokens
        need_tokens = sum(tokens(r) for r in running) if self.drafts.drafts else len(running)
        if need_tokens > self.budget:
            return False
        if self.waiting and len(running) < self.max_num_seqs and need_tokens < self.budget:
            kv = self.kv
            step_blocks = sum(max(kv.blocks_for(q.computed + tokens(q)) - q.n_blocks, 0) for q in running)
            if step_blocks > kv.available:
                return False  # a preemption is due: take the single-step path
            if self._admissible(self.waiting[0], self.budget - need_tokens, kv.available - step_blocks):
                return False
        return True

    def _admissible(self, r: Req, budget: int, available: int) -> bool:
        """Could ``r`` start this step with ``budget`` tokens and ``available`` blocks? (No side effects.)"""
        prefix = self.kvm.lookup(r)
        pend = r.num_tokens - prefix.base
        n = min(pend, budget)
        if n <= 0 or (not self.chunked and n < pend):
            return False
        return self.kvm.fits(r, prefix, n, available)

    # ---- single steps: decide, price, apply ------------------------------------------------------

    def _step(self) -> float | None:
        """One scheduler iteration (vLLM v1's schedule → execute → update_from_output); end time if one finished."""
        self.kvm.copy_s = 0.0
        step = self._decide()
        if step.empty:
            if self.kvm.copy_s:
                self.clock += self.kvm.copy_s
            return None
        end = self._execute(step)
        group_done = self._advance_group(end) if step.group else False
        seqs_done = self._apply(step, end)
        return end if group_done or seqs_done else None

    def _decide(self) -> StepPlan:
        """Spend the token budget: the decode group, then running requests in order, then admissions."""
        step = StepPlan()
        budget = self.budget
        if self.lazy:
            budget = self._schedule_group(step, budget)
        elif self.running and not all(r.decoding for r in self.running):
            # Decodes first, then prompt chunks (each group in admission order): the order the lazy group
            # imposes, kept here too so both output modes schedule identically.
            self.running[:] = ([r for r in self.running if r.decoding]
                               + [r for r in self.running if not r.decoding])
        budget = self._schedule_running(step, budget)
        if not step.preempted and not self._holding(step) and not self._balancing():
            admitted = len(self.waiting)
            self._schedule_waiting(step, budget)
            self._adp_released = max(self._adp_released - (admitted - len(self.waiting)), 0)
        return step

    def _holding(self, step: StepPlan) -> bool:
        """Whether TensorRT-LLM's batch waiting holds the waiting prompts this step: only while sequences decode,
        until ``iters`` steps have passed since the hold began or the held prompt tokens plus this step's decode
        tokens reach ``max_tokens_ratio`` of the budget (the count PyExecutor._waiting_requests keeps)."""
        wait = self.batch_wait
        if wait is None or not self.waiting:
            return False
        decode_tokens = step.decode_tokens
        if not decode_tokens:
            return False
        held_tokens = sum(r.num_tokens - r.computed for r in self.waiting)
        if self._held_steps >= wait.iters or held_tokens + decode_tokens >= wait.max_tokens_ratio * self.budget:
            self._held_steps = 0
            return False
        self._held_steps += 1
        return True

    def _balancing(self) -> bool:
        """Whether TensorRT-LLM's attention-DP balance holds the waiting prompts this step (PyExecutor
        ``_balance_adp_requests``): while some rank has no prompt, until its counter, which counts every step and
        restarts when it times out, reaches ``timeout_iters``; once every rank has one, ``batching_wait_iters``
        steps more; never while a rank has no sequence decoding. A release lets go of every prompt waiting then."""
        balance = self.adp_balance
        if balance is None or not self.waiting or self._adp_released:
            return False
        dp = self.attention_dp
        decoding = {r.rank for r in self.group.members}
        decoding.update(r.rank for r in self.running if r.decoding)
        step_no = self.c.steps + 1
        if len(decoding) < dp:
            return self._adp_release(step_no)
        prompts = {r.rank for r in self.waiting}
        prompts.update(r.rank for r in self.running if not r.decoding)
        if len(prompts) == dp:
            if self._adp_batching < balance.batching_wait_iters:
                self._adp_batching += 1
                self._adp_anchor = step_no
                return True
            self._adp_batching = 0
            return self._adp_release(step_no)
        if (step_no - self._adp_anchor) % balance.timeout_iters == 0:
            return self._adp_release(step_no)
        return True

    def _adp_release(self, step_no: int) -> bool:
        """Let the waiting prompts go and restart the balance's counter (False: nothing is held)."""
        self._adp_anchor = step_no
        self._adp_released = len(self.waiting)
        return False

    def _schedule_group(self, step: StepPlan, budget: int) -> int:
        """Move decoding requests into the lazy group and give it this step's blocks; the budget left."""
        group, running, kv = self.group, self.running, self.kv
        if running:
            keep: list[Req] = []
            for r in running:
                if r.decoding:
                    group.join(r)
                else:
                    keep.append(r)
            running[:] = keep
        if not group:
            return budget
        q = len(group.times) + 1
        need, late = group.blocks_due(q)
        # Out of blocks: preempt the newest requests (prefills first, then the latest to join).
        while need > kv.available and (running or group):
            if running:
                victim = running.pop()
            else:
                victim, need = group.pop_newest(q, late)
            self._preempt(victim, step)
        gn = len(group)
        if gn > budget:
            running[:0] = group.dissolve()
            return budget
        if not gn:
            group.clear()
            return budget
        kv.allocate(need)
        group.settle(q, late)
        step.group = gn
        return budget - gn

    def _schedule_running(self, step: StepPlan, budget: int) -> int:
        """Running requests in order: a decode or the next prompt chunk each, preempting the newest for blocks.

        The hot loop of mixed prefill+decode steps: kept free of method calls on the decode path.
        """
        running, kv, sched = self.running, self.kv, step.scheduled
        drafts, bs, chunked = self.drafts.drafts, kv.block_size, self.chunked
        decode_tokens = step.group
        i = 0
        while i < len(running):
            r = running[i]
            pend = r.num_tokens - r.computed
            dec = pend == 1 and r.generated > 0
            if dec:
                n = self.drafts.tokens(r) if drafts else 1
                decode_tokens += n
            else:   # a prompt chunk: what is left of it, within the budget and its rank's room
                n = min(pend, budget, self._chunk_room(decode_tokens))
            if n <= 0 or n > budget:
                break
            if not chunked and n < pend:
                i += 1
                continue
            need = -(-(r.computed + n) // bs) - r.n_blocks
            if need > 0:
                while need > kv.available and running:
                    victim = running.pop()
                    self._preempt(victim, step)
                    if victim is r:
                        break
                if i >= len(running):
                    break
                kv.allocate(need)
                r.n_blocks += need
            sched.append((r, n, dec))
            budget -= n
            i += 1
        return budget

    def _schedule_waiting(self, step: StepPlan, budget: int) -> None:
        """Admit waiting requests in order while the budget, ``max_num_seqs`` and KV blocks allow."""
        running, waiting = self.running, self.waiting
        if not waiting:
            return
        room = self._chunk_room(step.decode_tokens)
        while waiting and budget > 0 and len(running) + step.group < self.max_num_seqs:
            r = waiting[0]
            n = self._admit(r, min(budget, room))
            if n == 0:
                break
            waiting.popleft()
            running.append(r)
            step.scheduled.append((r, n, r.decoding))
            budget -= n

    def _chunk_room(self, decode_tokens: int) -> int:
        """The most prompt tokens one chunk may take this step: its rank's budget less the rank's share of the
        step's ``decode_tokens`` (the whole instance's budget left, on one rank)."""
        return max(self.rank_budget - -(-decode_tokens // self.attention_dp), 1)

    def _admit(self, r: Req, budget: int) -> int:
        """Allocate KV for a waiting request's first chunk; its token count, or 0 if it cannot start."""
        prefix = self.kvm.lookup(r)
        pend = r.num_tokens - prefix.base
        n = self.drafts.tokens(r) if r.generated and pend == 1 else min(pend, budget)
        if n <= 0 or (not self.chunked and n < pend):
            return 0
        return n if self.kvm.admit(r, prefix, n) else 0

    def _preempt(self, victim: Req, step: StepPlan) -> None:
        """Evict a request's KV (swapped out or dropped) and put it back at the head of the queue."""
        self.kvm.evict(victim)
        self.waiting.appendleft(victim)
        self.c.preemptions += 1
        step.preempted.append(victim)

    def _execute(self, step: StepPlan) -> float:
        """Price the step's batch with the cost model (plus owed host copies) and move the clock to its end."""
        batch = step.batch(self.group.ctx)
        dt = float(self.timer.step_time(*batch)) + self.kvm.copy_s
        if self.steplog is not None:
            self.steplog.append((dt,) + batch[:4])
        self._last_start = self.clock
        self.clock += dt
        self.c.steps += 1
        if self.recv_interval > 1:   # polling every step needs no count
            prompt = any(not dec for _, _, dec in step.scheduled)
            self._since_poll = self.recv_interval if prompt else self._since_poll + 1
        return self.clock

    def _advance_group(self, end: float) -> bool:
        """The group's members each took a token; retire those that finished (True if any did)."""
        group = self.group
        self.c.generation_tokens += len(group)
        done = group.advance(end)
        for r in done:
            self.kvm.retire(r)
            self._finish(r, end)
        if not group:
            group.clear()
        return bool(done)

    def _apply(self, step: StepPlan, end: float) -> bool:
        """Every scheduled sequence's outcome: tokens sampled and emitted, handoffs, finishes (True if any)."""
        finished = False
        for r, n, dec in step.scheduled:
            a = self._sampled(r, n, dec)
            if a is not None and self._deliver(r, a, end):
                finished = True
        return finished

    def _sampled(self, r: Req, n: int, dec: bool) -> int | None:
        """Tokens ``r`` gains from feeding ``n`` (None: a prompt chunk that leaves more prompt to compute)."""
        if dec:
            a = self.drafts.accepted(n - 1) if n > 1 else 1
            r.computed = r.num_tokens - 1 + a
        else:
            r.computed += n
            if r.next_register >= 0 and r.keys:
                self.kvm.register(r)
            if r.computed < r.num_tokens:
                return None
            a = 1
        return min(a, r.target - r.generated)

    def _deliver(self, r: Req, a: int, end: float) -> bool:
        """Hand ``a`` new tokens to the client (or the prompt's KV to a decode instance); True if ``r`` finished."""
        r.num_tokens += a
        r.generated += a
        self.c.generation_tokens += a
        done = r.generated >= r.target
        if self.role == "prefill" and not done:
            self.running.remove(r)
            self.kvm.release(r)
            self._handoff(r, end)  # type: ignore[misc]
            return False
        self._emit(r, end, a, done)
        if done:
            self.running.remove(r)
            self.kvm.retire(r)
            self._finish(r, end)
        return done

    # ---- spans -------------------------------------------------------------------------------

    def commit(self, bound: float | None = None) -> float | None:
        """Apply the planned span (only the steps that start before ``bound``); end time if a request finished."""
        span = self.plan
        assert span is not None
        j = len(span.ends) if bound is None else int(np.searchsorted(span.starts, bound, side="left"))
        # The steps after ``bound`` stay planned: they remain valid until an arrival or cancel lands here.
        self.plan = span.rest(j) if j < len(span.ends) else None
        if j <= 0:
            return None
        ends = span.ends[:j]
        applied = apply_span(span, j, self.kv.block_size, 1 + self.drafts.drafts)
        self.c.generation_tokens += applied.generated
        ok = self.kv.allocate(applied.new_blocks)
        assert ok, "span planned beyond the KV blocks available"
        self.c.steps += j
        if self.recv_interval > 1:   # the polls inside the span found nothing (it ends at the next arrival)
            since = self._since_poll + j
            self._since_poll = since if since <= self.recv_interval else (since - 1) % self.recv_interval + 1
        if self.steplog is not None:
            dts = np.diff(np.concatenate(([span.starts[0]], ends)))
            self.steplog.append((dts,) + tuple(first_steps(x, j) for x in span.inputs))
        self._last_start = float(span.starts[j - 1])
        self.clock = float(ends[-1])
        self._emit_span(span, j, applied.per_req)
        for r in applied.finished:
            self.running.remove(r)
            self.kvm.retire(r)
            self._finish(r, self.clock)
        return self.clock if applied.finished else None
