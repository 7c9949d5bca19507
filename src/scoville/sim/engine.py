"""SimEngine: the simulated serving deployment behind ``scoville.sim.engine_api.ServingEngine``.

A deployment is a set of instances (``scoville.sim.scheduler.Instance``), each a
model replica with its own scheduler, KV cache and clock, behind a router:

* **unified** — ``replicas`` instances each run prefill and decode together
  (chunked prefill mixed into decode steps);
* **disaggregated** — a prefill pool computes prompts and emits nothing; each
  prompt's KV is copied to a decode-pool instance (``StepCost.kv_transfer_time``)
  and the first token reaches the client only when that copy lands, so TTFT
  includes the transfer, and decode steps never wait behind long prefills.

Time advances by discrete events in global order: an instance's next *step*
is keyed by its start (a step that started before a new arrival is in flight
and does not see it) and a planned decode *span* by its end (its first
request completion). Committing units in key order keeps causality across
instances even though each span covers hundreds of steps in one numpy call.

Two output modes, one simulation: ``token_events=True`` (the emulator) returns
a ``TokenEvent`` per token or speculative group; ``token_events=False`` (the
virtual-time driver) returns only the finishing event of each request and keeps
its token timestamps as numpy arrays (``pop_trace``), which is what makes a
full sweep take seconds instead of minutes.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from scoville.sim.config import ParallelConfig, SimConfig, SimConfigError
from scoville.sim.engine_api import EngineStats, TokenEvent
from scoville.sim.kvcache import HostTier, KVCache
from scoville.sim.request import Req
from scoville.sim.request import flush as _flush
from scoville.sim.scheduler import Instance
from scoville.sim.span import Span
from scoville.workload.spec import RequestSpec

if TYPE_CHECKING:
    from scoville.sim.cost import StepCost


_MAX_SESSIONS = 100_000  # sessions whose last turn's cached blocks the engine remembers


@dataclass
class RequestTrace:
    """Everything the driver needs to write one RequestRecord."""

    request_id: str
    t_first: float | None
    t_done: float
    times: np.ndarray       # arrival time of each chunk
    counts: np.ndarray      # tokens in each chunk
    output_tokens: int
    cached_tokens: int
    error: str | None = None


def block_keys(spec: RequestSpec, block_size: int) -> list[Hashable]:
    """Prefix-cache keys of the engine blocks fully covered by the spec's hashed prompt blocks.

    The workload hashes blocks of ``spec.block_size`` tokens, the engine caches
    blocks of ``block_size``; an engine block's content is fixed by every workload
    block up to its last token, so its key chains the previous key with the
    workload hashes it overlaps (equal keys ⇔ equal prefixes, as in vLLM).
    """
    hashes, wbs = spec.block_hashes, spec.block_size
    if not hashes or wbs <= 0:
        return []
    covered = min(len(hashes) * wbs, spec.input_tokens)
    keys: list[Hashable] = []
    prev: Hashable = 0
    for j in range(covered // block_size):
        first = (j * block_size) // wbs
        last = ((j + 1) * block_size - 1) // wbs
        prev = hash((prev, hashes[first:last + 1], (j * block_size) % wbs))
        keys.append(prev)
    return keys


@lru_cache(maxsize=256)
def _step_cost(model: str, hardware: str, tp: int, ep: int, dp: int, precision: str | None, kv_dtype: str | None,
               framework: str = "vllm", backend: str = "auto", drafts: int = 0,
               profile: str | None = None, moe_kernel: str = "auto", expert_slots: int = 0,
               serial_host: bool = False) -> StepCost:
    from scoville.sim.cost import Parallel, StepCost

    costs, factor = None, 1.0
    if profile is not None:
        from scoville.sim.profile import load_profile

        prof = load_profile(profile)
        prof.check_applies(hardware, model, framework)
        costs, factor = prof.framework_costs(), prof.kernel_factor
    return StepCost(model, hardware, Parallel(tp=tp, ep=ep, dp=dp, expert_slots=expert_slots), precision, kv_dtype,
                    framework=framework, backend=backend, drafts=drafts, framework_costs=costs, kernel_factor=factor,
                    calibrated_sigma=prof.sigma if profile is not None else None, moe_kernel=moe_kernel,
                    serial_host=serial_host)


def clear_cost_caches() -> None:
    """Forget every cached cost model (after the framework costs or a catalog file changed in-process)."""
    _step_cost.cache_clear()
    from scoville.sim import search

    search._default_max.cache_clear()


def seq_reserve_blocks(cost: object, block_size: int) -> int:
    """Blocks of ``block_size`` full-attention tokens that one sequence's sliding-window KV occupies.

    ``StepCost.kv_capacity_tokens`` sizes the pool in full-attention tokens; sliding-window layers hold a
    fixed ``window`` tokens per running sequence out of the same memory (as vLLM's hybrid allocator does),
    so each admitted sequence reserves this many blocks on top of its token blocks.
    """
    per_seq = float(getattr(cost, "kv_bytes_per_seq", 0.0))
    per_block = float(getattr(cost, "kv_bytes_per_token", 0.0)) * block_size
    if per_seq <= 0.0 or per_block <= 0.0:
        return 0
    return math.ceil(per_seq / per_block)


def step_cost(config: SimConfig, parallel: ParallelConfig) -> StepCost:
    """The (cached) cost model of one instance of ``config`` with ``parallel``: its steps pay the host work an
    overlap scheduler would hide where the config runs without one (``SimConfig.schedules_ahead``)."""
    drafts = config.speculative.num_draft_tokens if config.speculative else 0
    return _step_cost(config.model, config.hardware, parallel.tp, parallel.ep, parallel.dp,
                      config.precision, config.kv_dtype, config.framework, config.cost_backend, drafts,
                      config.profile, config.moe_kernel, parallel.expert_slots or 0, not config.schedules_ahead())


class SimEngine:
    """A simulated deployment: router + instances; implements ``ServingEngine``."""

    def __init__(self, config: SimConfig, *, seed: int = 0, token_events: bool = True,
                 cost_for: Callable[[ParallelConfig], StepCost] | None = None) -> None:
        self.config = config
        self.token_events = token_events
        self._cost_for = cost_for or (lambda p: step_cost(config, p))
        self._rng = np.random.default_rng([seed, 0x5EED])
        self.instances: list[Instance] = []
        self.prefill_pool: list[Instance] = []
        self.decode_pool: list[Instance] = []
        d = config.disaggregation
        if d is None:
            self.prefill_pool = [self._make(f"r{i}", "unified", config.parallel, config.max_num_seqs,
                                            config.max_num_batched_tokens) for i in range(config.replicas)]
            self.decode_pool = self.prefill_pool
            self.instances = list(self.prefill_pool)
        else:
            self.prefill_pool = [self._make(f"p{i}", "prefill", d.prefill.parallel,
                                            d.prefill.max_num_seqs or config.max_num_seqs,
                                            d.prefill.max_num_batched_tokens or config.max_num_batched_tokens)
                                 for i in range(d.prefill.replicas)]
            self.decode_pool = [self._make(f"d{i}", "decode", d.decode.parallel,
                                           d.decode.max_num_seqs or config.max_num_seqs,
                                           d.decode.max_num_batched_tokens or config.max_num_batched_tokens)
                                for i in range(d.decode.replicas)]
            self.instances = self.prefill_pool + self.decode_pool
            self._xfer_cost = self._cost_for(d.prefill.parallel)
        # The framework's per-request host time (HTTP, tokenisation) before a request reaches a scheduler.
        # Each instance's front end serves requests one at a time (vLLM's API server hands a burst to the
        # engine one by one): a burst reaches the scheduler one request time apart, not all together.
        fw = self._cost_for(config.parallel if d is None else d.prefill.parallel).framework
        self._request_delay = fw.request_overhead_ms * 1e-3
        self._frontend_free: dict[str, float] = {}   # instance -> when its front end is next free
        self._reqs: dict[str, Req] = {}
        self._outbox: list[TokenEvent] = []
        self._traces: dict[str, RequestTrace] = {}
        self._rr = itertools.count()
        # session id -> (hash-derived keys of its last prompt, keys its KV was cached under, tokens held)
        self._sessions: dict[str, tuple[list[Hashable], list[Hashable], int]] = {}
        self.now = 0.0

    def _make(self, name: str, role: str, parallel: ParallelConfig, max_seqs: int, budget: int) -> Instance:
        cfg = self.config
        cost = self._cost_for(parallel)
        cap = cfg.kv_capacity_tokens
        if cap is None:
            cap = cost.kv_capacity_tokens(cfg.gpu_memory_utilization, budget)
        blocks = int(cap) // cfg.block_size
        if blocks < 1:
            raise SimConfigError(
                f"{cfg.model} does not fit on {parallel.accelerators} × {cfg.hardware} with tp={parallel.tp} "
                f"ep={parallel.ep} dp={parallel.dp}: no memory left for KV cache; use more accelerators per instance")
        block_bytes = float(getattr(cost, "kv_bytes_per_token", 0.0)) * cfg.block_size
        seq_blocks = seq_reserve_blocks(cost, cfg.block_size)
        if seq_blocks >= blocks:
            raise SimConfigError(
                f"{cfg.model}'s per-sequence sliding-window KV ({seq_blocks} blocks) does not fit in the "
                f"{blocks} KV blocks of one instance; give it more memory or kv_capacity_tokens")
        host = None
        if cfg.host_offload is not None:
            host = HostTier(int(cfg.host_offload.capacity_gb * 1e9 // block_bytes), block_bytes,
                            cfg.host_offload.bandwidth_gbps * 1e9)
        kv = KVCache(blocks, cfg.block_size, prefix_caching=cfg.enable_prefix_caching and role != "decode", host=host)
        seed = int(self._rng.integers(2**63))
        inst = Instance(name, role, cost, kv, max_num_seqs=max_seqs, max_num_batched_tokens=cost.rank_budget(budget),
                        chunked_prefill=cfg.chunked_prefill, speculative=cfg.speculative,
                        rng=np.random.default_rng(seed), emit=self._emit, emit_span=self._emit_span,
                        finish=self._on_finish, handoff=self._handoff if role == "prefill" else None,
                        reuse_reply_blocks=cfg.reuse_reply_blocks, seq_blocks=seq_blocks,
                        recv_interval=cfg.scheduler_recv_interval,
                        batch_wait=cfg.batch_wait if role == "unified" else None, attention_dp=parallel.dp,
                        adp_balance=cfg.attention_dp_balance if role == "unified" else None,
                        schedules_ahead=cfg.schedules_ahead() and role == "unified",
                        # a prefill instance hands a request on after its first token: it holds the prompt only
                        reserve_whole_length=cfg.reserves_whole_length() and role != "prefill")
        inst.lazy = not self.token_events and cfg.speculative is None
        return inst

    # ---- ServingEngine -------------------------------------------------------------------------

    def submit(self, spec: RequestSpec, now: float) -> None:
        """Route a request arriving at ``now`` to an instance's queue."""
        if spec.request_id in self._reqs:
            raise ValueError(f"request id {spec.request_id!r} is already in flight")
        keys = block_keys(spec, self.config.block_size) if self.config.enable_prefix_caching else []
        if keys and spec.session_id in self._sessions:
            keys = self._session_keys(spec, keys)
        req = Req(spec, keys)
        inst = self._route(req, self.prefill_pool)
        why = self._never_fits(req, inst)
        if why:
            self._fail(req, now, why)
            return
        self._reqs[req.rid] = req
        ready = max(now, self._frontend_free.get(inst.name, now)) + self._request_delay
        self._frontend_free[inst.name] = ready
        inst.push(req, ready)

    def cancel(self, request_id: str, now: float) -> None:
        """Drop a request and free its KV blocks; its unsent events are discarded."""
        req = self._reqs.pop(request_id, None)
        if req is None:
            return
        if req.instance is not None:
            req.instance.remove(req)
        self._outbox = [e for e in self._outbox if e.request_id != request_id]
        self._traces.pop(request_id, None)

    def next_event_time(self) -> float | None:
        """A time by which the engine will have produced its next event or advanced a step.

        Exact for events already computed or planned; otherwise the next step's start plus the
        fastest step the cost model allows, so waking then always makes progress.
        """
        times = [e.t for e in self._outbox]
        for inst in self.instances:
            if inst.plan is not None:
                times.append(float(inst.plan.ends[0]))
                continue
            s = inst.next_start()
            if s is not None:
                times.append(s + max(float(inst.timer.step_time(1, 1, 1.0, 1.0)), 1e-9))
        return min(times) if times else None

    def peek(self, until: float) -> list[TokenEvent]:
        """Events of steps already committed that fall due by ``until`` (the next step's, in the emulator)."""
        return [e for e in self._outbox if e.t <= until]

    def advance(self, until: float, *, stop_at_finish: bool = False) -> list[TokenEvent]:
        """Run every instance up to ``until``; the events with ``t <= until``, in time order.

        With ``stop_at_finish`` the run stops at the first request completion
        before ``until`` (the virtual-time driver's closed loop reacts to it).
        """
        bound = until
        instances = self.instances
        while True:
            best: Instance | None = None
            best_key = math.inf
            for inst in instances:
                if inst.plan is not None:
                    key = inst.plan.end
                    if key > bound:
                        continue
                else:
                    s = inst.next_start()
                    if s is None or s >= bound:
                        continue
                    key = s
                if key < best_key:
                    best, best_key = inst, key
            if best is None:
                break
            fin = best.commit() if best.plan is not None else best.act()
            if fin is not None and stop_at_finish:
                bound = min(bound, fin)
        for inst in instances:
            if inst.plan is not None:
                inst.commit(bound)
        if math.isfinite(bound):
            self.now = max(self.now, bound)
        if not self._outbox:
            return []
        ready = [e for e in self._outbox if e.t <= bound]
        if len(ready) == len(self._outbox):
            self._outbox = []
        else:
            self._outbox = [e for e in self._outbox if e.t > bound]
        ready.sort(key=lambda e: e.t)
        return ready

    def stats(self) -> EngineStats:
        c = [i.c for i in self.instances]
        used = sum(i.kv.used for i in self.instances)
        total = sum(i.kv.num_blocks for i in self.instances)
        return EngineStats(
            running=sum(i.num_running() for i in self.instances),
            waiting=sum(len(i.waiting) + len(i.arrivals) for i in self.instances),
            kv_usage=used / total if total else 0.0,
            prompt_tokens_total=sum(x.prompt_tokens for x in c),
            generation_tokens_total=sum(x.generation_tokens for x in c),
            prefix_cache_queries=sum(x.prefix_queries for x in c),
            prefix_cache_hits=sum(x.prefix_hits for x in c),
            preemptions_total=sum(x.preemptions for x in c),
        )

    # ---- beyond the protocol -------------------------------------------------------------------

    def counters(self) -> dict[str, int]:
        """All cumulative counters summed over instances (recompute, host-tier traffic, steps...)."""
        out: dict[str, int] = {}
        for inst in self.instances:
            for name, value in inst.c.as_dict().items():
                out[name] = out.get(name, 0) + value
        return out

    @property
    def kv_capacity_tokens(self) -> int:
        """KV tokens of the smallest instance, less one sequence's fixed sliding-window KV: a request longer
        than this can never be scheduled."""
        return min(i.kv.num_blocks - i.seq_blocks for i in self.instances) * self.config.block_size

    def pop_trace(self, request_id: str) -> RequestTrace:
        """The token timeline of a finished request (``token_events=False`` mode)."""
        return self._traces.pop(request_id)

    def idle(self) -> bool:
        return not self._outbox and not any(i.has_work() for i in self.instances)

    # ---- internals -----------------------------------------------------------------------------

    def _route(self, req: Req, pool: list[Instance]) -> Instance:
        if len(pool) == 1:
            return pool[0]
        policy = self.config.router
        if policy == "round_robin":
            return pool[next(self._rr) % len(pool)]
        if policy == "prefix_affinity" and req.keys:
            limit = min(len(req.keys), (req.num_tokens - 1) // self.config.block_size)
            best = max(range(len(pool)), key=lambda i: (sum(pool[i].kv.match(req.keys, limit)), -pool[i].load(), -i))
            return pool[best]
        return min(pool, key=Instance.load)

    def _never_fits(self, req: Req, inst: Instance) -> str | None:
        drafts = self.config.speculative.num_draft_tokens if self.config.speculative else 0
        need = inst.kv.blocks_for(req.prompt + req.target + drafts)
        pools = [inst] if self.config.disaggregation is None else [inst, self.decode_pool[0]]
        for p in pools:
            if need + p.seq_blocks > p.kv.num_blocks:
                return (f"request needs {need + p.seq_blocks} KV blocks ({req.prompt}+{req.target} tokens"
                        f"{f' + {p.seq_blocks} sliding-window' if p.seq_blocks else ''}) but instance {p.name} "
                        f"holds {p.kv.num_blocks}; shorten it or give the instance more memory")
        if not self.config.chunked_prefill and req.prompt > inst.rank_budget:
            return (f"prompt of {req.prompt} tokens exceeds the {inst.rank_budget} tokens an attention rank "
                    f"schedules (max_num_batched_tokens) with chunked_prefill off")
        return None

    def _fail(self, req: Req, now: float, why: str) -> None:
        ev = TokenEvent(req.rid, now, 0, finished=True, error=why)
        self._outbox.append(ev)
        if not self.token_events:
            self._traces[req.rid] = RequestTrace(req.rid, None, now, np.empty(0), np.empty(0, dtype=np.int64),
                                                 0, 0, error=why)

    def _emit(self, req: Req, t: float, count: int, finished: bool) -> None:
        first = req.t_first is None
        if first:
            req.t_first = t
        if self.token_events:
            if finished:
                self._reqs.pop(req.rid, None)
            self._outbox.append(TokenEvent(req.rid, t, count, finished=finished,
                                           cached_tokens=req.cached_tokens if first else 0))
        else:
            req.pending_times.append(t)
            req.pending_counts.append(count)

    def _emit_span(self, span: Span, steps: int, per_req: list[np.ndarray | None]) -> None:
        ends = span.ends[:steps]
        if not self.token_events:
            ones = None
            for r, acc in zip(span.reqs, per_req, strict=True):
                if r.pending_times:
                    _flush(r)
                r.times.append(ends)
                if acc is None:
                    if ones is None:
                        ones = np.ones(steps, dtype=np.int64)
                    r.counts.append(ones)
                else:
                    r.counts.append(acc)
            return
        out = self._outbox
        for r, acc in zip(span.reqs, per_req, strict=True):
            rid = r.rid
            done = r.generated >= r.target
            ts = ends.tolist()
            cs = [1] * steps if acc is None else acc.tolist()
            for t, c in zip(ts, cs, strict=True):
                if c:
                    out.append(TokenEvent(rid, t, c))
            if done and out and out[-1].request_id == rid:
                last = out.pop()
                out.append(TokenEvent(rid, last.t, last.count, finished=True))
                self._reqs.pop(rid, None)

    def _session_keys(self, spec: RequestSpec, keys: list[Hashable]) -> list[Hashable]:
        """Map a session's next prompt onto the blocks its previous turn left cached.

        Only when the new prompt really extends the previous one (its hashed
        prefix matches and it is at least as long as prompt + reply): then the
        leading blocks are the previous turn's prompt and reply, token for token.
        """
        prev_prompt, prev_keys, prev_tokens = self._sessions.pop(spec.session_id)  # type: ignore[arg-type]
        if keys[:len(prev_prompt)] != prev_prompt or spec.input_tokens < prev_tokens:
            return keys
        n = min(len(prev_keys), spec.input_tokens // self.config.block_size)
        return prev_keys[:n] + keys[n:]

    def _on_finish(self, req: Req, t: float) -> None:
        if req.final_keys and req.spec.session_id:
            orig = block_keys(req.spec, self.config.block_size)
            self._sessions[req.spec.session_id] = (orig, req.final_keys, req.prompt + req.generated)
            if len(self._sessions) > _MAX_SESSIONS:  # a long-lived emulator: forget the oldest
                del self._sessions[next(iter(self._sessions))]
        self._reqs.pop(req.rid, None)
        if self.token_events:
            return
        if req.pending_times:
            _flush(req)
        times = np.concatenate(req.times) if req.times else np.empty(0)
        counts = np.concatenate(req.counts) if req.counts else np.empty(0, dtype=np.int64)
        keep = counts > 0
        if not keep.all():
            times, counts = times[keep], counts[keep]
        self._traces[req.rid] = RequestTrace(req.rid, req.t_first, t, times, counts, req.generated,
                                             req.cached_tokens)
        req.times, req.counts = [], []
        self._outbox.append(TokenEvent(req.rid, t, 0, finished=True))

    def _handoff(self, req: Req, t: float) -> None:
        """Prefill done at ``t``: copy the KV to a decode instance; the first token arrives with it, after the
        framework's handover (``FrameworkCosts.disagg_handover_ms``), when the decode instance takes the request."""
        d = self.config.disaggregation
        assert d is not None
        dec = self._route(req, self.decode_pool)
        ready = t + self._xfer_cost.handover_time(req.prompt, d.kv_transfer == "scaleout")
        req.kv_ready = True
        req.next_register = -1
        self._emit(req, ready, 1, False)
        dec.push(req, ready)
