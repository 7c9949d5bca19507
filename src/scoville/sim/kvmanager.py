"""Request-level KV accounting of one instance, over the block pool of ``scoville.sim.kvcache``.

vLLM v1 splits its scheduler from a KV-cache manager that answers "how much of this request is already
cached?" and "give it blocks for n more tokens"; this is that manager. ``KVCache`` counts blocks and keys;
``KVManager`` knows requests: what a waiting request can reuse (its swapped-out KV, the prompt KV it arrived
with, or a cached prefix in HBM and the host tier), taking and giving back its blocks, sharing its full prompt
blocks, and parking or dropping its KV when it is preempted. Host-tier copies cost time: they add up in
``copy_s``, which the scheduler charges to the step that needs the data.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from scoville.sim.counters import InstanceCounters
from scoville.sim.kvcache import HostTier, KVCache
from scoville.sim.request import Req


@dataclass(frozen=True, slots=True)
class Prefix:
    """What a waiting request already has: ``base`` tokens of KV, from one source.

    ``swap``: its own KV parked in the host tier by a preemption; otherwise ``hbm`` cached prefix blocks
    resident in HBM followed by ``host`` blocks to load from the host tier (or the KV it arrived with).
    """

    base: int
    hbm: int = 0
    host: int = 0
    swap: bool = False


class KVManager:
    """Blocks, prefix sharing and host-tier traffic of the requests one instance runs."""

    def __init__(self, kv: KVCache, counters: InstanceCounters, *, seq_blocks: int, reuse_reply_blocks: bool,
                 reserve_whole_length: bool = False, draft_tokens: int = 0) -> None:
        self.kv = kv
        self.c = counters
        # TensorRT-LLM's default admission (``SimConfig.reserves_whole_length``): a request takes the blocks of its
        # whole length (prompt, answer and the drafts of its last verify step) when it starts, so it never needs
        # more and none is preempted; otherwise it takes blocks as its tokens come, as vLLM's and SGLang's do.
        self.reserve_whole_length = reserve_whole_length
        self.draft_tokens = draft_tokens
        # Blocks every admitted sequence holds whatever its length (sliding-window layers keep ``window``
        # tokens per sequence): taken at admission, given back when it leaves or is preempted.
        self.seq_blocks = seq_blocks
        self.reuse_reply_blocks = reuse_reply_blocks
        self.copy_s = 0.0               # host-tier copy time owed by the current step

    # ---- admission -----------------------------------------------------------------------------

    def _swapped_in_host(self, r: Req) -> bool:
        host = self.kv.host
        return bool(r.swapped) and host is not None and ("swap", r.rid) in host

    def lookup(self, r: Req) -> Prefix:
        """The KV a waiting request can start from (no side effects: the span planner asks too)."""
        if self._swapped_in_host(r):
            return Prefix(r.swapped, swap=True)
        if r.kv_ready:
            return Prefix(r.computed)
        bs = self.kv.block_size
        limit = min(len(r.keys), (r.num_tokens - 1) // bs)
        hbm, host = self.kv.match(r.keys, limit) if limit > 0 else (0, 0)
        return Prefix((hbm + host) * bs, hbm, host)

    def _held(self, r: Req, upto: int) -> int:
        """Tokens whose blocks ``r`` holds once admitted with its first ``upto``: its whole length where the
        admission reserves it."""
        return max(upto, r.prompt + r.target + self.draft_tokens) if self.reserve_whole_length else upto

    def fits(self, r: Req, prefix: Prefix, tokens: int, available: int) -> bool:
        """Whether ``available`` blocks hold ``r``'s first ``tokens`` beyond ``prefix`` (its whole length where the
        admission reserves it, and its window KV).

        Cached prefix blocks it would reference stop being evictable, so they come off ``available`` too.
        """
        kv = self.kv
        need = kv.blocks_for(self._held(r, prefix.base + tokens)) - prefix.hbm + self.seq_blocks
        return need <= available - kv.evictable_among(r.keys[:prefix.hbm])

    def admit(self, r: Req, prefix: Prefix, tokens: int) -> bool:
        """Give a waiting request the blocks for ``prefix`` plus its first ``tokens``; False if they do not fit."""
        if prefix.swap:
            return self._swap_in(r, tokens)
        if r.swapped:  # the host tier evicted its KV: recompute after all
            r.lost, r.swapped = r.swapped, 0
        if not self.fits(r, prefix, tokens, self.kv.available):
            return False
        self._take_prefix(r, prefix, tokens)
        self._count_admission(r, prefix.base)
        r.kv_ready = False
        return True

    def _swap_in(self, r: Req, tokens: int) -> bool:
        """Reload a preempted request's KV from the host tier (its prefix blocks were released at preemption)."""
        kv, host = self.kv, self.kv.host
        assert host is not None
        blocks = kv.blocks_for(self._held(r, r.swapped + tokens))
        if blocks + self.seq_blocks > kv.available:
            return False
        moved = host.pop(("swap", r.rid))   # before allocating: blocks it evicts to the host could push this out
        kv.allocate(blocks + self.seq_blocks)
        self.copy_s += host.transfer_time(moved)
        r.n_blocks, r.computed, r.swapped, r.window_blocks = blocks, r.swapped, 0, self.seq_blocks
        r.next_register = -1  # restored KV is private; its prefix blocks were released to the cache at preemption
        return True

    def _take_prefix(self, r: Req, prefix: Prefix, tokens: int) -> None:
        """Reference the HBM prefix hits, allocate the rest, and load the host-tier hits into shared blocks.

        The host hits leave the host tier first: allocating evicts cached HBM blocks into the host tier, whose
        LRU could otherwise drop the very entries this request is about to load.
        """
        kv = self.kv
        hit_keys = r.keys[:prefix.hbm]
        loaded = self._take_host_hits(r, prefix)
        total = kv.blocks_for(self._held(r, prefix.base + tokens))
        kv.acquire(hit_keys)
        kv.allocate(total - prefix.hbm + self.seq_blocks)
        r.window_blocks = self.seq_blocks
        r.hashed = list(hit_keys)
        r.next_register = prefix.hbm if r.next_register >= 0 else -1
        if loaded:
            self._share_host_hits(r, loaded)
        r.n_blocks, r.computed = total, prefix.base

    def _take_host_hits(self, r: Req, prefix: Prefix) -> list[Hashable]:
        """Remove the prefix blocks found in the host tier from it (they are copied back to HBM)."""
        host = self.kv.host
        keys = r.keys[prefix.hbm:prefix.hbm + prefix.host]
        if keys:
            assert host is not None
            for k in keys:
                host.pop(k)
        return list(keys)

    def _share_host_hits(self, r: Req, keys: list[Hashable]) -> None:
        """Register the blocks copied back from the host tier as shared prefix blocks again."""
        kv, host = self.kv, self.kv.host
        assert host is not None
        for k in keys:
            if kv.register(k):
                r.hashed.append(k)
                r.next_register += 1
            else:
                r.next_register = -1
                break
        self.copy_s += host.transfer_time(len(keys))
        self.c.host_hit_tokens += len(keys) * kv.block_size

    def _count_admission(self, r: Req, computed0: int) -> None:
        """Prompt and prefix-cache counters on a request's first admission; recompute after a lost preemption."""
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

    # ---- while running ---------------------------------------------------------------------------

    def register(self, r: Req) -> None:
        """Share the request's newly full prompt blocks through the prefix cache."""
        kv = self.kv
        full = min(r.computed // kv.block_size, len(r.keys))
        while 0 <= r.next_register < full and len(r.hashed) == r.next_register:
            k = r.keys[r.next_register]
            if not kv.register(k):
                r.next_register = -1
                return
            r.hashed.append(k)
            r.next_register += 1

    def evict(self, victim: Req) -> None:
        """Preemption: park the victim's KV in the host tier when it fits there, else drop it to recompute."""
        host = self.kv.host
        if host is not None and victim.computed > 0 and host.put(("swap", victim.rid), victim.n_blocks):
            victim.swapped = victim.computed
            self.copy_s += host.transfer_time(victim.n_blocks)
            self.c.swapped_out_blocks += victim.n_blocks
        else:
            victim.lost = victim.computed
        self.release(victim)
        victim.computed = 0
        victim.next_register = 0 if not victim.kv_ready else -1
        victim.kv_ready = False

    # ---- leaving ---------------------------------------------------------------------------------

    def release(self, r: Req) -> None:
        """Give back every block the request holds (shared ones stay cached, evictable once unreferenced)."""
        self.kv.release(r.hashed, r.n_blocks - len(r.hashed) + r.window_blocks)
        r.hashed, r.n_blocks, r.window_blocks = [], 0, 0

    def drop(self, r: Req) -> None:
        """A cancelled request: release its blocks and forget any KV it parked in the host tier."""
        self.release(r)
        host: HostTier | None = self.kv.host
        if host is not None and ("swap", r.rid) in host:
            host.pop(("swap", r.rid))

    def retire(self, r: Req) -> None:
        """A finished request leaves: in a session, its output blocks stay cached for the next turn.

        A session's next prompt extends this one byte for byte (history + reply +
        new message), so, as vLLM does by hashing generated blocks too, the
        reply's full blocks are registered under session-scoped keys the engine
        maps onto the next turn's prompt (``SimEngine.submit``).
        """
        kv = self.kv
        if (self.reuse_reply_blocks and kv.prefix_caching and r.spec.session_id and r.next_register >= 0
                and len(r.hashed) == r.next_register):
            full = r.computed // kv.block_size
            for j in range(len(r.hashed), full):
                k: Hashable = r.keys[j] if j < len(r.keys) else ("sess", r.spec.session_id, r.spec.turn, j)
                if not kv.register(k):
                    break
                r.hashed.append(k)
            r.final_keys = list(r.hashed)
        self.release(r)
